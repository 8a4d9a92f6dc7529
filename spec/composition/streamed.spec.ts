// The composition matrix, a streamed turn: the model writes six calls to `work` 5 ms apart, each
// call gated and started as its part arrives, bodies of 40 ms, under each kind of lane in turn
// (virtual time). Counted from the bodies' side: the kind's bound holds and is reached, each body
// runs once, every call ends once in call order, every permit is back.
import { expect } from 'chai';
import { concat, map, timer, VirtualTimeScheduler } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type ModelStreamPart } from '../../lib/index.js';
import { after, BUDGET, budgetEndings, concurrencyOf, declarationOf, expectInCallOrder, expectKind, ids, inVirtualTime, kinds, outcomes, Tally, TENANT, TOOL } from './kinds.js';

const agent = new Agent({ name: 'streamer', instructions: '', model: 'scripted' });
const calls = ids('c', 6);

const behaviour: Record<(typeof kinds)[number], string> = {
  turn: 'the streamed calls run at most two at once, and two at once',
  tool: "the tool's calls run at most two at once, and two at once",
  tenant: "the tenant's calls run at most two at once, and two at once",
  rate: 'no 200 ms holds more than two starts, and one holds two',
  adaptive: 'the adaptive limit (max 2) is never passed, and is reached',
  budget: 'the four calls the budget covers run; the two it cannot are refused, never started',
};

describe('composition matrix: a streamed turn', () => {
  for (const kind of kinds) {
    it(`${kind} × streamed turn: ${behaviour[kind]}`, async () => {
      const scheduler = new VirtualTimeScheduler();
      const tally = new Tally();
      const tools = new ToolRegistry().register(declarationOf(kind), async (_args, ctx) => {
        tally.started(ctx.callId, ctx.runId, scheduler.now());
        await after(scheduler, 40);
        tally.ended(ctx.callId);
        return 'done';
      });
      const stream = () =>
        concat(
          ...calls.map((id) => timer(5, scheduler).pipe(map((): ModelStreamPart => ({ type: 'tool-call', id, name: TOOL, arguments: {} })))),
          timer(5, scheduler).pipe(map((): ModelStreamPart => ({ type: 'finish', finishReason: 'tool-calls' }))),
        );
      const runner = new AgentRunner({ provider: new ScriptedProvider([stream, { text: 'done' }]), tools, concurrency: concurrencyOf(kind), scheduler, loopStallMs: false });
      const result = await inVirtualTime(scheduler, () => runner.run(agent, 'go', { tenant: TENANT }));

      expect(result.status).to.equal('completed');
      const covered = calls.slice(0, BUDGET);
      expectKind(kind, tally, kind === 'budget' ? covered : calls);
      expectInCallOrder(result.events, calls);
      expect(outcomes(result.events)).to.deep.equal(kind === 'budget' ? budgetEndings(calls, covered) : calls.map((id) => `${id} result`));
      expect(runner.lanes.occupancy().filter((lane) => lane.holders > 0 || lane.waiters > 0), 'lanes still held').to.deep.equal([]);
    });
  }
});
