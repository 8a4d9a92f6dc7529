// Every ending honest: a stopped call's body is told (its signal aborted, even when first read
// after the stop); a body that ignores its abort keeps its lanes until it settles (or until
// abandonAfterSeconds gives up on it), and activity$ shows the overrun; nested runs count against
// the shared lanes through the permits their caller lends; activity$'s settled outcome is the
// transcript's, and every call that was queued or started is settled, however the run ended.
import { expect } from 'chai';
import fc from 'fast-check';
import { lastValueFrom, toArray, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { runBatch, type BatchCall, type CallActivity, type InvokeContext, type Outcome } from '../../lib/batch/index.js';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  LaneTable,
  OnToolError,
  ScriptedProvider,
  ToolRegistry,
  WorkerPool,
  type RunnerActivity,
  type RunEvent,
  type ToolCall,
} from '../../lib/index.js';
import { brief } from '../batch/helpers.js';
import { seed } from './seed.js';

const agent = new Agent({ name: 'planner', instructions: '', model: 'scripted' });
const failRun = new Agent({ name: 'planner', instructions: '', model: 'scripted', onToolError: OnToolError.FAIL_RUN });
const ask = (id: string, name: string, args: Readonly<Record<string, unknown>> = {}): ToolCall => ({ id, name, arguments: args });
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A promise and its resolver, for a body whose end the spec decides. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * A body's answer that settles when the virtual clock says so: a thenable told synchronously,
 * so an overrunning body can be marble-tested (a Promise would settle a microtask after the flush).
 * It ignores its abort, as a body that does not read its signal does.
 */
function settlesAt(scheduler: TestScheduler, frame: number, value: string): PromiseLike<string> {
  const thenable = {
    then(ok?: ((v: string) => unknown) | null): unknown {
      scheduler.schedule(() => ok?.(value), frame - scheduler.now());
      return thenable;
    },
  };
  return thenable as PromiseLike<string>;
}

function line(a: CallActivity): string {
  switch (a.type) {
    case 'queued':
      return `${a.at} queued ${a.callId} ${a.lane}`;
    case 'started':
      return `${a.at} started ${a.callId}`;
    case 'ended':
      return `${a.at} ended ${a.callId} ${a.outcome}${a.overrun ? ' overrun' : ''}`;
    case 'released':
      return `${a.at} released ${a.callId}${a.abandoned ? ' abandoned' : ''}`;
    case 'settled':
      return `${a.at} settled ${a.callId} ${a.outcome}`;
    case 'progress':
      return `${a.at} progress ${a.callId} ${a.progress}`;
    case 'limit-changed':
      return `${a.at} limit ${a.lane} ${a.previous} -> ${a.limit}`;
  }
}

