// A generated world for the property specs: a runner with random lanes, several runs over
// a few tenants with random scripts, tool bodies that take random (virtual) time and may
// fail, and cancellations at random moments. The tools report when each body starts and
// stops, so the specs check the lanes from the bodies' side, not from the lanes' own counts.
import fc from 'fast-check';
import * as t from 'io-ts';
import { finalize, Observable, throwError, timer, map, mergeMap } from 'rxjs';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  OnToolError,
  ScriptedProvider,
  ToolRegistry,
  type ModelResponse,
  type RunEvent,
} from '../../lib/index.js';

/** The tools of the world, with the facts the checks need. */
export const toolFacts = {
  search: { idempotent: true, parallelSafe: true },
  charge: { idempotent: false, parallelSafe: true },
  lookup: { idempotent: true, parallelSafe: true },
  booking: { idempotent: false, parallelSafe: false },
} as const;
export type ToolName = keyof typeof toolFacts;
const toolNames = Object.keys(toolFacts) as ToolName[];

export interface CallPlan {
  readonly tool: ToolName;
  /** Virtual milliseconds the body takes. */
  readonly latency: number;
  readonly fails: boolean;
}

export interface RunPlan {
  readonly tenant: 'acme' | 'globex' | 'initech';
  readonly turns: readonly (readonly CallPlan[])[];
  /** The agent's own narrowing. */
  readonly agentTurnLimit: number | undefined;
  readonly failRun: boolean;
  /** Virtual time at which the run is cancelled, if it is. */
  readonly cancelAt: number | undefined;
}

export interface WorldPlan {
  readonly maxConcurrentTools: number | undefined;
  readonly perTool: Partial<Record<ToolName, number>>;
  readonly perTenant: number | undefined;
  readonly perToolSeconds: Partial<Record<ToolName, number>>;
  readonly runs: readonly RunPlan[];
}

const limit = fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined });

const callPlan: fc.Arbitrary<CallPlan> = fc.record({
  tool: fc.constantFrom(...toolNames),
  latency: fc.integer({ min: 1, max: 12 }),
  fails: fc.boolean(),
});

const runPlan: fc.Arbitrary<RunPlan> = fc.record({
  tenant: fc.constantFrom('acme' as const, 'globex' as const, 'initech' as const),
  turns: fc.array(fc.array(callPlan, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 2 }),
  agentTurnLimit: limit,
  failRun: fc.boolean(),
  cancelAt: fc.option(fc.integer({ min: 0, max: 30 }), { nil: undefined, freq: 3 }),
});

export const worldPlan: fc.Arbitrary<WorldPlan> = fc.record({
  maxConcurrentTools: limit,
  perTool: fc.record({ search: limit, charge: limit, lookup: limit, booking: limit }, { requiredKeys: [] }),
  perTenant: limit,
  perToolSeconds: fc.record({ search: fc.constantFrom(0.004, 0.008), charge: fc.constantFrom(0.006, 0.01) }, { requiredKeys: [] }),
  runs: fc.array(runPlan, { minLength: 1, maxLength: 4 }),
});

/** What the bodies saw: who ran when, for the checks. */
export interface Observed {
  /** Most bodies running at once: per tool (all runs), per tenant (all runs), per run and turn. */
  readonly peakPerTool: Map<string, number>;
  readonly peakPerTenant: Map<string, number>;
  readonly peakPerTurn: Map<string, number>;
  /** `run:turn:callId` of every body that started. */
  readonly started: Set<string>;
  /** Breaches of "a parallelSafe:false call runs alone in its run", as text. */
  readonly overlaps: string[];
  /** Each run's events, by run index. */
  readonly events: RunEvent[][];
}

function defined(record: Partial<Record<string, number | undefined>>): Record<string, number> {
  return Object.fromEntries(Object.entries(record).filter((entry): entry is [string, number] => entry[1] !== undefined));
}

function bump(map: Map<string, number>, key: string, by: number, peaks: Map<string, number>): void {
  const now = (map.get(key) ?? 0) + by;
  map.set(key, now);
  if (now > (peaks.get(key) ?? 0)) peaks.set(key, now);
}

// Latencies stay out of the arguments, so two worlds differing only in timing have the same transcript.
function turnResponse(run: number, turn: number, calls: readonly CallPlan[]): ModelResponse {
  return {
    toolCalls: calls.map((c, i) => ({ id: `r${run}t${turn}c${i}`, name: c.tool, arguments: { run, turn, fails: c.fails } })),
  };
}

