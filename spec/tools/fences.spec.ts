// A call's fencing tokens on lanes shared by a fleet (a real RedisLaneStore): `ctx.fence` is the
// narrowest fleet lane's (identical arguments, else tool, else the declaration's own lane, such as
// an MCP server's, else tenant), `ctx.fences` has every fleet lane's by lane key, and an MCP call
// carries both to its server in `_meta`.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { expect } from 'chai';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type ToolCall, type ToolContext } from '../../lib/index.js';
import { RedisLaneStore } from '../../lib/redis.js';
import { redisFixture } from '../lanes/redis/server.js';
import { inMemory, type InMemory } from './mcpMemory.js';

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });
const ask = (id: string, name: string, args: Record<string, unknown> = {}): ToolCall => ({ id, name, arguments: args });

describe('fencing tokens by lane', function () {
  this.timeout(20_000);
  const redis = redisFixture('fences');
  let lanes: RedisLaneStore;
  before(() => {
    lanes = redis.store();
  });

  const seen = (): { contexts: Array<{ fence: string | undefined; fences: Readonly<Record<string, string>> }>; body: (args: unknown, ctx: ToolContext) => string } => {
    const contexts: Array<{ fence: string | undefined; fences: Readonly<Record<string, string>> }> = [];
    return { contexts, body: (_args, ctx) => (contexts.push({ fence: ctx.fence, fences: ctx.fences }), 'ok') };
  };

  it("gives every fleet lane's token by lane key, and ctx.fence is the tool lane's, not its server lane's", async () => {
    const { contexts, body } = seen();
    const tools = new ToolRegistry().register({ name: 'quote', lane: { key: 'mcp:hotel', limit: 3 } }, body);
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [ask('q', 'quote')] }, { text: 'done' }]), tools, lanes, concurrency: { perTool: { quote: 2 }, perTenant: 4 } });
    await runner.run(agent, 'go', { tenant: 'acme' });
    const [{ fence, fences }] = contexts as [(typeof contexts)[0]];
    expect(Object.keys(fences).sort()).to.deep.equal(['mcp:hotel', 'tenant:acme', 'tool:quote']);
    for (const token of Object.values(fences)) expect(token).to.match(/^\d+$/);
    expect(fence).to.equal(fences['tool:quote']);
    expect(Object.isFrozen(fences)).to.equal(true);
  });

  it('makes ctx.fence the identical-arguments lane of a parallelSafe:false tool, then the server lane, then the tenant lane', async () => {
    const book = seen();
    const own = seen();
    const tenantOnly = seen();
    const tools = new ToolRegistry()
      .register({ name: 'book', parallelSafe: false, lane: { key: 'mcp:hotel', limit: 3 } }, book.body)
      .register({ name: 'look', lane: { key: 'mcp:hotel', limit: 3 } }, own.body)
      .register({ name: 'note' }, tenantOnly.body);
    const runner = new AgentRunner({
      provider: new ScriptedProvider([{ toolCalls: [ask('b', 'book', { room: 1 }), ask('l', 'look'), ask('n', 'note')] }, { text: 'done' }]),
      tools,
      lanes,
      concurrency: { perTool: { book: 1 }, perTenant: 4 },
    });
    await runner.run(agent, 'go', { tenant: 'acme' });
    const b = book.contexts[0]!;
    const argsLane = Object.keys(b.fences).find((key) => key.startsWith('args:book:'))!;
    expect(argsLane).to.equal('args:book:{"room":1}');
    expect(b.fence).to.equal(b.fences[argsLane]);
    expect(own.contexts[0]!.fence).to.equal(own.contexts[0]!.fences['mcp:hotel']);
    expect(Object.keys(own.contexts[0]!.fences).sort()).to.deep.equal(['mcp:hotel', 'tenant:acme']);
    expect(tenantOnly.contexts[0]).to.deep.equal({ fence: tenantOnly.contexts[0]!.fences['tenant:acme'], fences: { 'tenant:acme': tenantOnly.contexts[0]!.fence } });
  });

  it('is empty on in-process lanes', async () => {
    const { contexts, body } = seen();
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [ask('q', 'quote')] }, { text: 'done' }]), tools: new ToolRegistry().register({ name: 'quote' }, body), concurrency: { perTool: { quote: 1 } } });
    await runner.run(agent, 'go');
    expect(contexts).to.deep.equal([{ fence: undefined, fences: {} }]);
  });

  describe('an MCP call', () => {
    let served: InMemory;
    const metas: Array<Record<string, unknown>> = [];
    before(async () => {
      const server = new McpServer({ name: 'hotel', version: '1.0.0' });
      server.registerTool('hold', { description: 'Holds a room', inputSchema: {}, annotations: { destructiveHint: true } }, async (_args, extra) => {
        metas.push((extra._meta ?? {}) as Record<string, unknown>);
        return { content: [{ type: 'text', text: 'held' }] };
      });
      served = await inMemory(server);
    });
    after(() => served.close());

    it('carries agent-lanes/fence and agent-lanes/fences (every fleet lane by key) to the server in _meta', async () => {
      const tools = await new ToolRegistry().registerMcp(served.client);
      const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [ask('h', 'hold')] }, { text: 'done' }]), tools, lanes, concurrency: { perTool: { hold: 1 } } });
      const result = await runner.run(agent, 'go', { tenant: 'acme' });
      expect(result.status).to.equal('completed');
      const meta = metas[0]!;
      const fences = meta['agent-lanes/fences'] as Record<string, string>;
      expect(Object.keys(fences).sort()).to.deep.equal(['args:hold:{}', 'mcp:hotel', 'tool:hold']);
      expect(meta['agent-lanes/fence']).to.equal(fences['args:hold:{}']);
      expect(meta['agent-lanes/idempotencyKey']).to.match(/:h$/);
    });
  });
});
