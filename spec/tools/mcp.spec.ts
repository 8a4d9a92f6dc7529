// Tools from MCP servers, against real servers built with the SDK's McpServer (the fixture in
// spec/fixtures/mcpServer.mjs): over Streamable HTTP on 127.0.0.1 in this process, and over stdio
// as a child process. The server counts what it sees, so the lanes are checked where they matter:
// how many requests the server had running at once.
import { expect } from 'chai';
import { Agent, AgentRunner, ConfigError, ScriptedProvider, ToolRegistry, type RunnerActivity, type RunResult, type ToolCall } from '../../lib/index.js';
import { McpConnectionLostError, mcpTools, type McpClient } from '../../lib/mcp.js';
import { overHttp, overStdio, type Served } from './mcpServers.js';
import { outcomes } from './outcomes.js';

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });
const ask = (id: string, name: string, args: Record<string, unknown> = {}): ToolCall => ({ id, name, arguments: args });
const slow = (id: string, ms: number, name = 'slow'): ToolCall => ask(id, name, { ms, tag: id });


async function configError(make: () => Promise<unknown>): Promise<ConfigError> {
  try {
    await make();
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

/** Resolves once `test` holds, checking every few ms; fails after `ms`. */
async function until(test: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await test())) {
    if (Date.now() > end) throw new Error('the condition did not hold in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('mcpTools', () => {
  let web: Served;
  let docs: Served;
  before(async () => {
    web = await overHttp('web');
    docs = await overHttp('docs');
  });
  after(async () => {
    await web.close();
    await docs.close();
  });

  it('takes the SDK\'s Client as an McpClient (the compiler checks it)', () => {
    const client: McpClient = web.client;
    expect(client).to.equal(web.client);
  });

  describe('declarations', () => {
    it('registers every tool the server lists, with its input schema as the parameters the model is shown', async () => {
      const tools = await new ToolRegistry().registerMcp(web.client);
      expect(tools.names).to.deep.equal(['slow', 'hang', 'hangIdempotent', 'write', 'upsert', 'fail', 'stats']);
      const write = tools.specs(['write'])[0]!;
      expect(write).to.deep.equal({
        name: 'write',
        description: 'Writes a file',
        parameters: { type: 'object', properties: { path: { type: 'string', description: 'Where to write' }, text: { type: 'string' } }, required: ['path', 'text'] },
      });
    });

    it('reads the annotations: idempotentHint is idempotent, destructive and neither read-only nor idempotent runs alone', async () => {
      const tools = await new ToolRegistry().registerMcp(web.client);
      const facts = Object.fromEntries(tools.names.map((name) => {
        const { parallelSafe, idempotent } = tools.get(name)!.declaration;
        return [name, { parallelSafe, idempotent }];
      }));
      expect(facts).to.deep.equal({
        slow: { parallelSafe: true, idempotent: false }, // readOnlyHint
        hang: { parallelSafe: false, idempotent: false }, // destructiveHint
        hangIdempotent: { parallelSafe: true, idempotent: true }, // destructive, but idempotent
        write: { parallelSafe: false, idempotent: false }, // destructiveHint
        upsert: { parallelSafe: true, idempotent: true }, // destructive, but idempotent
        fail: { parallelSafe: true, idempotent: false }, // no annotations
        stats: { parallelSafe: true, idempotent: false }, // readOnlyHint
      });
    });

    it('puts every tool of a server in the server\'s lane, perServer wide', async () => {
      const tools = await mcpTools(web.client, { perServer: 3 });
      expect(tools.map((tool) => tool.declaration.lane)).to.deep.equal(tools.map(() => ({ key: 'mcp:web', limit: 3 })));
      expect((await mcpTools(web.client, { server: 'web-eu' }))[0]!.declaration.lane).to.deep.equal({ key: 'mcp:web-eu', limit: 4 });
    });

    it('lets overrides win over the annotations, and takes only the tools named, prefixed', async () => {
      const tools = await new ToolRegistry().registerMcp(web.client, {
        prefix: 'web_',
        tools: ['write', 'slow'],
        overrides: { write: { parallelSafe: true, needsApproval: true }, slow: { idempotent: true } },
      });
      expect(tools.names).to.deep.equal(['web_slow', 'web_write']);
      expect(tools.get('web_write')!.declaration).to.deep.include({ parallelSafe: true, idempotent: false, needsApproval: true });
      expect(tools.get('web_slow')!.declaration).to.deep.include({ parallelSafe: true, idempotent: true });
    });

    const refused = [
      { title: 'a tool the server does not have', options: { tools: ['delete'] }, field: 'tools', message: /^MCP server web has no tool named "delete"; its tools: slow, hang, / },
      { title: 'an override of a tool the server does not have', options: { overrides: { wirte: { parallelSafe: true } } }, field: 'tools', message: /no tool named "wirte"/ },
      { title: 'a perServer of 0', options: { perServer: 0 }, field: 'perServer', message: /^perServer must be a positive integer, got 0$/ },
      { title: 'a misspelt option', options: { perserver: 2 }, field: 'perserver', message: /^mcpTools options has no option perserver; its options are server, perServer, / },
      { title: 'an override that is not a boolean', options: { overrides: { write: { parallelSafe: 'no' } } }, field: 'overrides.write.parallelSafe', message: /must be a boolean, got "no"$/ },
      { title: 'a prefix that makes a bad name', options: { prefix: 'web.' }, field: 'prefix', message: /^MCP tool "slow" of server web would be named "web.slow", which is not/ },
    ];
    for (const c of refused) {
      it(`refuses ${c.title} with a ConfigError naming the field`, async () => {
        const error = await configError(() => mcpTools(web.client, c.options as never));
        expect(error.field).to.equal(c.field);
        expect(error.message).to.match(c.message);
      });
    }

    it('registers none of a server\'s tools when one name is taken', async () => {
      const tools = new ToolRegistry().register({ name: 'write' }, () => 'mine');
      const error = await configError(() => tools.registerMcp(web.client));
      expect(error.message).to.equal('a tool named write is already registered (give the MCP server\'s tools a prefix)');
      expect(tools.names).to.deep.equal(['write']);
    });
  });

  describe('calls', () => {
    it('answers with the text, the structured content, or an McpToolError, and the server judges the arguments', async () => {
      const tools = await new ToolRegistry().registerMcp(web.client);
      const provider = new ScriptedProvider([
        { toolCalls: [slow('a', 1), ask('b', 'upsert', { key: 'k' }), ask('c', 'fail'), ask('d', 'slow', { ms: 'soon', tag: 'd' }), ask('e', 'write', '[1]' as never)] },
        { text: 'done' },
      ]);
      const result = await new AgentRunner({ provider, tools }).run(agent, 'go');
      const [a, b, c, d, e] = outcomes(result);
      expect(a).to.equal('a=slept a');
      expect(b).to.equal('b={"key":"k","ok":true}');
      expect(c).to.equal('c!McpToolError: fail (MCP server web) failed: disk full');
      expect(d).to.match(/^d!McpToolError: slow \(MCP server web\) failed: MCP error -32602: Input validation error/);
      expect(e).to.match(/^e!ToolArgumentsError: bad arguments for write: /);
      expect(provider.requests[0]!.tools.find((spec) => spec.name === 'slow')!.parameters).to.deep.include({ required: ['ms', 'tag'] });
    });

    it('bounds the requests the server has running at once by perServer, across runs, each server in its own lane', async () => {
      const tools = new ToolRegistry();
      await tools.registerMcp(web.client, { perServer: 2, prefix: 'web_' });
      await tools.registerMcp(docs.client, { perServer: 3, prefix: 'docs_' });
      const turn = { toolCalls: [...['w1', 'w2', 'w3', 'w4'].map((id) => slow(id, 40, 'web_slow')), ...['d1', 'd2', 'd3', 'd4', 'd5'].map((id) => slow(id, 40, 'docs_slow'))] };
      const runner = new AgentRunner({ provider: new ScriptedProvider({ a: [turn, { text: 'done' }], b: [turn, { text: 'done' }] }), tools });
      const queuedOn = new Set<string>();
      runner.activity$.subscribe((activity: RunnerActivity) => activity.type === 'queued' && queuedOn.add(activity.lane));
      (await web.stats()).peak = 0;
      (await docs.stats()).peak = 0;
      const results = await Promise.all(['a', 'b'].map((name) => runner.run(new Agent({ name, instructions: '', model: 'test-model' }), 'go')));
      expect(results.map((result) => result.status)).to.deep.equal(['completed', 'completed']);
      expect(outcomes(results[0]!)).to.deep.equal(['w1', 'w2', 'w3', 'w4', 'd1', 'd2', 'd3', 'd4', 'd5'].map((id) => `${id}=slept ${id}`));
      expect((await web.stats()).peak).to.equal(2);
      expect((await docs.stats()).peak).to.equal(3);
      expect([...queuedOn].sort()).to.deep.equal(['mcp:docs', 'mcp:web']);
    });

    it('cancels a stopped call on the server, through MCP\'s cancellation, and classifies it', async () => {
      const tools = await new ToolRegistry().registerMcp(web.client);
      const controller = new AbortController();
      const provider = new ScriptedProvider([{ toolCalls: [ask('h', 'hang'), slow('s', 60_000)] }, { text: 'done' }]);
      const before = (await web.stats()).cancelled;
      const running = new AgentRunner({ provider, tools, concurrency: { maxConcurrentTools: 4 } }).run(agent, 'go', { signal: controller.signal });
      // hang runs in a phase of its own (destructive): slow waits for it, never dispatched.
      await until(async () => (await web.stats()).calls.includes('hang'));
      controller.abort('the user left');
      const result = await running;
      expect(result.status).to.equal('cancelled');
      expect(outcomes(result)).to.deep.equal([
        'h? hang was in flight when the batch stopped (the run was cancelled: the user left). The side effect may have landed',
        's!CallStoppedError: never dispatched: the run was cancelled: the user left',
      ]);
      await until(async () => (await web.stats()).cancelled === before + 1);
    });
  });

  describe('a server that dies mid-call', () => {
    const script = { toolCalls: [ask('h', 'hang'), ask('i', 'hangIdempotent'), ask('u', 'upsert', { key: 'k' })] };
    const expected = (server: string) => [
      `h!McpConnectionLostError: the connection to MCP server ${server} was lost while hang was in flight`,
      `i!McpConnectionLostError: the connection to MCP server ${server} was lost while hangIdempotent was in flight`,
      'u={"key":"k","ok":true}',
    ];

    async function killMidCall(served: Served, server: string): Promise<{ result: RunResult; tools: ToolRegistry }> {
      const tools = await new ToolRegistry().registerMcp(served.client, { overrides: { hang: { parallelSafe: true } } });
      const provider = new ScriptedProvider([script, { text: 'done' }]);
      const runner = new AgentRunner({ provider, tools });
      let answered = false;
      runner.activity$.subscribe((activity) => activity.type === 'ended' && activity.callId === 'u' && (answered = true));
      const running = runner.run(agent, 'go');
      // Killed once both hanging calls reached the server and the quick one was answered.
      await until(async () => answered && (await served.stats()).calls.filter((call) => call.startsWith('hang')).length === 2);
      served.kill();
      const result = await running;
      expect(result.status).to.equal('completed');
      const seen = outcomes(result);
      seen.forEach((line, index) => expect(line.startsWith(expected(server)[index]!), line).to.equal(true));
      expect(seen[0]).to.match(/\. The side effect may have landed$/);
      expect(seen[1]).to.match(/\. Safe to call again$/);
      return { result, tools };
    }

    it('over stdio (its process killed): in-flight calls fail, saying whether calling again is safe, and the run goes on', async function () {
      this.timeout(30_000);
      const served = await overStdio('files');
      try {
        const { tools } = await killMidCall(served, 'files');
        // A call after the server is gone is never sent: a plain failure, no claim about side effects.
        const later = await new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [ask('w', 'write', { path: 'x', text: 'y' })] }, { text: 'done' }]), tools }).run(agent, 'go');
        expect(outcomes(later)).to.deep.equal(['w!Error: Not connected']);
      } finally {
        await served.close();
      }
    });

    it('over Streamable HTTP (its connections cut): the broken stream sets off a ping, and the calls fail the same way', async () => {
      const served = await overHttp('edge');
      try {
        const { result, tools } = await killMidCall(served, 'edge');
        expect(result.events.filter((event) => event.type === 'TOOL_ERROR')).to.have.length(2);
        // A call after the server is gone cannot connect: a plain failure, no claim about side effects.
        const later = await new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [ask('w', 'write', { path: 'x', text: 'y' })] }, { text: 'done' }]), tools }).run(agent, 'go');
        expect(outcomes(later)).to.deep.equal(['w!TypeError: fetch failed']);
      } finally {
        await served.close();
      }
    });

    it('tells a lost connection by McpConnectionLostError, with the tool, the server and whether it was idempotent', () => {
      const error = new McpConnectionLostError('hang', 'files', false, 'the connection closed');
      expect(error).to.deep.include({ name: 'McpConnectionLostError', tool: 'hang', server: 'files', idempotent: false });
    });
  });

  describe('over stdio', () => {
    let files: Served;
    before(async function () {
      this.timeout(30_000);
      files = await overStdio('files');
    });
    after(async () => {
      await files.close();
    });

    it('bounds the requests the server has running at once by perServer, as the child process sees them', async () => {
      const tools = await new ToolRegistry().registerMcp(files.client, { perServer: 2 });
      const turn = { toolCalls: ['a', 'b', 'c', 'd', 'e'].map((id) => slow(id, 30)) };
      const result = await new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools }).run(agent, 'go');
      expect(outcomes(result)).to.deep.equal(['a', 'b', 'c', 'd', 'e'].map((id) => `${id}=slept ${id}`));
      expect((await files.stats()).peak).to.equal(2);
    });

    it('runs a destructive tool in a phase of its own, after the calls before it', async () => {
      const tools = await new ToolRegistry().registerMcp(files.client, { prefix: 'f_' });
      const turn = { toolCalls: [slow('a', 30, 'f_slow'), ask('w', 'f_write', { path: '/tmp/x', text: 'hi' }), slow('b', 30, 'f_slow')] };
      const before = (await files.stats()).calls.length;
      const result = await new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools }).run(agent, 'go');
      expect(outcomes(result)).to.deep.equal(['a=slept a', 'w=wrote /tmp/x', 'b=slept b']);
      expect((await files.stats()).calls.slice(before)).to.deep.equal(['slow', 'write', 'slow']);
    });
  });
});