describe('every ending honest', () => {
  describe("a stopped call's body is told", () => {
    const stops: Array<{ title: string; options: { concurrency?: object; deadline?: object }; agent: Agent; calls: ToolCall[]; cancelAfterMs?: number }> = [
      { title: 'its own ceiling (perToolSeconds)', options: { concurrency: { perToolSeconds: { slow: 0.005 } } }, agent, calls: [ask('c1', 'slow')] },
      { title: 'a cancel (the run signal)', options: {}, agent, calls: [ask('c1', 'slow')], cancelAfterMs: 5 },
      { title: 'the toolCallSeconds deadline', options: { deadline: { toolCallSeconds: 0.005 } }, agent, calls: [ask('c1', 'slow')] },
      { title: 'FAIL_RUN (a sibling failed)', options: {}, agent: failRun, calls: [ask('c1', 'slow'), ask('c2', 'broken')] },
    ];

    for (const stop of stops) {
      it(`sees its signal aborted when it first reads it after ${stop.title}`, async () => {
        const reads: Array<{ aborted: boolean; reason: unknown }> = [];
        const bodyDone = deferred();
        const tools = new ToolRegistry()
          .register({ name: 'slow' }, async (_args, ctx) => {
            // It reads its signal only after a step of its own, by which time its call was stopped.
            await sleep(25);
            reads.push({ aborted: ctx.signal.aborted, reason: ctx.signal.reason });
            bodyDone.resolve();
            return 'late';
          })
          .register({ name: 'broken' }, () => {
            throw new Error('broken on purpose');
          });
        const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: stop.calls }, { text: 'done' }]), tools, loopStallMs: false, ...stop.options });
        const controller = new AbortController();
        if (stop.cancelAfterMs !== undefined) setTimeout(() => controller.abort(), stop.cancelAfterMs);
        const result = await runner.run(stop.agent, 'go', { signal: controller.signal });
        const c1 = result.events.find((e) => 'callId' in e && e.callId === 'c1');
        expect(c1?.type, 'the call was stopped, not answered').to.be.oneOf(['TOOL_ERROR', 'TOOL_INDETERMINATE']);
        await bodyDone.promise;
        expect(reads).to.have.length(1);
        expect(reads[0]!.aborted).to.equal(true);
        expect(reads[0]!.reason).to.be.instanceOf(Error);
      });
    }
  });

  describe('a body that ignores its abort still occupies its lane', () => {
    let testScheduler: TestScheduler;
    beforeEach(() => {
      testScheduler = new TestScheduler((a, e) => {
        expect(a).to.deep.equal(e);
      });
    });

    function overrunBatch(concurrency: ConcurrencyConfig) {
      const seen: string[] = [];
      const outcomes: string[] = [];
      testScheduler.run(({ cold, flush }) => {
        const lanes = new LaneTable();
        const calls: BatchCall[] = [
          { callId: 'a', tool: 'slow', invoke: () => settlesAt(testScheduler, 50, 'late') },
          { callId: 'b', tool: 'slow', invoke: () => cold('--(b|)') },
        ];
        runBatch(calls, { concurrency, shared: { lanes, concurrency }, onActivity: (a) => seen.push(line(a)) }).subscribe((o) => outcomes.push(`${testScheduler.now()} ${brief(o)}`));
        flush();
        expect(lanes.size, 'every lane idle once the body settled').to.equal(0);
      });
      return { seen, outcomes };
    }

    it('keeps its permit past its ceiling until the body settles: the next call waits for it', () => {
      const { seen, outcomes } = overrunBatch(new ConcurrencyConfig({ perTool: { slow: 1 }, perToolSeconds: { slow: 0.01 } }));
      expect(outcomes).to.deep.equal(['10 a!ToolTimedOutError', '52 b=b']);
      expect(seen).to.deep.equal([
        '0 started a',
        '0 queued b tool:slow',
        '10 ended a error overrun',
        '10 settled a error',
        '50 released a',
        '50 started b',
        '52 ended b result',
        '52 settled b result',
      ]);
    });

    it('gives the permit back after abandonAfterSeconds, reported as abandoned, while the body still runs', () => {
      const { seen, outcomes } = overrunBatch(new ConcurrencyConfig({ perTool: { slow: 1 }, perToolSeconds: { slow: 0.01 }, abandonAfterSeconds: 0.02 }));
      expect(outcomes).to.deep.equal(['10 a!ToolTimedOutError', '32 b=b']);
      // the body's late answer (at 50) changes nothing once it was abandoned
      expect(seen).to.deep.equal([
        '0 started a',
        '0 queued b tool:slow',
        '10 ended a error overrun',
        '10 settled a error',
        '30 released a abandoned',
        '30 started b',
        '32 ended b result',
        '32 settled b result',
      ]);
    });

    it('keeps the permits of a body still running when the batch is unsubscribed, until it settles', () => {
      testScheduler.run(({ flush }) => {
        const lanes = new LaneTable();
        const concurrency = new ConcurrencyConfig({ perTool: { slow: 1 } });
        const seen: string[] = [];
        const subscription = runBatch([{ callId: 'a', tool: 'slow', invoke: () => settlesAt(testScheduler, 40, 'late') }], {
          concurrency,
          shared: { lanes, concurrency },
          onActivity: (a) => seen.push(line(a)),
        }).subscribe();
        testScheduler.schedule(() => subscription.unsubscribe(), 10);
        testScheduler.schedule(() => {
          expect(lanes.get('tool:slow')?.holders, 'held while the body runs').to.equal(1);
        }, 20);
        flush();
        expect(lanes.size).to.equal(0);
        expect(seen).to.deep.equal(['0 started a', '10 ended a indeterminate overrun', '10 settled a indeterminate', '40 released a']);
      });
    });

    it('reports the overrun on activity$ and keeps the shared lane busy after RUN_CANCELLED, until the body settles', async () => {
      const done = deferred();
      const tools = new ToolRegistry().register({ name: 'stubborn' }, () => done.promise.then(() => 'finally'));
      const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [ask('c1', 'stubborn')] }, { text: 'done' }]), tools, concurrency: { perTool: { stubborn: 1 } }, loopStallMs: false });
      const activity: string[] = [];
      const watching = runner.activity$.subscribe((a) => {
        if (a.type === 'ended' || a.type === 'released') activity.push(`${a.type} ${a.callId}${a.type === 'ended' && a.overrun ? ' overrun' : ''}`);
      });
      const controller = new AbortController();
      const result = runner.run(agent, 'go', { signal: controller.signal });
      await sleep(5);
      controller.abort();
      expect((await result).status).to.equal('cancelled');
      expect(runner.lanes.occupancy().map((o) => `${o.key} ${o.holders}`)).to.deep.equal(['tenant:default 0', 'tool:stubborn 1'].filter((l) => !l.startsWith('tenant')));
      done.resolve();
      await sleep(0);
      expect(runner.lanes.occupancy()).to.deep.equal([]);
      expect(activity).to.deep.equal(['ended c1 overrun', 'released c1']);
      watching.unsubscribe();
    });

    it('WorkerPool and lanes agree: with perTool no wider than its threads, no call waiting in the lane is refused by the pool after a sibling timed out', async function () {
      this.timeout(20_000);
      const pool = new WorkerPool({ threads: 1, queue: 0 });
      try {
        const tools = new ToolRegistry().register({ name: 'spin' }, pool.body(new URL('../fixtures/pool-module.mjs', import.meta.url), 'spin'));
        const calls = ['c1', 'c2', 'c3'].map((id) => ask(id, 'spin', { ms: 3_000 }));
        const runner = new AgentRunner({
          provider: new ScriptedProvider([{ toolCalls: calls }, { text: 'done' }]),
          tools,
          concurrency: { perTool: { spin: 1 }, perToolSeconds: { spin: 0.1 } },
          loopStallMs: false,
        });
        const result = await runner.run(agent, 'go');
        const errors = result.events.filter((e): e is Extract<RunEvent, { type: 'TOOL_ERROR' }> => e.type === 'TOOL_ERROR').map((e) => e.error.name);
        expect(errors).to.deep.equal(['ToolTimedOutError', 'ToolTimedOutError', 'ToolTimedOutError']);
      } finally {
        await pool.close();
      }
    });
  });

  describe('nested runs count against the shared lanes', () => {
    const researcher = new Agent({ name: 'researcher', instructions: '', model: 'scripted', tools: ['search'] });
    const planner = new Agent({ name: 'planner', instructions: '', model: 'scripted', tools: ['delegate', 'search'] });

    function fanOut(perTenant: number, parentSearches = 0) {
      let running = 0;
      let peak = 0;
      const tools = new ToolRegistry()
        .register({ name: 'delegate' }, async (_args, ctx) => (await ctx.runAgent(researcher, 'ten searches')).status)
        .register({ name: 'search', idempotent: true }, async () => {
          running++;
          peak = Math.max(peak, running);
          await sleep(2);
          running--;
          return 'hit';
        });
      const searches = Array.from({ length: 10 }, (_, i) => ask(`s${i}`, 'search'));
      const parentCalls = [ask('d1', 'delegate'), ...Array.from({ length: parentSearches }, (_, i) => ask(`p${i}`, 'search'))];
      const runner = new AgentRunner({
        provider: new ScriptedProvider({ planner: [{ toolCalls: parentCalls }, { text: 'planned' }], researcher: [{ toolCalls: searches }, { text: 'found' }] }),
        tools,
        concurrency: { perTenant },
        loopStallMs: false,
      });
      return { runner, peak: () => peak };
    }

    it('a delegate whose sub-agent fans out 10 searches under perTenant 1 runs them one at a time, and finishes', async () => {
      const { runner, peak } = fanOut(1);
      const result = await runner.run(planner, 'go', { tenant: 'acme' });
      expect(result.status).to.equal('completed');
      expect(result.events.find((e) => e.type === 'TOOL_RESULT' && e.callId === 'd1')).to.deep.include({ result: 'completed' });
      expect(peak()).to.equal(1);
      expect(runner.lanes.occupancy()).to.deep.equal([]);
    });

    it('under perTenant 3 the tree never has more than 3 permits of the tenant out, caller included', async () => {
      const { runner, peak } = fanOut(3, 2);
      const lanes = runner.lanes as LaneTable;
      let holders = 0;
      const watching = lanes.changes$.subscribe((c) => c.key === 'tenant:acme' && (holders = Math.max(holders, c.holders)));
      const result = await runner.run(planner, 'go', { tenant: 'acme' });
      watching.unsubscribe();
      expect(result.status).to.equal('completed');
      expect(holders).to.be.at.most(3);
      expect(peak()).to.be.at.most(3);
      expect(runner.lanes.occupancy()).to.deep.equal([]);
    });
  });

  describe("activity$'s settled outcome is the transcript's", () => {
    const outcomeOf = (e: RunEvent): string | undefined =>
      e.type === 'TOOL_RESULT' ? 'result' : e.type === 'TOOL_ERROR' ? 'error' : e.type === 'TOOL_INDETERMINATE' ? 'indeterminate' : undefined;

    async function settledBeside(runner: AgentRunner, run: (r: AgentRunner) => Promise<RunEvent[]>) {
      const settled = new Map<string, string[]>();
      const watching = runner.activity$.subscribe((a) => a.type === 'settled' && settled.set(a.callId, [...(settled.get(a.callId) ?? []), a.outcome]));
      const events = await run(runner);
      watching.unsubscribe();
      const transcript = new Map(events.filter((e) => outcomeOf(e) !== undefined).map((e) => [(e as { callId: string }).callId, [outcomeOf(e)!]]));
      return { settled, transcript };
    }

    it('shows a result an output guardrail refused as an error, as the transcript does', async () => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => 'secret');
      const runner = new AgentRunner({
        provider: new ScriptedProvider([{ toolCalls: [ask('c1', 'lookup'), ask('c2', 'lookup')] }, { text: 'done' }]),
        tools,
        guardrails: { output: (call) => (call.callId === 'c2' ? 'leaks a secret' : undefined) },
        loopStallMs: false,
      });
      const { settled, transcript } = await settledBeside(runner, async (r) => (await r.run(agent, 'go')).events as RunEvent[]);
      expect(transcript.get('c2')).to.deep.equal(['error']);
      expect(settled).to.deep.equal(transcript);
    });

    it('shows a result JSON cannot carry as an error, as the transcript does', async () => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, (_args, ctx) => (ctx.callId === 'c1' ? () => 'a function' : 'fine'));
      const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [ask('c1', 'lookup'), ask('c2', 'lookup')] }, { text: 'done' }]), tools, loopStallMs: false });
      const { settled, transcript } = await settledBeside(runner, async (r) => (await r.run(agent, 'go')).events as RunEvent[]);
      expect(transcript.get('c1')).to.deep.equal(['error']);
      expect(settled).to.deep.equal(transcript);
    });

    it('settles every call that was queued or started exactly once when the run is unsubscribed, at any moment', () => {
      fc.assert(
        fc.property(
          fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 6 }),
          fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
          fc.integer({ min: 0, max: 12 }),
          (latencies, maxConcurrentTools, leaveAt) => {
            const testScheduler = new TestScheduler(() => undefined);
            const seen: RunnerActivity[] = [];
            testScheduler.run(({ cold, flush }) => {
              const tools = new ToolRegistry().register({ name: 'lookup' }, (_args, ctx) => cold(`${'-'.repeat(latencies[Number(ctx.callId.slice(1))]!)}(r|)`, { r: 'x' }) as Observable<string>);
              const calls = latencies.map((_, i) => ask(`c${i}`, 'lookup'));
              const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: calls }, { text: 'done' }]), tools, concurrency: { maxConcurrentTools }, loopStallMs: false });
              runner.activity$.subscribe((a) => seen.push(a));
              const subscription = runner.run$(agent, 'go').subscribe();
              testScheduler.schedule(() => subscription.unsubscribe(), leaveAt);
              flush();
            });
            const calls = new Set(seen.filter((a) => a.type === 'queued' || a.type === 'started').map((a) => (a as { callId: string }).callId));
            for (const callId of calls) {
              const settled = seen.filter((a) => a.type === 'settled' && a.callId === callId);
              expect(settled, `${callId} settled once`).to.have.length(1);
            }
          },
        ),
        { numRuns: 100, seed },
      );
    });
  });

  describe('lent permits (runBatch)', () => {
    it('hands a nested batch the caller\'s lanes as loans, and the loans end with the call', async () => {
      const lanes = new LaneTable();
      const concurrency = new ConcurrencyConfig({ perTenant: 1, perTool: { delegate: 1 } });
      const shared = { lanes, concurrency };
      let kept: ReadonlyMap<string, unknown> | undefined;
      const outcomes: Outcome[] = await lastValueFrom(
        runBatch(
          [
            {
              callId: 'outer',
              tool: 'delegate',
              invoke: (ctx: InvokeContext) => {
                kept = ctx.lent;
                return lastValueFrom(runBatch([{ callId: 'inner', tool: 'delegate', invoke: () => 'deep' }], { shared, lent: ctx.lent, tenant: 'acme' }).pipe(toArray()));
              },
            },
          ],
          { shared, tenant: 'acme' },
        ).pipe(toArray()),
      );
      expect(outcomes.map((o) => o.kind)).to.deep.equal(['result']);
      expect([...kept!.keys()].sort()).to.deep.equal(['tenant:acme', 'tool:delegate']);
      // a nested batch started after its caller ended takes the lane itself, never the dead loan
      const late = await lastValueFrom(runBatch([{ callId: 'late', tool: 'delegate', invoke: () => 'ok' }], { shared, lent: kept as never, tenant: 'acme' }).pipe(toArray()));
      expect(late.map(brief)).to.deep.equal(['late=ok']);
      expect(lanes.size).to.equal(0);
    });
  });
});
