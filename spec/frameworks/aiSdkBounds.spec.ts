// withLanes under the AI SDK's own loops: several concurrent requests of two tenants, each a
// generateText, streamText or ai 7 agent whose model asks for several calls a step, counted from
// the tool bodies: never more than perTool of a tool or perTenant of a tenant running at once,
// and each bound reached (without the lanes the same requests exceed it). An AI SDK runner and a
// wrapped loop on one LaneTable share its perTool.
import { tool } from 'ai';
import * as ai7 from 'ai7';
import { expect } from 'chai';
import { z } from 'zod';
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, ToolLanes, ToolRegistry, type ModelResponse } from '../../lib/index.js';
import { withLanes } from '../../lib/providers/aiSdkProvider.js';
import { askedIn, BodyTally, loops, scriptedModel, stepOf, toolResultsIn, turns, type Prompt, type ScriptedReply } from './aiSdkFixture.js';

const tenants = ['acme', 'globex'] as const;

// Each request's model: three searches and two page fetches, then two more searches, then its answer.
function script(prompt: Prompt): ScriptedReply {
  const asked = askedIn(prompt);
  switch (stepOf(prompt)) {
    case 0:
      return {
        calls: [
          ...[0, 1, 2].map((i) => ({ id: `${asked}-s${i}`, tool: 'search', input: { q: `${asked} ${i}` } })),
          ...[0, 1].map((i) => ({ id: `${asked}-f${i}`, tool: 'fetchPage', input: { url: `https://example.com/${asked}/${i}` } })),
        ],
      };
    case 1:
      return { calls: [3, 4].map((i) => ({ id: `${asked}-s${i}`, tool: 'search', input: { q: `${asked} ${i}` } })) };
    default:
      return { text: `done ${Object.keys(toolResultsIn(prompt)).length}` };
  }
}

// How many turns of the event loop a body works: its own, from its input, so runs differ by call.
const workOf = (text: string): number => 1 + ([...text].reduce((sum, c) => sum + c.charCodeAt(0), 0) % 7);

// The request's tools, as an app writes them with the SDK's tool(): each body counts itself.
function toolsFor(major: 6 | 7, tenant: string, tally: BodyTally) {
  const make = (major === 6 ? tool : ai7.tool) as typeof tool;
  return {
    search: make({
      description: 'Searches the web',
      inputSchema: z.object({ q: z.string() }),
      execute: async ({ q }) => {
        tally.enter('search', `tenant:${tenant}`);
        await turns(workOf(q));
        tally.leave('search', `tenant:${tenant}`);
        return `hits for ${q}`;
      },
    }),
    fetchPage: make({
      description: 'Fetches a page',
      inputSchema: z.object({ url: z.string() }),
      execute: async ({ url }) => {
        tally.enter('fetchPage', `tenant:${tenant}`);
        await turns(workOf(url));
        tally.leave('fetchPage', `tenant:${tenant}`);
        return `page ${url}`;
      },
    }),
  };
}

const concurrency = new ConcurrencyConfig({ perTool: { search: 2, fetchPage: 3 }, perTenant: 3 });

describe('withLanes: AI SDK tools inside the lanes, counted from the bodies', function () {
  this.timeout(30_000);

  for (const loop of loops) {
    it(`${loop.title}: six concurrent requests of two tenants never run more than perTool of a tool or perTenant of a tenant`, async () => {
      const tally = new BodyTally();
      const toolLanes = new ToolLanes({ concurrency });
      const model = scriptedModel(loop.major, script);
      const requests = [0, 1, 2, 3, 4, 5].map((i) => {
        const tenant = tenants[i % 2]!;
        const tools = withLanes(toolsFor(loop.major, tenant, tally), toolLanes, { tenant, idempotent: { search: true } });
        return loop.run(model, tools, `r${i}`);
      });
      const answers = await Promise.all(requests);
      // Every request ended on its own answer, with its seven results in the prompt.
      expect(answers).to.deep.equal(Array.from({ length: 6 }, () => 'done 7'));
      expect(tally.started, 'bodies that ran').to.have.length(42);
      expect(tally.mostAt('search'), 'searches running at once').to.equal(2);
      expect(tally.mostAt('fetchPage'), 'page fetches running at once').to.be.within(1, 3);
      for (const tenant of tenants) expect(tally.mostAt(`tenant:${tenant}`), `${tenant}'s bodies running at once`).to.equal(3);
    });
  }

  it('without the lanes, the same requests run more at once (what the bounds above hold back)', async () => {
    const tally = new BodyTally();
    const model = scriptedModel(6, script);
    await Promise.all([0, 1, 2, 3, 4, 5].map((i) => loops[0]!.run(model, toolsFor(6, tenants[i % 2]!, tally), `r${i}`)));
    expect(tally.mostAt('search')).to.be.above(2);
    expect(tally.mostAt('tenant:acme')).to.be.above(3);
  });

  it('a runner and a wrapped AI SDK loop on one LaneTable never run more than perTool together', async () => {
    const tally = new BodyTally();
    // Who runs now, by side, to see that both sides held the lane at the same moment.
    const sides = { runner: 0, sdk: 0, both: 0 };
    const body = (side: 'runner' | 'sdk') => async (q: string): Promise<string> => {
      tally.enter('search');
      sides[side]++;
      if (sides.runner > 0 && sides.sdk > 0) sides.both++;
      await turns(workOf(q));
      sides[side]--;
      tally.leave('search');
      return `hits for ${q}`;
    };
    const registry = new ToolRegistry().register({ name: 'search' }, (args) => body('runner')(String((args as { q?: unknown }).q)));
    const turn: ModelResponse = { toolCalls: [0, 1, 2, 3].map((i) => ({ id: `c${i}`, name: 'search', arguments: { q: `runner ${i}` } })) };
    const runner = new AgentRunner({ provider: new ScriptedProvider({ one: [turn, { text: 'done' }], two: [turn, { text: 'done' }] }), tools: registry, concurrency: { perTool: { search: 3 } } });
    const toolLanes = new ToolLanes({ concurrency: runner.concurrency, lanes: runner.lanes });
    const sdkTools = {
      search: tool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => body('sdk')(q) }),
    };
    const model = scriptedModel(6, (prompt) =>
      stepOf(prompt) === 0 ? { calls: [0, 1, 2, 3].map((i) => ({ id: `${askedIn(prompt)}-${i}`, tool: 'search', input: { q: `${askedIn(prompt)} ${i}` } })) } : { text: 'done' },
    );
    const agent = (name: string): Agent => new Agent({ name, instructions: 'Plan.', model: 'scripted' });
    const results = await Promise.all([
      runner.run(agent('one'), 'go'),
      runner.run(agent('two'), 'go'),
      loops[0]!.run(model, withLanes(sdkTools, toolLanes), 'a'),
      loops[1]!.run(model, withLanes(sdkTools, toolLanes), 'b'),
    ]);
    expect(results.map((r) => (typeof r === 'string' ? r : r.status))).to.deep.equal(['completed', 'completed', 'done', 'done']);
    expect(tally.started).to.have.length(16);
    expect(tally.mostAt('search'), 'searches running at once, runner and AI SDK together').to.equal(3);
    expect(sides.both, 'moments both sides ran a search').to.be.above(0);
  });
});
