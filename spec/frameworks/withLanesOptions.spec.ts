// What both framework entries' withLanes refuse, each with a ConfigError naming the field, and
// what they hand back: the same kind of tools, a tool of another kind passed through as it is.
import { expect } from 'chai';
import { tool as agentsTool, webSearchTool } from '@openai/agents';
import { DynamicStructuredTool, StructuredTool, tool as langchainTool } from '@langchain/core/tools';
import { z } from 'zod';
import { ConcurrencyConfig, ConfigError, ToolLanes } from '../../lib/index.js';
import { withLanes as withLangChainLanes } from '../../lib/langchain.js';
import { withLanes as withAgentsLanes } from '../../lib/openaiAgents.js';

const schema = z.object({ q: z.string() });
const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
const agentsLookup = agentsTool({ name: 'lookup', description: 'Look up.', parameters: schema, execute: ({ q }) => q });
const langchainLookup = langchainTool(({ q }) => q, { name: 'lookup', description: 'Look up.', schema });

function refusal(make: () => unknown): { field: string; message: string } {
  try {
    make();
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return { field: (error as ConfigError).field, message: (error as ConfigError).message };
  }
  throw new Error('expected a ConfigError');
}

const entries = [
  { name: 'openai-agents', wrap: (tools: unknown, lanes: unknown, options?: unknown) => withAgentsLanes(tools as never, lanes as never, options as never), tools: [agentsLookup] },
  { name: 'langchain', wrap: (tools: unknown, lanes: unknown, options?: unknown) => withLangChainLanes(tools as never, lanes as never, options as never), tools: [langchainLookup] },
];

describe('withLanes options, in agent-lanes/openai-agents and agent-lanes/langchain', () => {
  for (const { name, wrap, tools } of entries) {
    describe(name, () => {
      const cases: Array<{ title: string; make: () => unknown; field: string; says: RegExp }> = [
        { title: 'tools that are not an array', make: () => wrap({ lookup: tools[0] }, toolLanes), field: 'tools', says: /tools must be an array/ },
        { title: 'a tool that is not one', make: () => wrap([42], toolLanes), field: 'tools[0]', says: /tools\[0\] must be/ },
        { title: 'toolLanes that is not a ToolLanes', make: () => wrap(tools, {}), field: 'toolLanes', says: /toolLanes must be a ToolLanes/ },
        { title: 'an unknown option', make: () => wrap(tools, toolLanes, { tennant: 'a' }), field: 'tennant', says: /withLanes has no field tennant; its fields are tenant, signal, requestId, concurrency, idempotent, parallelSafe, cost/ },
        { title: 'a flag for a tool that is not there', make: () => wrap(tools, toolLanes, { idempotent: { lokup: true } }), field: 'idempotent.lokup', says: /idempotent names lokup, which is not one of the tools \(lookup\)/ },
        { title: 'a flag that is not a boolean', make: () => wrap(tools, toolLanes, { parallelSafe: { lookup: 'no' } }), field: 'parallelSafe.lookup', says: /parallelSafe\.lookup must be true or false, got "no"/ },
        { title: 'a cost below 0', make: () => wrap(tools, toolLanes, { cost: { lookup: -1 } }), field: 'cost.lookup', says: /cost\.lookup must be a finite number from 0 up/ },
      ];
      for (const { title, make, field, says } of cases) {
        it(`refuses ${title}, naming ${field}`, () => {
          const { field: named, message } = refusal(make);
          expect(named).to.equal(field);
          expect(message).to.match(says);
        });
      }
      it('refuses a tenant that is not a string, as ToolLanes.request does', () => {
        expect(() => wrap(tools, toolLanes, { tenant: 7 })).to.throw(TypeError, /tenant must be a non-empty string, got 7/);
      });
    });
  }

  it('openai-agents: a function tool is a copy with its own invoke and every other field the same; a hosted tool is passed through', () => {
    const search = webSearchTool();
    const [wrapped, hosted] = withAgentsLanes([agentsLookup, search], toolLanes);
    expect(hosted).to.equal(search);
    expect(wrapped).to.not.equal(agentsLookup);
    expect(wrapped!.invoke).to.not.equal(agentsLookup.invoke);
    const { invoke: _mine, ...rest } = wrapped as typeof agentsLookup;
    const { invoke: _theirs, ...original } = agentsLookup;
    expect(rest).to.deep.equal(original);
  });

  it('langchain: a wrapped tool is the tool underneath, of its class, with its own invoke', () => {
    const structured = new DynamicStructuredTool({ name: 'quote', description: 'Quote.', schema, func: async ({ q }) => q });
    const [wrapped, other] = withLangChainLanes([langchainLookup, structured], toolLanes);
    expect(Object.getPrototypeOf(wrapped)).to.equal(langchainLookup);
    expect(other).to.be.instanceOf(StructuredTool);
    expect([wrapped!.name, wrapped!.description, wrapped!.schema]).to.deep.equal([langchainLookup.name, langchainLookup.description, langchainLookup.schema]);
    expect(Object.prototype.hasOwnProperty.call(wrapped, 'invoke')).to.equal(true);
  });
});
