// A stand-in vendor for the wire adapter specs: an HTTP server on 127.0.0.1 that answers each
// request with the next scripted reply (real-shaped JSON from spec/fixtures/wire), records what
// it was sent, and can hold a request open to test aborting mid-request. No network.
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
 * A reply; `'hang'`: hold the request open until the client goes away; `'stall'`: send the
 * status and the start of a body, then hold the rest back until the client goes away.
 */
export type Step = Reply | 'hang' | 'stall';

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
  /** Resolves when the `n`th request (1-based) has arrived. */
  arrived(n: number): Promise<void>;
  /** Resolves when a held (`'hang'` or `'stall'`) request's client has gone away. */
  readonly hungUp: Promise<void>;
  close(): Promise<void>;
}

/** A fixture from spec/fixtures/wire, parsed. */
export const fixture = (name: string): any => JSON.parse(readFileSync(new URL(`../fixtures/wire/${name}.json`, import.meta.url), 'utf8'));

export async function startWireServer(steps: readonly Step[]): Promise<WireServer> {
  const received: Received[] = [];
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
    arrived: (n) => (received.length >= n ? Promise.resolve() : new Promise((resolve) => waiting.push({ n, resolve }))),
    hungUp: hungUpPromise,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
