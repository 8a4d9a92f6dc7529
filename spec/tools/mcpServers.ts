// The MCP specs' servers: the fixture server (spec/fixtures/mcpServer.mjs) served in process over
// Streamable HTTP on 127.0.0.1, or started as a child process over stdio; and a client connected
// to each. Everything made here is closed by `close()`, so mocha exits on its own.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { mcpServer, newStats, type ServerStats } from '../fixtures/mcpServer.mjs';

export const stdioServerScript = fileURLToPath(new URL('../fixtures/mcp-stdio.mjs', import.meta.url));

export interface Served {
  readonly client: Client;
  /** Where the server listens, over Streamable HTTP (undefined over stdio). */
  readonly url?: URL;
  /** What the server saw (for a stdio server, read through its `stats` tool). */
  stats(): Promise<ServerStats>;
  /** Ends the server abruptly, with calls in flight: its process killed, or its connections cut. */
  kill(): void;
  close(): Promise<void>;
}

function client(): Client {
  return new Client({ name: 'agent-lanes-spec', version: '1.0.0' });
}

/** The fixture server named `name` over Streamable HTTP on 127.0.0.1, one session per client. */
export async function overHttp(name: string): Promise<Served> {
  const stats = newStats();
  const sessions = new Map<string, { transport: StreamableHTTPServerTransport; server: McpServer }>();
  const http: Server = createServer((req, res) => {
    void (async () => {
      const id = req.headers['mcp-session-id'];
      let session = typeof id === 'string' ? sessions.get(id) : undefined;
      if (session === undefined) {
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sessionId) => void sessions.set(sessionId, session!),
        });
        session = { transport, server: mcpServer(name, stats) };
        await session.server.connect(transport);
      }
      await session.transport.handleRequest(req, res);
    })().catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  const url = new URL(`http://127.0.0.1:${port}/mcp`);
  const connected = client();
  await connected.connect(new StreamableHTTPClientTransport(url));
  const stop = (): void => {
    http.closeAllConnections();
    http.close();
  };
  return {
    client: connected,
    url,
    stats: () => Promise.resolve(stats),
    kill: stop,
    close: async () => {
      await connected.close();
      stop();
      for (const { server } of sessions.values()) await server.close();
      sessions.clear();
    },
  };
}

/** The fixture server named `name` as a child process over stdio. */
export async function overStdio(name: string): Promise<Served> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [stdioServerScript, name], stderr: 'ignore' });
  const connected = client();
  await connected.connect(transport);
  return {
    client: connected,
    stats: async () => (await connected.callTool({ name: 'stats', arguments: {} })).structuredContent as unknown as ServerStats,
    kill: () => void process.kill(transport.pid!, 'SIGKILL'),
    close: () => connected.close(),
  };
}
