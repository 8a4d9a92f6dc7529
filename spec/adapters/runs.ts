// Shared by the adapter specs: a server on 127.0.0.1 for one handler, and a runner whose model
// asks for three lookups (one failing) or for two calls that wait until they are stopped (one
// idempotent, one not), so a client leaving mid-batch shows both stop classifications.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as t from 'io-ts';
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, ToolRegistry, type ModelResponse, type ScriptStep } from '../../lib/index.js';

export interface TestServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function serve(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<TestServer> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const planner = new Agent({ name: 'planner', instructions: 'Find hotels.', model: 'test-model' });

/** Lisbon, Atlantis (fails), Porto: Lisbon finishes last. */
export const threeLookups: ModelResponse = {
  toolCalls: ['Lisbon', 'Atlantis', 'Porto'].map((city, i) => ({ id: `c${i + 1}`, name: 'lookup', arguments: JSON.stringify({ city }) })),
};

/** A lookup (idempotent) and a booking (not) that both wait until they are stopped. */
export const twoWaiting: ModelResponse = {
  toolCalls: [
    { id: 'w1', name: 'wait_lookup', arguments: '{}' },
    { id: 'w2', name: 'wait_booking', arguments: '{}' },
  ],
};

export interface Fixture {
  readonly runner: AgentRunner;
  readonly provider: ScriptedProvider;
  /** The signals of the waiting bodies, by call id. */
  readonly signals: Map<string, AbortSignal>;
  /** Resolves once `n` waiting bodies have started. */
  started(n: number): Promise<void>;
}

export function fixture(script: readonly ScriptStep[]): Fixture {
  const signals = new Map<string, AbortSignal>();
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const wait = (_args: unknown, ctx: { callId: string; signal: AbortSignal }): Promise<never> => {
    signals.set(ctx.callId, ctx.signal);
    for (const w of waiters.filter((w) => signals.size >= w.n)) w.resolve();
    // Ends when it is stopped, as a well-behaved body does (one that ignores its abort keeps its permits).
    return new Promise<never>((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true }));
  };
  const tools = new ToolRegistry()
    .register({ name: 'lookup', args: t.type({ city: t.string }), idempotent: true }, async ({ city }) => {
      if (city === 'Atlantis') throw new Error('no partner covers Atlantis');
      await new Promise((resolve) => setTimeout(resolve, city === 'Lisbon' ? 30 : 0));
      return { city, from: 80 + city.length * 7 };
    })
    .register({ name: 'wait_lookup', idempotent: true }, wait)
    .register({ name: 'wait_booking' }, wait);
  const provider = new ScriptedProvider(script);
  const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ perTool: { wait_lookup: 2, wait_booking: 1 }, perTenant: 4 }) });
  return {
    runner,
    provider,
    signals,
    started: (n) => (signals.size >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }))),
  };
}
