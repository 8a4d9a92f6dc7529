// Nested runs: a tool body calling ctx.runAgent(subAgent, input) runs the sub-agent on the
// same runner and tenant, spends the shared lanes its caller already stands in (so a tenant
// lane of 1 does not deadlock it), shows up on runner.activity$ under its parent run and
// call, and is cancelled when the call that started it is stopped.
import { expect } from 'chai';
import { NEVER } from 'rxjs';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  LaneTable,
  OnToolError,
  ScriptedProvider,
  ToolRegistry,
  type LaneChange,
  type NestedRunResult,
  type RunnerActivity,
  type RunResult,
  type Script,
  type ToolCall,
} from '../../lib/index.js';

const planner = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model', tools: ['delegate'] });
const researcher = new Agent({ name: 'researcher', instructions: 'research', model: 'test-model', tools: ['search'] });

const ask = (id: string, name: string): ToolCall => ({ id, name, arguments: {} });

/** The planner delegates once; the researcher searches twice at once, then answers. */
const delegatingScript = (): Script => ({
  planner: [{ toolCalls: [ask('d1', 'delegate')] }, { text: 'planned' }],
  researcher: [{ toolCalls: [ask('s1', 'search'), ask('s2', 'search')] }, { text: 'found two hotels' }],
});

interface Seen {
  /** What each search call saw, in the order they ran. */
  searches: Array<{ callId: string; tenant: string; runId: string }>;
  /** What ctx.runAgent gave back to each delegate call. */
  nested: NestedRunResult[];
}

/** `delegate` runs the researcher and returns its status and output; `search` answers at once. */
function delegatingTools(seen: Seen): ToolRegistry {
  return new ToolRegistry()
    .register({ name: 'delegate' }, async (_args, ctx) => {
      const result = await ctx.runAgent(researcher, 'find hotels in Lisbon');
      seen.nested.push(result);
      return { status: result.status, output: result.output };
    })
    .register({ name: 'search', idempotent: true }, (_args, ctx) => {
      seen.searches.push({ callId: ctx.callId, tenant: ctx.tenant, runId: ctx.runId });
      return Promise.resolve(`hit for ${ctx.callId}`);
    });
}

