// One request to the simulated partner (./server.ts), as a tool body sends it: node:http with
// kept connections, the caller's tenant in the query, and a 429 thrown as the caller's own error
// (with the partner's Retry-After). Shared by the partner bench and the frameworks bench.
import { Agent as HttpAgent, get } from 'node:http';

// node:http with kept connections: on a busy two-core machine it sends several times what fetch does.
export const connections = new HttpAgent({ keepAlive: true });

/** One request to the partner; a 429 is thrown as `limited` makes it. */
export function callPartner(url: string, tenant: string, signal: AbortSignal | undefined, limited: (retryAfterSeconds: number) => Error): Promise<string> {
  return new Promise((resolve, reject) => {
    const request = get(`${url}?tenant=${encodeURIComponent(tenant)}`, { agent: connections, ...(signal ? { signal } : {}) }, (response) => {
      response.resume();
      response.on('error', reject);
      response.on('end', () => {
        const { statusCode = 0, headers } = response;
        if (statusCode === 429) {
          const ms = Number(headers['retry-after-ms']);
          reject(limited(Number.isFinite(ms) && ms >= 0 ? ms / 1000 : Number(headers['retry-after'] ?? 0)));
        } else if (statusCode !== 200) reject(new Error(`the partner answered ${statusCode}`));
        else resolve('ok');
      });
    });
    request.on('error', reject);
  });
}

