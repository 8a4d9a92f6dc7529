// What the partner bench's parent (./index.ts) and its runner processes (./worker.ts) share: a
// scenario as the parent tells it, what a process sends back, and the shape of the scripted runs.
// Only types and constants: the parent must not load the runner process's module.

/** How the runs of a scenario are kept within the partner's rate. */
export type PartnerLimiter = 'none' | 'concurrency' | 'bottleneck' | 'rate' | 'adaptive' | 'paced' | 'budget';

export interface PartnerScenario {
  readonly limiter: PartnerLimiter;
  readonly url: string;
  /** This scenario's keys in Redis: its lanes, and Bottleneck's id. */
  readonly prefix: string;
  /** R, the partner's requests per second: told to Bottleneck and the rate lane only. */
  readonly rate: number;
  /** The rate lane's burst, for 'rate' (absent: the lane's default, 1). */
  readonly burst?: number;
  /** The fleet-wide lane on the partner's tool, for 'concurrency'. */
  readonly perTool?: number;
  /** The fleet-wide lane of each tenant, for 'budget'. */
  readonly perTenant?: number;
  /** A token budget for one tenant, for 'budget'. */
  readonly budget?: { readonly tenant: string; readonly tokens: number; readonly perSeconds: number };
  readonly tenants: readonly string[];
  /** Runs of each tenant in flight at once in this process. */
  readonly runsPerTenant: number;
  /** Epoch milliseconds: when the runs start, and when the ones still going are cancelled. */
  readonly startAt: number;
  readonly endAt: number;
}

export type PartnerCommand = { readonly type: 'run'; readonly scenario: PartnerScenario } | { readonly type: 'close' };

export interface PartnerWorkerResult {
  /** Tokens the model spent per tenant: each answered turn's usage. */
  readonly tokens: Record<string, number>;
  readonly runs: { completed: number; failed: number; cancelled: number; interrupted: number };
  /** Runs refused by a budget. */
  readonly budgetRefusals: number;
  /** A failed run's first error that no scenario expects (a bench fault), if any. */
  readonly unexpected?: string;
}

export type PartnerWorkerMessage = { readonly type: 'ready' } | { readonly type: 'done'; readonly result: PartnerWorkerResult };

/** Tool turns in each run before the model answers in text. */
export const TOOL_TURNS = 3;
/** Calls in each tool turn. */
export const CALLS_PER_TURN = 4;
/** What each model turn spends. */
export const TURN_USAGE = { inputTokens: 100, outputTokens: 20 } as const;

/** The adaptive lane's bounds: R is not told; the limit starts at its max and learns. */
export const ADAPTIVE = { min: 1, max: 64 } as const;