/** Fails (and cancels the run) instead of hanging when `run` does not finish in time: a deadlock shows as a failure. */
async function within(run: (signal: AbortSignal) => Promise<RunResult>, ms: number): Promise<RunResult> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new Error(`the run did not finish within ${ms}ms: deadlocked`));
    }, ms);
  });
  try {
    return await Promise.race([run(controller.signal), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

const isCallActivity = (a: RunnerActivity): a is Extract<RunnerActivity, { type: 'queued' | 'started' | 'settled' }> =>
  a.type === 'queued' || a.type === 'started' || a.type === 'settled';

describe('AgentRunner: nested runs', () => {
  describe('ctx.runAgent', () => {
    it('runs the sub-agent on the same runner and tenant and gives back { status: completed, output }', async () => {
      const seen: Seen = { searches: [], nested: [] };
      const provider = new ScriptedProvider(delegatingScript());
      const runner = new AgentRunner({ provider, tools: delegatingTools(seen) });
      const result = await runner.run(planner, 'plan a trip', { tenant: 'acme' });

      expect(result.status).to.equal('completed');
      expect(result.output).to.equal('planned');
      // the sub-run asked the runner's provider as the researcher, between the planner's two turns
      expect(provider.requests.map((r) => r.agent)).to.deep.equal(['planner', 'researcher', 'researcher', 'planner']);
      // the sub-run's tools ran for the parent's tenant, in a run of their own
      const started = result.events[0]!;
      const parentRunId = started.type === 'RUN_STARTED' ? started.runId : undefined;
      expect(seen.searches.map((s) => s.tenant)).to.deep.equal(['acme', 'acme']);
      expect(seen.searches[0]!.runId).to.be.a('string').and.not.equal(parentRunId);
      // what runAgent resolved with, and what the delegate call returned to the planner
      expect(seen.nested).to.have.length(1);
      expect(seen.nested[0]).to.deep.include({ status: 'completed', output: 'found two hotels' });
      const delegated = result.events.find((e) => e.type === 'TOOL_RESULT' && e.callId === 'd1');
      expect(delegated).to.deep.include({ type: 'TOOL_RESULT', result: { status: 'completed', output: 'found two hotels' } });
    });
  });

  describe('lanes', () => {
    it('completes without deadlock under perTenant 1: the nested run spends the tenant lane its caller holds', async () => {
      const seen: Seen = { searches: [], nested: [] };
      const runner = new AgentRunner({
        provider: new ScriptedProvider(delegatingScript()),
        tools: delegatingTools(seen),
        concurrency: new ConcurrencyConfig({ perTenant: 1, perTool: { delegate: 1, search: 1 } }),
      });
      const result = await within((signal) => runner.run(planner, 'plan a trip', { tenant: 'acme', signal }), 2000);
      expect(result.status).to.equal('completed');
      expect(seen.nested.map((r) => r.status)).to.deep.equal(['completed']);
      expect(seen.searches.map((s) => s.callId)).to.deep.equal(['s1', 's2']);
      expect(runner.lanes.occupancy()).to.deep.equal([]);
    });

    it('never has more than one holder of the tenant lane during the nested run: the nested calls run in the permit their caller lends', async () => {
      const seen: Seen = { searches: [], nested: [] };
      const lanes = new LaneTable();
      const changes: LaneChange[] = [];
      const watching = lanes.changes$.subscribe((change) => changes.push(change));
      const runner = new AgentRunner({
        provider: new ScriptedProvider(delegatingScript()),
        tools: delegatingTools(seen),
        concurrency: new ConcurrencyConfig({ perTenant: 1, perTool: { delegate: 1, search: 1 } }),
        lanes,
      });
      try {
        const result = await within((signal) => runner.run(planner, 'plan a trip', { tenant: 'acme', signal }), 2000);
        expect(result.status).to.equal('completed');
      } finally {
        watching.unsubscribe();
      }
      const tenant = changes.filter((c) => c.key === 'tenant:acme');
      const search = changes.filter((c) => c.key === 'tool:search');
      // the tenant lane was in use (by the delegate call), and the nested searches went through their own lane
      expect(tenant.map((c) => c.change)).to.include('granted');
      expect(search.filter((c) => c.change === 'granted')).to.have.length(2);
      expect(Math.max(...tenant.map((c) => c.holders))).to.equal(1);
      // only the delegate call was granted the tenant's one permit; a nested search that found the
      // lent permit busy waited on the lane too, and withdrew once the lent permit came back
      expect(tenant.filter((c) => c.change === 'granted')).to.have.length(1);
      expect(tenant.filter((c) => c.change === 'queued').length).to.equal(tenant.filter((c) => c.change === 'withdrawn').length);
      expect(lanes.size).to.equal(0);
    });
  });

  describe('activity$', () => {
    it('reports the sub-run as started under its parent run and calling call, and its calls with the same parent', async () => {
      const seen: Seen = { searches: [], nested: [] };
      const runner = new AgentRunner({ provider: new ScriptedProvider(delegatingScript()), tools: delegatingTools(seen) });
      const activities: RunnerActivity[] = [];
      const watching = runner.activity$.subscribe((a) => activities.push(a));
      let result: RunResult;
      try {
        result = await runner.run(planner, 'plan a trip', { tenant: 'acme' });
      } finally {
        watching.unsubscribe();
      }
      const started = result.events[0]!;
      expect(started.type).to.equal('RUN_STARTED');
      const parentRunId = started.type === 'RUN_STARTED' ? started.runId : '';

      const runStarts = activities.filter((a) => a.type === 'run-started');
      const parentStart = runStarts.find((a) => a.runId === parentRunId);
      expect(parentStart).to.deep.include({ agent: 'planner', tenant: 'acme' });
      expect(parentStart!.parent).to.equal(undefined);

      const subStart = runStarts.find((a) => a.type === 'run-started' && a.agent === 'researcher');
      expect(subStart, 'a run-started for the researcher').to.not.equal(undefined);
      expect(subStart!.parent).to.deep.equal({ runId: parentRunId, callId: 'd1' });
      expect(subStart).to.deep.include({ tenant: 'acme' });

      const subCalls = activities.filter(isCallActivity).filter((a) => a.runId === subStart!.runId);
      expect(subCalls.filter((a) => a.type === 'started').map((a) => a.callId)).to.deep.equal(['s1', 's2']);
      for (const activity of subCalls) expect(activity.parent, `${activity.type} ${activity.callId}`).to.deep.equal({ runId: parentRunId, callId: 'd1' });

      const subEnd = activities.find((a) => a.type === 'run-ended' && a.runId === subStart!.runId);
      expect(subEnd).to.deep.include({ status: 'completed', parent: { runId: parentRunId, callId: 'd1' } });
      // the parent's own calls carry no parent
      const parentCalls = activities.filter(isCallActivity).filter((a) => a.runId === parentRunId);
      expect(parentCalls.map((a) => a.callId)).to.include('d1');
      for (const activity of parentCalls) expect(activity.parent).to.equal(undefined);
    });
  });

  describe('stopping', () => {
    /** `delegate` starts the researcher, whose `search` hangs until stopped; both report what they saw. */
    function hangingNested() {
      const seen: { nested?: Promise<NestedRunResult>; searchSignal?: AbortSignal; delegateSignal?: AbortSignal } = {};
      let searchStarted!: () => void;
      const searching = new Promise<void>((resolve) => (searchStarted = resolve));
      const tools = new ToolRegistry()
        .register({ name: 'delegate' }, (_args, ctx) => {
          seen.delegateSignal = ctx.signal;
          seen.nested = ctx.runAgent(researcher, 'find hotels in Lisbon');
          return seen.nested;
        })
        .register({ name: 'search' }, (_args, ctx) => {
          seen.searchSignal = ctx.signal;
          searchStarted();
          return NEVER;
        });
      const provider = new ScriptedProvider({
        planner: [{ toolCalls: [ask('d1', 'delegate')] }, { text: 'planned without research' }],
        researcher: [{ toolCalls: [ask('s1', 'search')] }, { text: 'never asked for' }],
      });
      return { seen, tools, provider, searching };
    }

    it('cancels the nested run when the parent run is cancelled: it resolves cancelled and its tool\'s signal aborts', async () => {
      const { seen, tools, provider, searching } = hangingNested();
      const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ perTenant: 2 }) });
      const controller = new AbortController();
      const parent = runner.run(planner, 'plan a trip', { tenant: 'acme', signal: controller.signal });
      await searching;
      controller.abort();

      const result = await parent;
      expect(result.status).to.equal('cancelled');
      expect(result.events.map((e) => e.type)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'TOOL_INDETERMINATE', 'RUN_CANCELLED']);
      expect(seen.delegateSignal!.aborted).to.equal(true);

      const nested = await seen.nested!;
      expect(nested.status).to.equal('cancelled');
      expect(seen.searchSignal!.aborted).to.equal(true);
      expect(provider.requests.map((r) => r.agent)).to.deep.equal(['planner', 'researcher']);
      expect(runner.lanes.occupancy()).to.deep.equal([]);
    });

    it('cancels the nested run when the calling call outruns its perToolSeconds, and the parent run goes on', async () => {
      const { seen, tools, provider } = hangingNested();
      const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ perTenant: 2, perToolSeconds: { delegate: 0.02 } }) });
      const result = await runner.run(planner, 'plan a trip', { tenant: 'acme' });

      expect(result.status).to.equal('completed');
      expect(result.output).to.equal('planned without research');
      const d1 = result.events.find((e) => e.type === 'TOOL_ERROR' && e.callId === 'd1');
      expect(d1 !== undefined && d1.type === 'TOOL_ERROR' && d1.error.name).to.equal('ToolTimedOutError');

      const nested = await seen.nested!;
      expect(nested.status).to.equal('cancelled');
      expect(seen.searchSignal!.aborted).to.equal(true);
      expect(runner.lanes.occupancy()).to.deep.equal([]);
    });
  });

  describe('runAgent once its call can no longer run one', () => {
    /**
     * `delegate` starts, then waits for `late` before it calls runAgent (having read its signal
     * first, or not); the test decides what happens to the call meanwhile. What runAgent gave
     * back, what the provider was asked and what activity$ showed are kept.
     */
    function lateDelegate(options: { readSignalFirst: boolean; returnFirst?: boolean; concurrency?: ConcurrencyConfig; onToolError?: OnToolError }) {
      let callLate!: () => void;
      const late = new Promise<void>((resolve) => (callLate = resolve));
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      const seen: { nested?: Promise<NestedRunResult>; signal?: AbortSignal } = {};
      const tools = new ToolRegistry()
        .register({ name: 'delegate' }, (_args, ctx) => {
          if (options.readSignalFirst) seen.signal = ctx.signal;
          started();
          const asked = late.then(() => (seen.nested = ctx.runAgent(researcher, 'too late')));
          // A body that returns at once and keeps ctx, or one that waits (and is stopped meanwhile).
          return options.returnFirst === true ? 'returned' : asked.then(() => new Promise(() => undefined));
        })
        .register({ name: 'search' }, () => 'x')
        .register({ name: 'fail' }, () => running.then(() => Promise.reject(new Error('boom'))));
      const provider = new ScriptedProvider({
        planner: [{ toolCalls: [ask('d1', 'delegate'), ask('f1', 'fail')] }, { text: 'planned' }],
        researcher: [{ toolCalls: [ask('s1', 'search')] }, { text: 'never asked for' }],
      });
      const runner = new AgentRunner({ provider, tools, ...(options.concurrency ? { concurrency: options.concurrency } : {}) });
      const activities: RunnerActivity[] = [];
      const watching = runner.activity$.subscribe((a) => activities.push(a));
      const planning = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model', tools: ['delegate', 'fail'], ...(options.onToolError ? { onToolError: options.onToolError } : {}) });
      return {
        runner,
        provider,
        seen,
        running,
        planning,
        /** Lets the body call runAgent, and resolves with what it gave back. */
        async callLate(): Promise<NestedRunResult> {
          callLate();
          await late;
          try {
            return await seen.nested!;
          } finally {
            watching.unsubscribe();
          }
        },
        nestedActivity: () => activities.filter((a) => 'parent' in a && a.parent !== undefined),
      };
    }

    /** runAgent gave back a cancelled result at once, and nothing of a sub-run was started. */
    function expectNothingStarted(nested: NestedRunResult, late: ReturnType<typeof lateDelegate>, message: RegExp): void {
      expect(nested.status).to.equal('cancelled');
      expect(nested.error?.name).to.equal('RunCancelled');
      expect(nested.error?.message).to.match(message);
      expect(nested.state).to.deep.equal({});
      expect(late.provider.requests.map((r) => r.agent), 'the sub-agent was never asked').to.not.include('researcher');
      expect(late.nestedActivity(), 'no activity of a sub-run').to.deep.equal([]);
      expect(late.runner.lanes.occupancy()).to.deep.equal([]);
    }

    for (const readSignalFirst of [true, false]) {
      const how = readSignalFirst ? 'having read its signal' : 'without having read its signal';
      it(`starts nothing after the run was cancelled (a body ${how}), and resolves cancelled`, async () => {
        const late = lateDelegate({ readSignalFirst });
        const controller = new AbortController();
        const parent = late.runner.run(late.planning, 'plan', { signal: controller.signal });
        await late.running;
        controller.abort('user left');
        expect((await parent).status).to.equal('cancelled');
        const nested = await late.callLate();
        expectNothingStarted(nested, late, /^never started: call d1 \(delegate\) (was stopped|is over)/);
        if (readSignalFirst) expect(nested.error?.message).to.match(/^never started: call d1 \(delegate\) was stopped \(.+\)$/);
      });
    }

    it('starts nothing after its call outran its perToolSeconds, while the parent run goes on', async () => {
      const late = lateDelegate({ readSignalFirst: true, concurrency: new ConcurrencyConfig({ perToolSeconds: { delegate: 0.01 } }) });
      const result = await late.runner.run(late.planning, 'plan');
      expect(result.status).to.equal('completed');
      const nested = await late.callLate();
      expectNothingStarted(nested, late, /^never started: call d1 \(delegate\) was stopped \(delegate outran its 0.01s ceiling\)$/);
    });

    it('starts nothing after a sibling failed under FAIL_RUN and stopped the batch', async () => {
      const late = lateDelegate({ readSignalFirst: true, onToolError: OnToolError.FAIL_RUN });
      const result = await late.runner.run(late.planning, 'plan');
      expect(result.status).to.equal('failed');
      const nested = await late.callLate();
      expectNothingStarted(nested, late, /^never started: call d1 \(delegate\) was stopped/);
    });

    it('starts nothing once its call settled: a body that kept ctx and calls later is told its call is over', async () => {
      const late = lateDelegate({ readSignalFirst: false, returnFirst: true });
      const result = await late.runner.run(late.planning, 'plan');
      expect(result.status).to.equal('completed');
      const nested = await late.callLate();
      expectNothingStarted(nested, late, /^never started: call d1 \(delegate\) is over; a body starts nested runs only while its call runs$/);
    });
  });
});
