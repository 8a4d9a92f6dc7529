// The worked example's five scenarios (examples/tool_concurrency.ts, which runs on import),
// rebuilt for the transcript specs: the same tools and turns, with each call's latency set
// per run so a spec can record the same run under many finish orders. Lookups record deltas.
import * as t from 'io-ts';
import { calls, cities } from '../../examples/scenarios.js';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  ScriptedProvider,
  ToolRegistry,
  type ModelProvider,
  type ModelResponse,
} from '../../lib/index.js';

/** Resolves after `ms`, or rejects when `signal` aborts first. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** Latencies (ms) by call id, set before each run; 0 when unset. And how many times a body ran. */
export interface Latencies {
  byCall: Record<string, number>;
  bodiesRun: number;
}

/**
 * The worked example's tools: a partner lookup (fails for Atlantis), one that never answers,
 * and a booking that must not run beside anything else.
 */
export function exampleTools(latencies: Latencies, options: { bookingParallelSafe?: boolean; lookupDescription?: string } = {}): ToolRegistry {
  const wait = (ctx: { callId: string; signal: AbortSignal }) => sleep(latencies.byCall[ctx.callId] ?? 0, ctx.signal);
  return new ToolRegistry()
    .register(
      { name: 'lookup', description: options.lookupDescription ?? 'Hotel prices in a city', args: t.type({ city: t.string }), idempotent: true },
      async ({ city }, ctx) => {
        latencies.bodiesRun++;
        await wait(ctx);
        if (city === 'Atlantis') throw new Error(`no partner covers ${city}`);
        const from = 80 + city.length * 7;
        ctx.record({ [`price:${city}`]: from });
        return { from, city };
      },
    )
    .register(
      { name: 'slow_lookup', description: 'A partner that sometimes never answers', args: t.type({ city: t.string }), idempotent: true },
      async (_args, ctx) => {
        latencies.bodiesRun++;
        await sleep(60_000, ctx.signal);
        return 'never';
      },
    )
    .register(
      { name: 'booking', description: 'Book a room; not order-independent', args: t.type({ city: t.string }), parallelSafe: options.bookingParallelSafe ?? false },
      async ({ city }, ctx) => {
        latencies.bodiesRun++;
        await wait(ctx);
        ctx.record({ booked: city });
        // The key holds the run id: the cassette must not.
        return { booked: city, key: ctx.idempotencyKey };
      },
    );
}


export interface Scenario {
  readonly title: string;
  readonly turn: ModelResponse;
  readonly agentConcurrency?: ConcurrencyConfig;
  readonly runnerConcurrency: ConcurrencyConfig;
}

export const scenarios: readonly Scenario[] = [
  { title: 'four lookups at once', turn: calls(...cities.map((c): [string, string] => ['lookup', c])), runnerConcurrency: new ConcurrencyConfig({ maxConcurrentTools: 8 }) },
  {
    title: 'the same four, two at a time',
    turn: calls(...cities.map((c): [string, string] => ['lookup', c])),
    agentConcurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }),
    runnerConcurrency: new ConcurrencyConfig({ maxConcurrentTools: 8 }),
  },
  {
    title: 'one failure among three successes',
    turn: calls(['lookup', 'Lisbon'], ['lookup', 'Atlantis'], ['lookup', 'Porto'], ['lookup', 'Madrid']),
    runnerConcurrency: new ConcurrencyConfig({ maxConcurrentTools: 8 }),
  },
  {
    title: 'a hanging call cut off by its perToolSeconds ceiling',
    turn: calls(['lookup', 'Lisbon'], ['slow_lookup', 'Porto'], ['lookup', 'Madrid']),
    runnerConcurrency: new ConcurrencyConfig({ maxConcurrentTools: 8, perToolSeconds: { slow_lookup: 0.04 } }),
  },
  {
    title: 'a parallelSafe:false booking between lookups',
    turn: calls(['lookup', 'Lisbon'], ['lookup', 'Porto'], ['booking', 'Porto'], ['lookup', 'Madrid']),
    runnerConcurrency: new ConcurrencyConfig({ maxConcurrentTools: 8 }),
  },
];

export function plannerFor(scenario: Scenario): Agent {
  return new Agent({
    name: 'planner',
    instructions: 'Find and book a hotel.',
    model: 'scripted',
    ...(scenario.agentConcurrency ? { concurrency: scenario.agentConcurrency } : {}),
  });
}

/** The model of the worked example: the scenario's turn, then a summary of what came back. */
export function scriptFor(scenario: Scenario): ScriptedProvider {
  return new ScriptedProvider([scenario.turn, (request) => ({ text: `Read ${request.messages.filter((m) => m.role === 'tool').length} tool results.` })]);
}

export function runnerFor(scenario: Scenario, provider: ModelProvider, tools: ToolRegistry): AgentRunner {
  return new AgentRunner({ provider, tools, concurrency: scenario.runnerConcurrency });
}