/**
 * Builds the world and starts every run. Call inside `TestScheduler.run`; the runs advance
 * when the scheduler flushes.
 */
export function startWorld(plan: WorldPlan, schedule: (work: () => void, delay: number) => void): { runner: AgentRunner; observed: Observed } {
  const running = { tool: new Map<string, number>(), tenant: new Map<string, number>(), turn: new Map<string, number>() };
  const observed: Observed = {
    peakPerTool: new Map(),
    peakPerTenant: new Map(),
    peakPerTurn: new Map(),
    started: new Set(),
    overlaps: [],
    events: plan.runs.map(() => []),
  };
  // Bodies running per run, and whether a parallelSafe:false one is among them.
  const perRun = new Map<number, { count: number; exclusive: number }>();

  const Args = t.type({ run: t.number, turn: t.number, fails: t.boolean });
  const tools = new ToolRegistry();
  for (const name of toolNames) {
    const facts = toolFacts[name];
    tools.register({ name, args: Args, idempotent: facts.idempotent, parallelSafe: facts.parallelSafe }, (args, ctx) =>
      new Observable<string>((subscriber) => {
        const tenant = plan.runs[args.run]!.tenant;
        const turnKey = `${args.run}:${args.turn}`;
        const mine = perRun.get(args.run) ?? { count: 0, exclusive: 0 };
        perRun.set(args.run, mine);
        if (mine.exclusive > 0 || (!facts.parallelSafe && mine.count > 0)) {
          observed.overlaps.push(`${ctx.callId} (${name}) started beside ${mine.count} call(s) of run ${args.run}`);
        }
        mine.count++;
        if (!facts.parallelSafe) mine.exclusive++;
        observed.started.add(`${args.run}:${args.turn}:${ctx.callId}`);
        bump(running.tool, name, 1, observed.peakPerTool);
        bump(running.tenant, tenant, 1, observed.peakPerTenant);
        bump(running.turn, turnKey, 1, observed.peakPerTurn);
        const latency = plan.runs[args.run]!.turns[args.turn - 1]![Number(ctx.callId.split('c').pop())]!.latency;
        const subscription = timer(latency)
          .pipe(
            mergeMap(() => (args.fails ? throwError(() => new Error(`${name} failed on purpose`)) : [name])),
            map((result) => `${result}:${ctx.callId}`),
            finalize(() => {
              mine.count--;
              if (!facts.parallelSafe) mine.exclusive--;
              bump(running.tool, name, -1, observed.peakPerTool);
              bump(running.tenant, tenant, -1, observed.peakPerTenant);
              bump(running.turn, turnKey, -1, observed.peakPerTurn);
            }),
          )
          .subscribe(subscriber);
        return subscription;
      }),
    );
  }

  const script: Record<string, ModelResponse[]> = {};
  plan.runs.forEach((run, r) => {
    script[`agent${r}`] = [...run.turns.map((calls, turn) => turnResponse(r, turn + 1, calls)), { text: `run ${r} done` }];
  });
  const runner = new AgentRunner({
    provider: new ScriptedProvider(script),
    tools,
    concurrency: new ConcurrencyConfig({
      maxConcurrentTools: plan.maxConcurrentTools,
      perTool: defined(plan.perTool),
      perTenant: plan.perTenant,
      perToolSeconds: defined(plan.perToolSeconds),
    }),
    loopStallMs: false,
  });
  plan.runs.forEach((run, r) => {
    const agent = new Agent({
      name: `agent${r}`,
      instructions: '',
      model: 'scripted',
      onToolError: run.failRun ? OnToolError.FAIL_RUN : OnToolError.SURFACE_TO_MODEL,
      ...(run.agentTurnLimit === undefined ? {} : { concurrency: new ConcurrencyConfig({ maxConcurrentTools: run.agentTurnLimit }) }),
    });
    const controller = new AbortController();
    if (run.cancelAt !== undefined) schedule(() => controller.abort(), run.cancelAt);
    runner.run$(agent, `run ${r}`, { tenant: run.tenant, signal: controller.signal }).subscribe((event) => observed.events[r]!.push(event));
  });
  return { runner, observed };
}
