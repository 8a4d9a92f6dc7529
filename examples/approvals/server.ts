// The approvals page: a server on 127.0.0.1 serving one page built on the AI SDK's UI state
// (bundled from page.ts with esbuild when the server starts, nothing fetched), and its chat
// endpoint. The model looks a room up and asks to book it; booking needs a person's approval,
// so the run waits, its snapshot kept on the server, and the page shows the request. A click
// answers it, and the run goes on where it waited.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { UIMessage } from 'ai';
import { build } from 'esbuild';
import { Agent, AgentRunner, InMemorySnapshotStore, ScriptedProvider, ToolRegistry } from '../../lib/index.js';
import { resumeApproved, uiMessageStreamHandler } from '../../lib/streaming.js';
import { fromUIMessages } from '../../lib/providers/aiSdkProvider.js';

const page = `<!doctype html><html><head><meta charset="utf-8"><title>agent-lanes · approvals</title><link rel="icon" href="data:,"></head>
<body><h1>agent-lanes · approvals</h1><div id="status"></div><div id="chat"></div><script type="module" src="/page.js"></script></body></html>`;

export interface ApprovalsServer {
  readonly url: string;
  /** The rooms booked, in order: a booking runs only once approved. */
  readonly booked: number[];
  readonly store: InMemorySnapshotStore;
  close(): Promise<void>;
}

async function bodyOf(request: IncomingMessage): Promise<{ messages: UIMessage[] }> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as { messages: UIMessage[] };
}

/** Starts the server on a free port of 127.0.0.1. */
export async function startApprovalsServer(): Promise<ApprovalsServer> {
  const bundled = await build({ entryPoints: [fileURLToPath(new URL('./page.ts', import.meta.url))], bundle: true, format: 'esm', platform: 'browser', write: false, logLevel: 'silent' });
  const script = bundled.outputFiles[0]!.text;
  const booked: number[] = [];
  const tools = new ToolRegistry()
    .register({ name: 'lookup' }, () => ({ room: 7, free: true }))
    .register({ name: 'book', needsApproval: true }, (args) => {
      const { room } = args as { room: number };
      booked.push(room);
      return `booked room ${room}`;
    });
  const provider = new ScriptedProvider([
    { toolCalls: [{ id: 'l1', name: 'lookup', arguments: { room: 7 } }, { id: 'b1', name: 'book', arguments: { room: 7 } }] },
    (request) => ({ text: request.messages.some((m) => m.content === 'booked room 7') ? 'Room 7 is booked for tonight.' : 'Room 7 was not booked.' }),
  ]);
  const runner = new AgentRunner({ provider, tools });
  const agent = new Agent({ name: 'concierge', instructions: 'Book rooms.', model: 'scripted' });
  const store = new InMemorySnapshotStore();
  const chat = uiMessageStreamHandler(
    async (request, signal) => {
      const { messages } = await bodyOf(request);
      return (await resumeApproved(messages, { runner, agent, store, signal })) ?? runner.run$(agent, fromUIMessages(messages), { signal });
    },
    { snapshots: store },
  );
  const server: Server = createServer((request, response) => {
    if (request.method === 'POST' && request.url === '/api/chat') return chat(request, response);
    const [type, body] = request.url === '/page.js' ? ['text/javascript', script] : ['text/html', page];
    response.writeHead(200, { 'content-type': `${type}; charset=utf-8` });
    response.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    booked,
    store,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// `npx tsx examples/approvals/server.ts`: serve until interrupted.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const served = await startApprovalsServer();
  console.log(`agent-lanes approvals page: ${served.url} (Ctrl-C to stop)`);
  process.once('SIGINT', () => void served.close().then(() => process.exit(0)));
}
