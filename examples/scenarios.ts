// The worked example's tools and five scenarios, shared by the printed example
// (examples/tool_concurrency.ts) and the live lane view (examples/live/): a scripted model,
// real tool bodies that sleep like a partner API, no network and no keys.
import * as t from 'io-ts';
import { ConcurrencyConfig, OnToolError, RateLimitedError, ToolRegistry, type ModelResponse, type ToolCall } from '../lib/index.js';

/** How long one lookup takes at the partner. */
export const LOOKUP_MS = 200;
const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });

// The tools: a partner lookup, one that fails for one city, one that hangs, and a booking
// that must not run beside anything else.
export const tools = new ToolRegistry()
  .register(
    { name: 'lookup', description: 'Hotel prices in a city', args: t.type({ city: t.string }), idempotent: true },
    async ({ city }, ctx) => {
      await sleep(LOOKUP_MS, ctx.signal);
      if (city === 'Atlantis') throw new Error(`no partner covers ${city}`);
      return { city, from: 80 + city.length * 7 };
    },
  )
  .register(
    { name: 'slow_lookup', description: 'A partner that sometimes never answers', args: t.type({ city: t.string }), idempotent: true },
    async (_args, ctx) => {
      await sleep(60_000, ctx.signal);
      return 'never';
    },
  )
  .register(
    // A partner that tells one city's lookups to slow down: what an adaptive tool lane listens to.
    { name: 'partner_lookup', description: 'Hotel prices from a partner that rate limits', args: t.type({ city: t.string }), idempotent: true },
    async ({ city }, ctx) => {
      await sleep(LOOKUP_MS / 4, ctx.signal);
      if (city === 'Atlantis') throw new RateLimitedError(`the partner asks to slow down (${city})`, 1);
      return { city, from: 90 + city.length * 5 };
    },
  )
  .register(
    { name: 'booking', description: 'Book a room; not order-independent', args: t.type({ city: t.string }), parallelSafe: false },
    async ({ city }, ctx) => {
      await sleep(LOOKUP_MS, ctx.signal);
      return { booked: city, key: ctx.idempotencyKey.slice(-2) };
    },
  );

/** One model turn asking for these calls, with ids c1, c2, ... in order. */
export const calls = (...specs: Array<[tool: string, city: string]>): ModelResponse => ({
  toolCalls: specs.map(([name, city], i): ToolCall => ({ id: `c${i + 1}`, name, arguments: JSON.stringify({ city }) })),
});
export const cities = ['Lisbon', 'Porto', 'Madrid', 'Seville'];

export interface Scenario {
  readonly title: string;
  readonly turn: ModelResponse;
  readonly agent?: Partial<{ concurrency: ConcurrencyConfig; onToolError: typeof OnToolError.SURFACE_TO_MODEL }>;
  readonly runner?: ConcurrencyConfig;
}

export const scenarios: Scenario[] = [
  { title: 'Four lookups at once', turn: calls(...cities.map((c): [string, string] => ['lookup', c])) },
  {
    title: 'The same four, two at a time (the agent narrows its turn to 2)',
    turn: calls(...cities.map((c): [string, string] => ['lookup', c])),
    agent: { concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }) },
  },
  { title: 'One failure among three successes', turn: calls(['lookup', 'Lisbon'], ['lookup', 'Atlantis'], ['lookup', 'Porto'], ['lookup', 'Madrid']) },
  {
    title: 'A hanging tool cut off by its own ceiling (perToolSeconds.slow_lookup = 0.3)',
    turn: calls(['lookup', 'Lisbon'], ['slow_lookup', 'Porto'], ['lookup', 'Madrid']),
    runner: new ConcurrencyConfig({ perToolSeconds: { slow_lookup: 0.3 } }),
  },
  { title: 'An order-dependent tool run alone (booking is parallelSafe: false)', turn: calls(['lookup', 'Lisbon'], ['lookup', 'Porto'], ['booking', 'Porto'], ['lookup', 'Madrid']) },
];
