// MCP calls classified like every other call, against real SDK servers: a request the client
// gave up on (its timeout), one a gateway answered with 504, one whose connection was cut while
// the server stayed up, each a call stopped in flight; the call's idempotency key and fencing
// tokens in the request's `_meta`; tool names a model API cannot take, mapped.
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { expect } from 'chai';
import sinon from 'sinon';
import { z } from 'zod';
import {
  Agent,
  AgentRunner,
  CallInterruptedError,
  OnToolError,
  ScriptedProvider,
  ToolRegistry,
  type RunResult,
  type ToolCall,
  type ToolContext,
} from '../../lib/index.js';
import { McpToolError, mcpTools } from '../../lib/mcp.js';
import { mcpServer, newStats } from '../fixtures/mcpServer.mjs';
import { inMemory, until, type InMemory } from './mcpMemory.js';
import { overHttp, type Served } from './mcpServers.js';
import { outcomes } from './outcomes.js';

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });
const ask = (id: string, name: string, args: Record<string, unknown> = {}): ToolCall => ({ id, name, arguments: args });


async function runOnce(tools: ToolRegistry, calls: ToolCall[]): Promise<RunResult> {
  return new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: calls }, { text: 'done' }]), tools }).run(agent, 'go');
}

type Fault = '504' | 'cut' | '404';

// A gateway in front of an MCP server over Streamable HTTP: every request goes through, but a
// tools/call of a tool named in `faults` is sent on, and once the server has answered it the
// client gets a 504 instead, or its connection is cut with no answer at all; or (404) it is
// answered 404 and never sent on.
async function gateway(upstream: URL, faults: ReadonlyMap<string, Fault>): Promise<{ url: URL; close(): void; timingOut: { all: boolean } }> {
  // Set: every request of a tool named in `faults` (504) is answered 504 at once, and every other request (a ping) too.
  const timingOut = { all: false };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let fault: Fault | undefined;
      try {
        const message = JSON.parse(body.toString('utf8')) as { method?: string; params?: { name?: string } };
        if (message.method === 'tools/call') fault = faults.get(message.params?.name ?? '');
      } catch {
        // Not JSON (a GET): passed on as it is.
      }
      if (timingOut.all && (fault === '504' || fault === undefined) && req.method === 'POST') {
        res.writeHead(504, { 'content-type': 'text/plain' }).end('Gateway Timeout');
        return;
      }
      if (fault === '404') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('no such endpoint');
        return;
      }
      const out = request(upstream, { method: req.method, headers: req.headers }, (answer: IncomingMessage) => {
        if (fault === undefined) {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          return;
        }
        answer.resume();
        answer.on('end', () => {
          if (fault === '504') res.writeHead(504, { 'content-type': 'text/plain' }).end('Gateway Timeout');
          else req.socket.destroy();
        });
      });
      out.on('error', () => res.destroy());
      out.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    timingOut,
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

