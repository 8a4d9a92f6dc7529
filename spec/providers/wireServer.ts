// A stand-in vendor for the wire adapter specs: an HTTP server on 127.0.0.1 that answers each
// request with the next scripted reply (real-shaped JSON from spec/fixtures/wire, or a stream of
// recorded server-sent event chunks written one by one), records what it was sent, and can hold
// a request open, or a stream mid-way, to test aborting. No network.
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One scripted reply: a status (default 200), headers, and a body (an object is sent as JSON). */
export interface Reply {
  readonly status?: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: unknown;
}

/**
 * A streamed reply: `text/event-stream`, its body written chunk by chunk, `gapMs` apart (default
 * 0: each on its own write). Then the body ends, the connection is destroyed mid-stream
 * (`'drop'`), or the stream is held open until the client goes away (`'hang'`).
 */
export interface StreamReply {
  readonly chunks: readonly string[];
  readonly gapMs?: number;
  readonly then?: 'end' | 'drop' | 'hang';
  /** Holds the stream open after `after` chunks until `until` settles, e.g. until a tool has started. */
  readonly holds?: ReadonlyArray<{ readonly after: number; readonly until: Promise<unknown> }>;
}

/**
 * A reply, a streamed reply, `'hang'`: hold the request open until the client goes away, or
 * `'stall'`: send the status and the start of a body, then hold the rest back until the client goes away.
 */
export type Step = Reply | StreamReply | 'hang' | 'stall';

export interface Received {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: any;
}

export interface WireServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** Every request, in arrival order. */
  readonly received: Received[];
  /** Chunks of streamed replies written so far, in order: `${request}:${chunk}` (both 1-based). */
  readonly written: string[];
  /** Resolves when the `n`th request (1-based) has arrived. */
  arrived(n: number): Promise<void>;
  /** Resolves when a held (`'hang'` or `'stall'`) request's client has gone away. */
  readonly hungUp: Promise<void>;
  close(): Promise<void>;
}

/** A fixture from spec/fixtures/wire, parsed. */
export const fixture = (name: string): any => JSON.parse(readFileSync(new URL(`../fixtures/wire/${name}.json`, import.meta.url), 'utf8'));

/**
 * A recorded event stream from spec/fixtures/wire (`<name>.sse`) as the chunks it arrived in:
 * one event a chunk, or, with `size`, cut every `size` characters wherever that falls (mid-line,
 * mid-JSON), as a network may cut it.
 */
export function sseChunks(name: string, size?: number): string[] {
  const text = readFileSync(new URL(`../fixtures/wire/${name}.sse`, import.meta.url), 'utf8');
  if (size !== undefined) return Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size));
  return text.split(/(?<=\n\n)/);
}

export async function startWireServer(steps: readonly Step[]): Promise<WireServer> {
  const received: Received[] = [];
  const written: string[] = [];
  // Timers of streams being written, cleared on close.
  const timers = new Set<NodeJS.Timeout>();
  // Resolvers waiting for a count of requests.
  const waiting: Array<{ n: number; resolve: () => void }> = [];
  let hungUp!: () => void;
  const hungUpPromise = new Promise<void>((resolve) => (hungUp = resolve));
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      received.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: text === '' ? undefined : JSON.parse(text) });
      for (const w of waiting.filter((w) => received.length >= w.n)) w.resolve();
      const step = steps[received.length - 1];
      if (step === 'hang' || step === 'stall') {
        res.on('close', () => hungUp());
        if (step === 'stall') {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write('{"choices":');
        }
        return;
      }
      if (step !== undefined && 'chunks' in step) {
        const request = received.length;
        const { chunks, gapMs = 0, then = 'end', holds = [] } = step;
        res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
        res.flushHeaders();
        res.on('close', () => {
          if (!res.writableFinished) hungUp();
        });
        const write = (i: number): void => {
          if (res.destroyed) return;
          if (i === chunks.length) {
            if (then === 'end') res.end();
            else if (then === 'drop') res.socket?.destroy();
            return;
          }
          written.push(`${request}:${i + 1}`);
          res.write(chunks[i]!);
          const next = (): void => {
            const timer = setTimeout(() => {
              timers.delete(timer);
              write(i + 1);
            }, gapMs);
            timers.add(timer);
          };
          const hold = holds.find((h) => h.after === i + 1);
          if (hold === undefined) next();
          else void hold.until.then(next, next);
        };
        write(0);
        return;
      }
      const { status = 200, headers = {}, body = { error: { message: `the stand-in vendor has no reply scripted for request ${received.length}` } } } =
        step ?? { status: 500 };
      res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain' : 'application/json', ...headers });
      res.end(typeof body === 'string' ? body : JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    written,
    arrived: (n) => (received.length >= n ? Promise.resolve() : new Promise((resolve) => waiting.push({ n, resolve }))),
    hungUp: hungUpPromise,
    close: () =>
      new Promise((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
