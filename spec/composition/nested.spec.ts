// The composition matrix, a nested run: a planner's turn asks for w1, d1, d2, w2 (w: `work`, d:
// `delegate`, whose body runs a researcher with ctx.runAgent); each researcher's turn asks for
// three `work` calls (d1-n1..d1-n3, d2-n1..d2-n3). Bodies of 40 ms, virtual time. Counted from the
// `work` bodies' side (what a partner behind `work` sees), across the whole tree of runs: the
// kind's bound holds and is reached (the turn lane per run: a nested run's turn lane is its own),
// each body runs once, every call of every run ends once in call order, every permit is back.
import { expect } from 'chai';
import { VirtualTimeScheduler } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type Message, type ModelRequest, type NestedRunResult } from '../../lib/index.js';
import { after, concurrencyOf, declarationOf, expectInCallOrder, expectKind, inVirtualTime, kinds, outcomes, Tally, TENANT, TOOL } from './kinds.js';

const planner = new Agent({ name: 'planner', instructions: '', model: 'scripted', tools: [TOOL, 'delegate'] });
const researcher = new Agent({ name: 'researcher', instructions: '', model: 'scripted', tools: [TOOL] });
const outer = ['w1', 'd1', 'd2', 'w2'];
const nestedOf = (delegate: string): string[] => [1, 2, 3].map((n) => `${delegate}-n${n}`);
const allWork = ['w1', 'w2', ...nestedOf('d1'), ...nestedOf('d2')];

const behaviour: Record<(typeof kinds)[number], string> = {
  turn: 'each run of the tree, the nested ones with turn lanes of their own, runs at most two at once, and two at once',
  tool: "the tool's calls of the whole tree run at most two at once, and two at once",
  tenant: "the tenant's calls of the whole tree run at most two at once (nested ones in the permits their callers lend), and two at once",
  rate: 'the starts of the whole tree: no 200 ms holds more than two, and one holds two',
  adaptive: 'the adaptive limit (max 2) holds over the whole tree, and is reached',
  budget: "the budget covers the first four calls to take it, w1 and d1's three (d1's run asks its model at once, before d2 and w2 take their lanes); d2 and w2 are refused, never started",
};

/** How a tool message tells its call's ending, in the words of `outcomes`. */
const told = (m: Message): string => `${m.toolCallId} ${m.isError === true ? (/budget is spent/.test(m.content) ? 'error budget' : 'error') : 'result'}`;

describe('composition matrix: a nested run', () => {
  for (const kind of kinds) {
    it(`${kind} × nested run: ${behaviour[kind]}`, async () => {
      const scheduler = new VirtualTimeScheduler();
      const tally = new Tally();
      const nestedResults: NestedRunResult[] = [];
      // What each researcher's second turn was told of its calls, in the order it was told: by delegate.
      const nestedTold = new Map<string, string[]>();
      const tools = new ToolRegistry()
        .register(declarationOf(kind), async (args, ctx) => {
          const { id } = args as { id: string };
          tally.started(id, ctx.runId, scheduler.now());
          await after(scheduler, 40);
          tally.ended(id);
          return 'done';
        })
        .register({ name: 'delegate' }, async (args, ctx) => {
          const result = await ctx.runAgent(researcher, (args as { id: string }).id);
          nestedResults.push(result);
          return result.status;
        });
      const researching = (request: ModelRequest) => {
        const delegate = request.messages.find((m) => m.role === 'user')!.content;
        const toolMessages = request.messages.filter((m) => m.role === 'tool');
        if (toolMessages.length > 0) {
          nestedTold.set(delegate, toolMessages.map(told));
          return { text: 'found' };
        }
        return { toolCalls: nestedOf(delegate).map((id) => ({ id, name: TOOL, arguments: { id } })) };
      };
      const provider = new ScriptedProvider({
        planner: [{ toolCalls: outer.map((id) => ({ id, name: id.startsWith('w') ? TOOL : 'delegate', arguments: { id } })) }, { text: 'planned' }],
        researcher: [researching, researching, researching, researching],
      });
      const runner = new AgentRunner({ provider, tools, concurrency: concurrencyOf(kind), scheduler, loopStallMs: false });
      const result = await inVirtualTime(scheduler, () => runner.run(planner, 'go', { tenant: TENANT }));

      expect(result.status).to.equal('completed');
      // Under the budget, d2 is refused before its body starts: it runs no researcher.
      const delegates = kind === 'budget' ? ['d1'] : ['d1', 'd2'];
      expect(nestedResults.map((r) => r.status)).to.deep.equal(delegates.map(() => 'completed'));
      const covered = ['w1', ...nestedOf('d1')];
      expectKind(kind, tally, kind === 'budget' ? covered : allWork);
      expectInCallOrder(result.events, outer);
      expect(outcomes(result.events)).to.deep.equal(kind === 'budget' ? ['w1 result', 'd1 result', 'd2 error budget', 'w2 error budget'] : outer.map((id) => `${id} result`));
      expect([...nestedTold.keys()].sort()).to.deep.equal(delegates);
      for (const d of delegates) expect(nestedTold.get(d), `what ${d}'s researcher was told`).to.deep.equal(nestedOf(d).map((id) => `${id} result`));
      expect(runner.lanes.occupancy().filter((lane) => lane.holders > 0 || lane.waiters > 0), 'lanes still held').to.deep.equal([]);
    });
  }
});
