// Nested runs terminate under any limits: generated worlds where parent runs call a
// `delegate` tool whose body starts a sub-agent that calls leaf tools, over shared tool
// and tenant lanes as tight as one. Real (short) timers, since a nested run hands its
// result back as a Promise.
import { expect } from 'chai';
import fc from 'fast-check';
import { seed } from './seed.js';
import * as t from 'io-ts';
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, ToolRegistry, type ModelRequest, type ModelResponse, type ScriptStep } from '../../lib/index.js';

const limit = fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined });
const nestedWorld = fc.record({
  perTenant: limit,
  delegate: limit,
  search: limit,
  maxConcurrentTools: limit,
  parents: fc.array(fc.record({ delegates: fc.integer({ min: 1, max: 3 }), searches: fc.integer({ min: 0, max: 2 }), tenant: fc.constantFrom('acme', 'globex') }), { minLength: 1, maxLength: 3 }),
  childSearches: fc.integer({ min: 1, max: 3 }),
  latency: fc.integer({ min: 0, max: 3 }),
});

const calls = (name: string, n: number, prefix: string): ModelResponse['toolCalls'] =>
  Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}`, name, arguments: { topic: `${prefix}${i}` } }));

describe('nested runs (properties)', () => {
  it('terminate, whatever the limits, and leave every lane idle', async function () {
    this.timeout(30_000);
    await fc.assert(
      fc.asyncProperty(nestedWorld, async (world) => {
        const child = new Agent({ name: 'child', instructions: '', model: 'scripted' });
        // Every child run asks for its searches first, then answers: a function of its own request.
        const childTurn = (request: ModelRequest): ModelResponse =>
          request.messages.length === 1 ? { toolCalls: calls('search', world.childSearches, 's') } : { text: 'found' };
        const script: Record<string, ScriptStep[]> = { child: Array.from({ length: 40 }, () => childTurn) };
        const parents = world.parents.map((p, i) => {
          script[`parent${i}`] = [{ toolCalls: [...calls('delegate', p.delegates, 'd')!, ...calls('search', p.searches, 'q')!] }, { text: 'done' }];
          return new Agent({ name: `parent${i}`, instructions: '', model: 'scripted' });
        });
        const pause = () => new Promise((resolve) => setTimeout(resolve, world.latency));
        const Topic = t.type({ topic: t.string });
        const tools = new ToolRegistry()
          .register({ name: 'search', args: Topic }, async ({ topic }) => (await pause(), `hits for ${topic}`))
          .register({ name: 'delegate', args: Topic }, async ({ topic }, ctx) => {
            const result = await ctx.runAgent(child, `research ${topic}`);
            return `${result.status}: ${String(result.output)}`;
          });
        const perTool = Object.fromEntries(Object.entries({ delegate: world.delegate, search: world.search }).filter(([, v]) => v !== undefined)) as Record<string, number>;
        const runner = new AgentRunner({
          provider: new ScriptedProvider(script),
          tools,
          concurrency: new ConcurrencyConfig({ perTenant: world.perTenant, perTool, maxConcurrentTools: world.maxConcurrentTools }),
          loopStallMs: false,
        });
        let guard: NodeJS.Timeout | undefined;
        const deadlock = new Promise<'deadlock'>((resolve) => (guard = setTimeout(resolve, 3_000, 'deadlock')));
        const results = await Promise.race([Promise.all(parents.map((agent, i) => runner.run(agent, 'go', { tenant: world.parents[i]!.tenant }))), deadlock]);
        clearTimeout(guard);
        expect(results, 'the runs did not finish within 3s').to.not.equal('deadlock');
        if (results === 'deadlock') return;
        for (const result of results) {
          expect(result.status).to.equal('completed');
          expect(result.output).to.equal('done');
          const delegated = result.events.filter((e) => e.type === 'TOOL_RESULT' && e.tool === 'delegate');
          expect(delegated.map((e) => (e.type === 'TOOL_RESULT' ? e.result : undefined))).to.deep.equal(delegated.map(() => 'completed: found'));
        }
        expect(runner.lanes.occupancy()).to.deep.equal([]);
      }),
      { numRuns: 40, seed },
    );
  });
});
