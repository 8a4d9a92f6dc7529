// The composition matrix, an interrupt and resume: one turn of six calls to `work` (which needs
// approval); the runner approves four and defers c2 and c5 to a person, so the run ends
// interrupted after running the four; 50 ms later a person approves both and the run is resumed,
// on the same runner, from its snapshot read back from JSON (virtual time). Counted from the
// bodies' side across both halves: the kind's bound holds and is reached, each body runs once (a
// call settled before the interrupt never again), every call ends once in call order, every
// permit is back.
import { expect } from 'chai';
import { VirtualTimeScheduler } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type RunResult } from '../../lib/index.js';
import { after, BUDGET, budgetEndings, concurrencyOf, declarationOf, expectInCallOrder, expectKind, ids, inVirtualTime, kinds, outcomes, Tally, TENANT, TOOL } from './kinds.js';

const agent = new Agent({ name: 'approver', instructions: '', model: 'scripted' });
const calls = ids('c', 6);
const deferred = new Set(['c2', 'c5']);

const behaviour: Record<(typeof kinds)[number], string> = {
  turn: 'before the interrupt and after the resume, the turn runs at most two at once, and two at once',
  tool: "before the interrupt and after the resume, the tool's calls run at most two at once, and two at once",
  tenant: "before the interrupt and after the resume, the tenant's calls run at most two at once, and two at once",
  rate: 'across the interrupt and the resume, no 200 ms holds more than two starts, and one holds two',
  adaptive: 'across the interrupt and the resume, the adaptive limit (max 2) is never passed, and is reached',
  budget: 'the four calls run before the interrupt spend the budget; the two approved on resume are refused, never started',
};

describe('composition matrix: an interrupt and resume', () => {
  for (const kind of kinds) {
    it(`${kind} × interrupt and resume: ${behaviour[kind]}`, async () => {
      const scheduler = new VirtualTimeScheduler();
      const tally = new Tally();
      const tools = new ToolRegistry().register({ ...declarationOf(kind), needsApproval: true }, async (_args, ctx) => {
        tally.started(ctx.callId, ctx.runId, scheduler.now());
        await after(scheduler, 40);
        tally.ended(ctx.callId);
        return 'done';
      });
      const turn = { toolCalls: calls.map((id) => ({ id, name: TOOL, arguments: {} })) };
      const runner = new AgentRunner({
        provider: new ScriptedProvider([turn, { text: 'done' }]),
        tools,
        concurrency: concurrencyOf(kind),
        approve: (call) => (deferred.has(call.callId) ? 'defer' : true),
        scheduler,
        loopStallMs: false,
      });
      const [first, resumed] = await inVirtualTime(scheduler, async (): Promise<[RunResult, RunResult]> => {
        const interrupted = await runner.run(agent, 'go', { tenant: TENANT });
        if (interrupted.status !== 'interrupted') return [interrupted, interrupted];
        await after(scheduler, 50);
        const snapshot = JSON.parse(JSON.stringify(interrupted.snapshot)) as typeof interrupted.snapshot;
        return [interrupted, await runner.resume(agent, snapshot, { tenant: TENANT, approvals: { c2: true, c5: true } })];
      });

      expect(first.status).to.equal('interrupted');
      expect(resumed.status).to.equal('completed');
      const events = [...first.events.slice(0, -1), ...resumed.events];
      const covered = ['c1', 'c3', 'c4', 'c6'].slice(0, BUDGET);
      expectKind(kind, tally, kind === 'budget' ? covered : calls);
      expectInCallOrder(events, calls);
      expect(outcomes(events)).to.deep.equal(kind === 'budget' ? budgetEndings(calls, covered) : calls.map((id) => `${id} result`));
      expect(runner.lanes.occupancy().filter((lane) => lane.holders > 0 || lane.waiters > 0), 'lanes still held').to.deep.equal([]);
    });
  }
});
