// The simulated partner of the partner bench: an HTTP server on 127.0.0.1 that accepts R requests
// in each second of its own clock (fixed windows) and answers 429 with Retry-After above that,
// slowing as more of its accepted requests are in flight. It counts, per second, what it accepted
// and what it refused (and per tenant, read from `?tenant=`), so the bench's figures are the
// partner's own, not what the callers believe they sent.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface PartnerOptions {
  /** Requests accepted in each second of the partner's clock; above it, 429. */
  readonly rate: number;
  /** How long an accepted request takes with nobody else in flight, in ms. */
  readonly baseLatencyMs: number;
  /** What each other accepted request in flight adds to that, in ms. */
  readonly perInFlightMs: number;
}

/** What the partner saw in one second of its clock. */
export interface PartnerSecond {
  accepted: number;
  limited: number;
  /** Accepted requests per tenant. */
  readonly byTenant: Record<string, number>;
}

export interface Partner {
  /** `http://127.0.0.1:<port>/call`; callers add `?tenant=<tenant>`. */
  readonly url: string;
  /** The seconds seen since the last `reset`, keyed by epoch second. */
  seconds(): ReadonlyMap<number, PartnerSecond>;
  /** Forgets every second counted so far (between scenarios). */
  reset(): void;
  close(): Promise<void>;
}

function tenantOf(url: string | undefined): string {
  const at = url?.indexOf('tenant=') ?? -1;
  return at === -1 ? '' : decodeURIComponent(url!.slice(at + 'tenant='.length));
}

/** Starts the partner on an ephemeral port of 127.0.0.1. */
export async function startPartner(options: PartnerOptions): Promise<Partner> {
  const { rate, baseLatencyMs, perInFlightMs } = options;
  // Accepted requests not yet answered: what slows the next one.
  let inFlight = 0;
  // Per epoch second, what came in.
  let counted = new Map<number, PartnerSecond>();
  const secondOf = (epochSecond: number): PartnerSecond => {
    let second = counted.get(epochSecond);
    if (second === undefined) {
      second = { accepted: 0, limited: 0, byTenant: {} };
      counted.set(epochSecond, second);
    }
    return second;
  };
  const answer = (request: IncomingMessage, response: ServerResponse): void => {
    // The body is not read: a caller sends none.
    request.resume();
    const now = Date.now();
    const epochSecond = Math.floor(now / 1000);
    const second = secondOf(epochSecond);
    if (second.accepted >= rate) {
      second.limited++;
      const untilNextMs = (epochSecond + 1) * 1000 - now;
      // Retry-After in whole seconds, as HTTP has it; retry-after-ms as some vendors add beside it.
      response.writeHead(429, { 'retry-after': String(Math.ceil(untilNextMs / 1000)), 'retry-after-ms': String(untilNextMs), 'content-type': 'text/plain' });
      response.end('rate limited');
      return;
    }
    second.accepted++;
    const tenant = tenantOf(request.url);
    second.byTenant[tenant] = (second.byTenant[tenant] ?? 0) + 1;
    const latency = baseLatencyMs + perInFlightMs * inFlight;
    inFlight++;
    setTimeout(() => {
      inFlight--;
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end('ok');
    }, latency);
  };
  const server = createServer(answer);
  // Callers keep their connections; a bench scenario pauses a few seconds between runs.
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/call`,
    seconds: () => counted,
    reset: () => {
      counted = new Map();
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
