// ToolLanes in virtual time, counted from the bodies: the shared lanes (per tool, per tenant)
// bound calls across requests and tenants, a request's maxConcurrentTools bounds that request
// alone, identical arguments of a tool that is not parallel-safe run one at a time, a partner's
// 429 pauses the tool, and a runner sharing the store shares the limits.
import { expect } from 'chai';
import { asyncScheduler, mergeMap, throwError, timer } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { Agent, AgentRunner, BudgetExceededError, ConcurrencyConfig, LaneTable, RateLimitedError, ScriptedProvider, ToolLanes, ToolRegistry, type RunnerActivity } from '../../lib/index.js';
import { Bodies, settledOf, type Settled } from './helpers.js';

describe('ToolLanes: the lanes around any framework\'s calls', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('bounds each tool and each tenant across the requests of two tenants', async () => {
    const bodies = new Bodies(asyncScheduler);
    const results: Array<Promise<Settled<string>>> = [];
    let lanes!: ToolLanes;
    testScheduler.run(() => {
      lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { search: 3 }, perTenant: 2 }) });
      const acme = lanes.request({ tenant: 'acme' });
      const beta = lanes.request({ tenant: 'beta' });
      for (const [request, who] of [[acme, 'a'], [beta, 'b']] as const) {
        for (const n of [1, 2, 3]) results.push(settledOf(request.run({ tool: 'search', callId: `${who}${n}` }, bodies.answering(`${who}${n}`))));
      }
    });
    expect(bodies.most((run) => run.tool === 'search')).to.equal(3);
    expect(bodies.most((run) => run.tenant === 'acme')).to.equal(2);
    expect(bodies.most((run) => run.tenant === 'beta')).to.equal(2);
    // a1, a2 fill acme's lane; b1 takes the last search; b2 holds beta's second permit and waits for a search.
    expect(bodies.starts()).to.deep.equal({ a1: 0, a2: 0, b1: 0, b2: 10, a3: 10, b3: 10 });
    expect((await Promise.all(results)).map((settled) => ('value' in settled ? settled.value : 'error'))).to.deep.equal(['a1', 'a2', 'a3', 'b1', 'b2', 'b3']);
    expect(lanes.lanes.occupancy()).to.deep.equal([]);
  });

  it("bounds each request by its own maxConcurrentTools, not by another request's", async () => {
    const bodies = new Bodies(asyncScheduler);
    const results: Array<Promise<unknown>> = [];
    testScheduler.run(() => {
      const lanes = new ToolLanes({ concurrency: { maxConcurrentTools: 2 } });
      for (const request of ['r', 's']) {
        const scope = lanes.request({ requestId: request });
        for (const n of [1, 2, 3]) results.push(scope.run({ tool: n === 3 ? 'fetch' : 'search' }, bodies.answering(`${request}${n}`)));
      }
    });
    await Promise.all(results);
    expect(bodies.most((run) => run.label.startsWith('r'))).to.equal(2);
    expect(bodies.most((run) => run.label.startsWith('s'))).to.equal(2);
    expect(bodies.most()).to.equal(4);
    expect(bodies.starts()).to.deep.equal({ r1: 0, r2: 0, s1: 0, s2: 0, r3: 10, s3: 10 });
  });

  it('narrows a request by its own concurrency, never widening the shared lanes', async () => {
    const bodies = new Bodies(asyncScheduler);
    const results: Array<Promise<unknown>> = [];
    testScheduler.run(() => {
      const lanes = new ToolLanes({ concurrency: { maxConcurrentTools: 4, perTool: { search: 2 } } });
      const narrow = lanes.request({ concurrency: new ConcurrencyConfig({ maxConcurrentTools: 1, perTool: { search: 5 } }) });
      for (const n of [1, 2]) results.push(narrow.run({ tool: 'fetch' }, bodies.answering(`f${n}`)));
      const wide = lanes.request({ concurrency: new ConcurrencyConfig({ maxConcurrentTools: 8, perTool: { search: 5 } }) });
      for (const n of [1, 2, 3]) results.push(wide.run({ tool: 'search' }, bodies.answering(`s${n}`)));
    });
    await Promise.all(results);
    expect(bodies.starts()).to.deep.equal({ f1: 0, s1: 0, s2: 0, f2: 10, s3: 10 });
  });

  it('runs calls of a tool that is not parallel-safe one at a time for identical arguments, across requests', async () => {
    const bodies = new Bodies(asyncScheduler);
    const results: Array<Promise<unknown>> = [];
    testScheduler.run(() => {
      const lanes = new ToolLanes({ concurrency: {} });
      const [one, two] = [lanes.request(), lanes.request()];
      results.push(one.run({ tool: 'book', args: { room: 1, night: 'fri' }, parallelSafe: false }, bodies.answering('x1')));
      results.push(two.run({ tool: 'book', args: { night: 'fri', room: 1 }, parallelSafe: false }, bodies.answering('x2')));
      results.push(two.run({ tool: 'book', args: { room: 2, night: 'fri' }, parallelSafe: false }, bodies.answering('y')));
    });
    await Promise.all(results);
    expect(bodies.starts()).to.deep.equal({ x1: 0, y: 0, x2: 10 });
  });

  it("pauses a tool when a body fails with RateLimitedError: the body's own error rejects, and the next call waits out retryAfterSeconds", async () => {
    const bodies = new Bodies(asyncScheduler);
    const slowDown = new RateLimitedError('the partner said slow down', 1);
    let first!: Promise<Settled<string>>;
    let second!: Promise<Settled<string>>;
    testScheduler.run(() => {
      const lanes = new ToolLanes({ concurrency: {} });
      first = settledOf(lanes.run({ tool: 'search', callId: 'c1' }, () => timer(10).pipe(mergeMap(() => throwError(() => slowDown)))));
      timer(20).subscribe(() => {
        second = settledOf(lanes.run({ tool: 'search', callId: 'c2' }, bodies.answering('c2')));
      });
    });
    expect(await first).to.deep.equal({ error: slowDown });
    expect((await first as { error: unknown }).error).to.equal(slowDown);
    expect(await second).to.deep.equal({ value: 'c2' });
    // Refused at 10 ms with a second to wait: the next search starts at 1010 ms, not at 20.
    expect(bodies.starts()).to.deep.equal({ c2: 1010 });
  });

  it('shares one LaneTable with an AgentRunner: runner calls and wrapped calls together never pass perTool', async () => {
    const bodies = new Bodies(asyncScheduler);
    const results: Array<Promise<unknown>> = [];
    let status: string | undefined;
    const activity: RunnerActivity[] = [];
    testScheduler.run(() => {
      const concurrency = new ConcurrencyConfig({ perTool: { search: 2 } });
      const tools = new ToolRegistry().register({ name: 'search' }, (_args, ctx) => bodies.answering(`run-${ctx.callId}`)({ ...ctx, requestId: ctx.runId, fence: undefined, fences: {}, progress: () => undefined, reportCost: () => undefined }));
      const provider = new ScriptedProvider([{ toolCalls: ['r1', 'r2', 'r3'].map((id) => ({ id, name: 'search', arguments: {} })) }, { text: 'done' }]);
      const lanes = new LaneTable();
      const runner = new AgentRunner({ provider, tools, concurrency, lanes });
      const wrapped = new ToolLanes({ concurrency: runner.concurrency, lanes: runner.lanes });
      wrapped.activity$.subscribe((event) => activity.push(event));
      runner.run$(new Agent({ name: 'a', instructions: 'i', model: 'm', freeText: true }), 'go').subscribe((event) => {
        if (event.type === 'RUN_COMPLETED') status = 'completed';
      });
      const request = wrapped.request({ requestId: 'w' });
      for (const id of ['w1', 'w2', 'w3']) results.push(request.run({ tool: 'search', callId: id }, bodies.answering(`wrapped-${id}`)));
    });
    await Promise.all(results);
    expect(status).to.equal('completed');
    expect(bodies.runs).to.have.length(6);
    expect(bodies.most()).to.equal(2);
    expect(bodies.runs.map((run) => run.end)).to.deep.equal([10, 10, 20, 20, 30, 30]);
    // The wrapped calls' activity has the runner's shape: its request's id as runId.
    expect(activity.filter((event) => event.type === 'queued').map((event) => 'runId' in event && event.runId)).to.include('w');
  });

  it('lowers an adaptive tool limit on a 429 from a body, as a runner\'s call does, and says so on activity$', async () => {
    const changes: Array<[number, number]> = [];
    const settled: Array<Promise<unknown>> = [];
    testScheduler.run(() => {
      const lanes = new ToolLanes({ concurrency: { perToolAdaptive: { search: { min: 1, max: 4, initial: 4 } } } });
      lanes.activity$.subscribe((event) => {
        if (event.type === 'limit-changed') changes.push([event.previous, event.limit]);
      });
      settled.push(settledOf(lanes.run({ tool: 'search' }, () => timer(5).pipe(mergeMap(() => throwError(() => new RateLimitedError('429 from the partner', 0)))))));
    });
    await Promise.all(settled);
    expect(changes).to.have.length(1);
    expect(changes[0]![1]).to.be.below(changes[0]![0]);
  });

  it("refuses a call the tenant's cost budget cannot cover, never starting it, with the budget's own BudgetExceededError (its class and fields)", async () => {
    const bodies = new Bodies(asyncScheduler);
    const settled: Array<Promise<Settled<string>>> = [];
    testScheduler.run(() => {
      const lanes = new ToolLanes({ concurrency: { perTenantBudget: { cost: 2, perSeconds: 60 } } });
      const request = lanes.request({ tenant: 'acme' });
      for (const n of [1, 2, 3]) settled.push(settledOf(request.run({ tool: 'search', cost: 1 }, bodies.answering(`s${n}`))));
    });
    const all = await Promise.all(settled);
    expect(all.slice(0, 2)).to.deep.equal([{ value: 's1' }, { value: 's2' }]);
    const { error } = all[2] as { error: Error };
    // The budget's own error, its class and fields kept: a caller can tell when to try again.
    expect(error).to.be.instanceOf(BudgetExceededError);
    const refusal = error as BudgetExceededError;
    expect(refusal.message).to.match(/acme needs 1 cost/);
    expect([refusal.tenant, refusal.measure, refusal.needed, refusal.left]).to.deep.equal(['acme', 'cost', 1, 0]);
    expect(refusal.until).to.be.a('number');
    expect(bodies.runs.map((run) => run.label)).to.deep.equal(['s1', 's2']);
  });
});