describe('MCP calls stopped in flight', () => {
  describe("the client's request timeout (MCP error -32001)", () => {
    let served: InMemory;
    const stats = newStats();
    before(async () => {
      served = await inMemory(mcpServer('slowpoke', stats));
    });
    after(() => served.close());

    it('is TOOL_INDETERMINATE for a tool not known to be idempotent, "Safe to call again" for an idempotentHint tool, and the server is told to cancel', async () => {
      const tools = await new ToolRegistry().registerMcp(served.client, { timeoutSeconds: 0.05, overrides: { hang: { parallelSafe: true } } });
      const before = stats.cancelled;
      const result = await runOnce(tools, [ask('h', 'hang'), ask('i', 'hangIdempotent'), ask('u', 'upsert', { key: 'k' })]);
      expect(result.status).to.equal('completed');
      expect(outcomes(result)).to.deep.equal([
        'h? hang was in flight when its request to MCP server slowpoke got no answer in time (MCP error -32001: Request timed out). The side effect may have landed',
        'i!CallInterruptedError: hangIdempotent was in flight when its request to MCP server slowpoke got no answer in time (MCP error -32001: Request timed out). Safe to call again',
        'u={"key":"k","ok":true}',
      ]);
      expect(result.events.filter((event) => event.type === 'TOOL_INDETERMINATE')).to.have.length(1);
      // The SDK sends notifications/cancelled when it gives up: the server's handlers heard it.
      await until(() => stats.cancelled === before + 2);
    });

    it('leaves the batch going: siblings keep their results, and FAIL_RUN is not set off by an indeterminate call', async () => {
      const tools = await new ToolRegistry().registerMcp(served.client, { timeoutSeconds: 0.05, prefix: 's_' });
      const failRun = new Agent({ name: 'strict', instructions: '', model: 'test-model', onToolError: OnToolError.FAIL_RUN });
      const provider = new ScriptedProvider([{ toolCalls: [ask('a', 's_slow', { ms: 1, tag: 'a' }), ask('h', 's_hang')] }, { text: 'done' }]);
      const result = await new AgentRunner({ provider, tools }).run(failRun, 'go');
      const [a, h] = outcomes(result);
      expect(a).to.equal('a=slept a');
      expect(h).to.match(/^h\? s_hang was in flight when its request to MCP server slowpoke got no answer in time .*The side effect may have landed$/);
    });
  });

  describe('over Streamable HTTP, behind a gateway', () => {
    let served: Served;
    let front: Awaited<ReturnType<typeof gateway>>;
    let client: Client;
    before(async () => {
      served = await overHttp('partner');
      front = await gateway(served.url!, new Map<string, Fault>([['write', '504'], ['upsert', '504'], ['slow', 'cut'], ['stats', '404']]));
      client = new Client({ name: 'agent-lanes-spec', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(front.url));
    });
    after(async () => {
      await client.close();
      front.close();
      await served.close();
    });

    it("classifies a gateway's 504 as stopped in flight: the write landed on the server, and the outcome says it may have", async () => {
      const tools = await new ToolRegistry().registerMcp(client);
      const before = (await served.stats()).calls.length;
      const result = await runOnce(tools, [ask('w', 'write', { path: '/tmp/a', text: 'x' }), ask('u', 'upsert', { key: 'k' })]);
      const [w, u] = outcomes(result);
      expect(w).to.match(/^w\? write was in flight when its request to MCP server partner ended with HTTP 504, a gateway's timeout \(.*\)\. The side effect may have landed$/);
      expect(u).to.match(/^u!CallInterruptedError: upsert was in flight when its request to MCP server partner ended with HTTP 504, a gateway's timeout \(.*\)\. Safe to call again$/);
      expect((await served.stats()).calls.slice(before).sort()).to.deep.equal(['upsert', 'write']);
    });

    it('classifies a 504 as stopped in flight even when the gateway answers a ping with 504 too', async () => {
      const tools = await new ToolRegistry().registerMcp(client, { prefix: 'g_' });
      front.timingOut.all = true;
      try {
        const result = await runOnce(tools, [ask('w', 'g_write', { path: '/tmp/c', text: 'z' })]);
        expect(outcomes(result)).to.have.length(1);
        expect(outcomes(result)[0]).to.match(/^w\? g_write was in flight when its request to MCP server partner ended with HTTP 504, a gateway's timeout \(.*\)\. The side effect may have landed$/);
      } finally {
        front.timingOut.all = false;
      }
    });

    it('classifies a connection cut while the server stays up (it answers a ping) as stopped in flight, not as a lost server', async () => {
      const tools = await new ToolRegistry().registerMcp(client);
      const result = await runOnce(tools, [ask('s', 'slow', { ms: 1, tag: 's' }), ask('f', 'fail')]);
      const [s, f] = outcomes(result);
      expect(s).to.match(/^s\? slow was in flight when its request to MCP server partner was cut off while the server stayed up \(.*\)\. The side effect may have landed$/);
      expect(f).to.equal('f!McpToolError: fail (MCP server partner) failed: disk full');
    });

    it('keeps another status as the answer it is: nothing is claimed of a request refused before the server saw it', async () => {
      const tools = await new ToolRegistry().registerMcp(client, { prefix: 'p_' });
      const result = await runOnce(tools, [ask('s', 'p_stats')]);
      expect(outcomes(result)).to.deep.equal(['s!Error: Streamable HTTP error: Error POSTing to endpoint: no such endpoint']);
    });
  });

  it('tells an interrupted call by CallInterruptedError, with its code or status', () => {
    const error = new CallInterruptedError('its request timed out', { code: -32001 });
    expect(error).to.deep.include({ name: 'CallInterruptedError', message: 'its request timed out', code: -32001, status: undefined });
  });
});

describe("a call's idempotency key and fencing tokens in the request's _meta", () => {
  let served: InMemory;
  // What the server saw: each request's _meta, and the bookings it made, by idempotency key.
  const metas: Array<Record<string, unknown> | undefined> = [];
  const bookings = new Map<string, number>();
  let highestFence = 0n;
  before(async () => {
    const server = new McpServer({ name: 'hotel', version: '1.0.0' });
    server.registerTool('meta', { description: 'Answers with the request _meta', inputSchema: {} }, async (_args, extra) => {
      metas.push(extra._meta as Record<string, unknown> | undefined);
      return { content: [{ type: 'text', text: 'seen' }] };
    });
    server.registerTool('book', { description: 'Books a room once per idempotency key, refusing a stale fence', inputSchema: { room: z.string() } }, async ({ room }, extra) => {
      const meta = (extra._meta ?? {}) as Record<string, unknown>;
      const key = meta['agent-lanes/idempotencyKey'];
      const fence = meta['agent-lanes/fence'];
      if (typeof fence === 'string') {
        if (BigInt(fence) < highestFence) return { content: [{ type: 'text', text: `stale fence ${fence}` }], isError: true };
        highestFence = BigInt(fence);
      }
      if (typeof key !== 'string') return { content: [{ type: 'text', text: 'no idempotency key' }], isError: true };
      const known = bookings.get(key);
      if (known !== undefined) return { content: [{ type: 'text', text: `booking ${known} (again)` }] };
      bookings.set(key, bookings.size + 1);
      return { content: [{ type: 'text', text: `booking ${bookings.size} of ${room}` }] };
    });
    served = await inMemory(server);
  });
  after(() => served.close());

  it('sends agent-lanes/idempotencyKey (runId:callId), and no fence on in-process lanes', async () => {
    const tools = await new ToolRegistry().registerMcp(served.client);
    const result = await runOnce(tools, [ask('m1', 'meta')]);
    const runId = (result.events[0] as { runId: string }).runId;
    expect(metas.at(-1)).to.deep.include({ 'agent-lanes/idempotencyKey': `${runId}:m1` });
    expect(metas.at(-1)).to.not.have.any.keys('agent-lanes/fence', 'agent-lanes/fences');
    // MCP's own _meta (the progress token the SDK adds) is still there beside it.
    expect(metas.at(-1)).to.have.property('progressToken');
  });

  it('lets a server deduplicate a retried call, and refuse a holder whose fence is stale', async () => {
    const [book] = await mcpTools(served.client, { tools: ['book'] });
    const ctx = (key: string, fence?: string): ToolContext =>
      ({ callId: 'c1', tool: 'book', tenant: 't', runId: 'r1', idempotencyKey: key, signal: new AbortController().signal, fence, fences: fence === undefined ? {} : { 'tool:book': fence }, state: {}, messages: [], record: () => undefined, progress: () => undefined, reportCost: () => undefined, runAgent: () => Promise.reject(new Error('no')) }) as ToolContext;
    expect(await book!.body({ room: '12' }, ctx('r1:c1', '7'))).to.equal('booking 1 of 12');
    // The same call again (a retry after a lost answer): the same booking, not a second one.
    expect(await book!.body({ room: '12' }, ctx('r1:c1', '8'))).to.equal('booking 1 (again)');
    expect(bookings.size).to.equal(1);
    // A holder whose lease ran out, its token older than the one the server has seen.
    const stale = await Promise.resolve(book!.body({ room: '12' }, ctx('r1:c2', '5'))).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(stale).to.be.instanceOf(McpToolError);
    expect((stale as Error).message).to.equal('book (MCP server hotel) failed: stale fence 5');
  });
});

describe('MCP tool names a model API cannot take', () => {
  let served: InMemory;
  const long = `search_${'x'.repeat(70)}`;
  const called: string[] = [];
  before(async () => {
    const server = new McpServer({ name: 'odd', version: '1.0.0' });
    // The SDK warns on the console about names outside its own advice: these are meant.
    const warn = sinon.stub(console, 'warn');
    after(() => warn.restore());
    for (const name of ['files.read', 'a b', 'a_b', long, 'ok', '/']) {
      server.registerTool(name, { description: `the tool ${name}`, inputSchema: {} }, async () => {
        called.push(name);
        return { content: [{ type: 'text', text: `I am ${name}` }] };
      });
    }
    served = await inMemory(server);
  });
  after(() => served.close());

  it('maps each to a valid name, keeping valid names as they are, without a collision, and calls the server by its own name', async () => {
    const tools = await mcpTools(served.client);
    const names = new Map(tools.map((tool) => [tool.listed.name, tool.declaration.name]));
    expect(names.get('ok')).to.equal('ok');
    expect(names.get('a_b')).to.equal('a_b');
    expect(names.get('files.read')).to.equal('files_read');
    expect(names.get('a b')).to.match(/^a_b_[0-9a-f]{8}$/);
    expect(names.get(long)).to.have.length(64);
    expect(names.get(long)).to.match(/^search_x+_[0-9a-f]{8}$/);
    expect(names.get('/')).to.equal('_');
    for (const name of names.values()) expect(name).to.match(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(new Set(names.values()).size).to.equal(names.size);
    const registry = await new ToolRegistry().registerMcp(served.client);
    const result = await runOnce(registry, [ask('r', 'files_read'), ask('s', names.get('a b')!), ask('l', names.get(long)!)]);
    expect(outcomes(result)).to.deep.equal(['r=I am files.read', 's=I am a b', `l=I am ${long}`]);
    expect(called).to.deep.equal(['files.read', 'a b', long]);
  });

  it('maps the same way every time, and after a prefix', async () => {
    const first = (await mcpTools(served.client, { prefix: 'odd_' })).map((tool) => tool.declaration.name);
    const second = (await mcpTools(served.client, { prefix: 'odd_' })).map((tool) => tool.declaration.name);
    expect(first).to.deep.equal(second);
    expect(first).to.include.members(['odd_files_read', 'odd_a_b', 'odd_ok']);
    for (const name of first) expect(name).to.match(/^odd_[a-zA-Z0-9_-]{1,60}$/);
  });
});
