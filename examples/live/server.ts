// The live lane view: a small server on 127.0.0.1 that serves one page and, over server-sent
// events, runs the worked example's five scenarios one after another, streaming each call's
// scheduling (runner.activity$) and the transcript as they happen. `npm run live` starts it.
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { concat, defer, EMPTY, Observable, of } from 'rxjs';
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, type RunEvent, type RunnerActivity } from '../../lib/index.js';
import { sseHandler } from '../../lib/streaming.js';
import { scenarios, tools, type Scenario } from '../scenarios.js';

/** What the page is sent. Times (`at`) are ms since the scenario started. */
export type LiveEvent =
  | { readonly type: 'scenario'; readonly index: number; readonly title: string; readonly calls: ReadonlyArray<{ id: string; tool: string; arguments: unknown }> }
  | { readonly type: 'activity'; readonly index: number; readonly activity: RunnerActivity }
  | { readonly type: 'transcript'; readonly index: number; readonly event: RunEvent }
  | { readonly type: 'done'; readonly scenarios: number };

export interface LiveServer {
  /** `http://127.0.0.1:<port>/` */
  readonly url: string;
  readonly server: Server;
  close(): Promise<void>;
}

/** One scenario as live events: its calls, then activity and transcript interleaved as they happen. */
function play(scenario: Scenario, index: number, signal: AbortSignal): Observable<LiveEvent> {
  return new Observable<LiveEvent>((subscriber) => {
    const provider = new ScriptedProvider([scenario.turn, (request) => ({ text: `Read ${request.messages.filter((m) => m.role === 'tool').length} tool results.` })]);
    const runner = new AgentRunner({ provider, tools, concurrency: scenario.runner ?? new ConcurrencyConfig({ maxConcurrentTools: 8 }) });
    const agent = new Agent({ name: 'planner', instructions: 'Find and book a hotel.', model: 'scripted', ...scenario.agent });
    const calls = (scenario.turn.toolCalls ?? []).map((call) => ({ id: call.id, tool: call.name, arguments: typeof call.arguments === 'string' ? JSON.parse(call.arguments) : call.arguments }));
    subscriber.next({ type: 'scenario', index, title: scenario.title, calls });
    // Activity first, so the run's own start is seen; times are made relative to the scenario.
    const origin = Date.now();
    const watching = runner.activity$.subscribe((activity) => subscriber.next({ type: 'activity', index, activity: { ...activity, at: activity.at - origin } }));
    const running = runner.run$(agent, 'Where should I stay?', { tenant: 'acme', signal }).subscribe({
      next: (event) => subscriber.next({ type: 'transcript', index, event }),
      error: (error: unknown) => subscriber.error(error),
      complete: () => subscriber.complete(),
    });
    return () => {
      running.unsubscribe();
      watching.unsubscribe();
    };
  });
}

/** Every scenario in turn, then `done`; a client leaving cancels the scenario running and starts no other. */
export function liveEvents(signal: AbortSignal, only: readonly Scenario[] = scenarios): Observable<LiveEvent> {
  return concat(
    ...only.map((scenario, index) => defer(() => (signal.aborted ? EMPTY : play(scenario, index, signal)))),
    defer(() => (signal.aborted ? EMPTY : of<LiveEvent>({ type: 'done', scenarios: only.length }))),
  );
}

const page = new URL('./page.html', import.meta.url);

/**
 * Starts the live view on 127.0.0.1 (`port` 0: any free port). `GET /` is the page,
 * `GET /events` the scenarios (the worked example's, unless `scenarios` names others) as server-sent events.
 *
 * ## Example
 * ```ts
 * const live = await startLiveServer({ port: 4173 });
 * console.log(live.url);   // http://127.0.0.1:4173/
 * await live.close();
 * ```
 */
export async function startLiveServer(options: { port?: number; scenarios?: readonly Scenario[] } = {}): Promise<LiveServer> {
  const events = sseHandler<LiveEvent>((_request, signal) => liveEvents(signal, options.scenarios));
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://127.0.0.1').pathname;
    if (request.method === 'GET' && path === '/events') return events(request, response);
    if (request.method === 'GET' && (path === '/' || path === '/index.html')) {
      void readFile(page, 'utf8').then(
        (html) => {
          response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
          response.end(html);
        },
        () => {
          response.writeHead(500).end();
        },
      );
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    server,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// `npm run live`: serve until interrupted.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const live = await startLiveServer({ port: Number(process.env['PORT'] ?? 4173) });
  console.log(`agent-lanes live view: ${live.url} (Ctrl-C to stop)`);
  process.once('SIGINT', () => void live.close().then(() => process.exit(0)));
}
