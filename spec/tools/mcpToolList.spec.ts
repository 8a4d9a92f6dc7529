// A server's notifications/tools/list_changed is followed: a tool it adds becomes callable and is
// shown to the model from the next turn; a tool it removes is no longer shown, and a later call
// to it fails alone, saying it was removed. Against a real McpServer, which sends the
// notification itself when a tool is registered or removed after it connected.
import { McpServer, type RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import { expect } from 'chai';
import { z } from 'zod';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, ToolRemovedError, type ModelRequest, type ToolContext } from '../../lib/index.js';
import { inMemory, until, type InMemory } from './mcpMemory.js';
import { outcomes } from './outcomes.js';

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });


const names = (request: ModelRequest): string[] => request.tools.map((tool) => tool.name);

describe('an MCP server whose list of tools changes', () => {
  let served: InMemory;
  let server: McpServer;
  let old: RegisteredTool;
  let registry: ToolRegistry;
  const sent: string[] = [];

  beforeEach(async () => {
    sent.length = 0;
    server = new McpServer({ name: 'shop', version: '1.0.0' });
    old = server.registerTool('old', { description: 'The old way', inputSchema: {} }, async () => {
      sent.push('old');
      return { content: [{ type: 'text', text: 'old answer' }] };
    });
    // Adds `late` and removes `old`, then answers once the registry has followed the change, so
    // the next turn is asked after it (the client lists the tools again while this call waits).
    server.registerTool('mutate', { description: 'Changes the tools', inputSchema: {} }, async () => {
      sent.push('mutate');
      server.registerTool('late', { description: 'Added later', inputSchema: { n: z.number() } }, async ({ n }) => {
        sent.push('late');
        return { content: [{ type: 'text', text: `late ${n}` }] };
      });
      old.remove();
      await until(() => registry.has('late') && !registry.has('old'));
      return { content: [{ type: 'text', text: 'changed' }] };
    });
    served = await inMemory(server);
    registry = await new ToolRegistry().registerMcp(served.client);
  });
  afterEach(() => served.close());

  it('shows an added tool from the next turn and runs it; a removed one is no longer shown and its call fails alone, saying so', async () => {
    const provider = new ScriptedProvider([
      { toolCalls: [{ id: 'm', name: 'mutate', arguments: {} }] },
      { toolCalls: [{ id: 'l', name: 'late', arguments: { n: 7 } }, { id: 'o', name: 'old', arguments: {} }] },
      { text: 'done' },
    ]);
    const result = await new AgentRunner({ provider, tools: registry }).run(agent, 'go');
    expect(result.status).to.equal('completed');
    expect(names(provider.requests[0]!)).to.deep.equal(['old', 'mutate']);
    expect(names(provider.requests[1]!)).to.deep.equal(['mutate', 'late']);
    expect(provider.requests[1]!.tools.find((tool) => tool.name === 'late')!.parameters).to.deep.include({ required: ['n'] });
    expect(outcomes(result)).to.deep.equal(['m=changed', 'l=late 7', 'o!ToolRemovedError: old was removed: MCP server shop no longer lists it; the call was not sent']);
    expect(sent).to.deep.equal(['mutate', 'late']);
  });

  it('fails a call of a removed tool whose body was taken before the change, without sending it', async () => {
    const body = registry.get('old')!.body;
    old.remove();
    await until(() => !registry.has('old'));
    const ctx = { callId: 'c', tool: 'old', tenant: 't', runId: 'r', idempotencyKey: 'r:c', signal: new AbortController().signal, fences: {}, state: {}, messages: [], record: () => undefined, progress: () => undefined, reportCost: () => undefined, runAgent: () => Promise.reject(new Error('no')) } as ToolContext;
    const failure = await Promise.resolve(body({}, ctx)).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).to.be.instanceOf(ToolRemovedError);
    expect(failure).to.deep.include({ tool: 'old', why: 'MCP server shop no longer lists it' });
    expect(sent).to.deep.equal([]);
    expect(registry.removedWhy('old')).to.equal('MCP server shop no longer lists it');
  });

  it('runs an agent that lists a removed tool: only that call fails; a tool listed again comes back', async () => {
    const picky = new Agent({ name: 'picky', instructions: '', model: 'test-model', tools: ['old', 'mutate'] });
    old.remove();
    await until(() => !registry.has('old'));
    const runner = new AgentRunner({ provider: new ScriptedProvider({ picky: [{ toolCalls: [{ id: 'o', name: 'old', arguments: {} }] }, { text: 'done' }] }), tools: registry });
    const result = await runner.run(picky, 'go');
    expect(outcomes(result)).to.deep.equal(['o!ToolRemovedError: old was removed: MCP server shop no longer lists it; the call was not sent']);
    server.registerTool('old', { description: 'The old way, back', inputSchema: {} }, async () => ({ content: [{ type: 'text', text: 'old answer' }] }));
    await until(() => registry.has('old'));
    const again = await new AgentRunner({ provider: new ScriptedProvider({ picky: [{ toolCalls: [{ id: 'o', name: 'old', arguments: {} }] }, { text: 'done' }] }), tools: registry }).run(picky, 'go');
    expect(outcomes(again)).to.deep.equal(['o=old answer']);
  });
});
