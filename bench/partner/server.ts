// The simulated partner of the partner bench: an HTTP server on 127.0.0.1 that accepts R requests
// in each second of its own clock and answers 429 with Retry-After above that, slowing as more of
// its accepted requests are in flight (the rules are PartnerWindows', ./windows.ts). It counts, per
// second, what it accepted and refused (and per tenant, read from `?tenant=`), so the bench's
// figures are the partner's own, not what the callers believe they sent.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PartnerWindows, type PartnerLimits, type PartnerSecond } from './windows.js';

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
export async function startPartner(limits: PartnerLimits): Promise<Partner> {
  const windows = new PartnerWindows(limits);
  const answer = (request: IncomingMessage, response: ServerResponse): void => {
    // The body is not read: a caller sends none.
    request.resume();
    const admission = windows.admit(Date.now(), tenantOf(request.url));
    if (!admission.admitted) {
      // Retry-After in whole seconds, as HTTP has it; retry-after-ms beside it, as some vendors add.
      const { retryAfterMs } = admission;
      response.writeHead(429, { 'retry-after': String(Math.ceil(retryAfterMs / 1000)), 'retry-after-ms': String(retryAfterMs), 'content-type': 'text/plain' });
      response.end('rate limited');
      return;
    }
    setTimeout(() => {
      windows.answered();
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end('ok');
    }, admission.latencyMs);
  };
  const server = createServer(answer);
  // Callers keep their connections; a bench scenario pauses a few seconds between runs.
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/call`,
    seconds: () => windows.seconds(),
    reset: () => windows.reset(),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
