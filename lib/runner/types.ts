// The run's vocabulary, apart from the runner and the turn loop that both use it: what a run is
// asked with, what it resolves with, what activity$ reports, and what a run needs of its runner.
import type { SchedulerLike, Subject } from 'rxjs';
import type { CallActivity } from '../batch/index.js';
import type { ConcurrencyConfig, DeadlineConfig } from '../config/index.js';
import type { ErrorInfo } from '../errors.js';
import type { LaneStore, LaneStoreNotice, Loan } from '../lanes/index.js';
import type { LoopMonitor, RunState, ToolRegistry, ToolSpec } from '../tools/index.js';
import type { Agent } from './Agent.js';
import type { RunEvent } from './events.js';
import type { Message, ModelProvider } from './model.js';
import type { Policies } from './policies.js';

export interface RunOptions {
  /** Whose run this is; its calls stand in this tenant's lane. Default `'default'`. */
  readonly tenant?: string;
  /** Aborting cancels the run: stopped calls are classified, then RUN_CANCELLED. */
  readonly signal?: AbortSignal;
  /** The run's starting state: JSON-like data, copied when the run is made. Tools read it frozen and record deltas. */
  readonly state?: Readonly<Record<string, unknown>>;
  /** Model turns allowed before the run fails. Default 20. */
  readonly maxTurns?: number;
}

export type RunStatus = 'completed' | 'failed' | 'cancelled';

export interface RunResult {
  readonly status: RunStatus;
  readonly output?: unknown;
  readonly error?: ErrorInfo;
  readonly events: readonly RunEvent[];
  readonly state: RunState;
  readonly messages: readonly Message[];
}

/** Where a nested run sits: the run and call that started it. */
export interface RunParent {
  readonly runId: string;
  readonly callId: string;
}

/** Live scheduling events of every run on the runner (not part of any transcript). */
export type RunnerActivity =
  | { readonly type: 'run-started'; readonly runId: string; readonly agent: string; readonly tenant: string; readonly parent?: RunParent; readonly at: number }
  | { readonly type: 'run-ended'; readonly runId: string; readonly status: RunStatus; readonly parent?: RunParent; readonly at: number }
  | (CallActivity & { readonly runId: string; readonly turn: number; readonly parent?: RunParent })
  // What the runner's lane store says of itself (a fleet store that lost its Redis).
  | LaneStoreNotice;

/** What a run needs of its runner: made once per runner and shared by its runs. */
export interface RunnerParts {
  readonly provider: ModelProvider;
  readonly tools: ToolRegistry;
  /** The runner's shared lanes and the config they are sized by. */
  readonly shared: { readonly lanes: LaneStore; readonly concurrency: ConcurrencyConfig };
  readonly deadline: DeadlineConfig;
  readonly monitor: LoopMonitor | undefined;
  readonly scheduler: SchedulerLike;
  readonly activity: Subject<RunnerActivity>;
  readonly policies: Policies;
  /** True when any policy (approval, a guardrail, a hook) is set: calls are then shown to them. */
  readonly policed: boolean;
  /** Runs a sub-agent to its end, for a tool body's `runAgent`. */
  readonly collect: (agent: Agent, input: string, options: RunOptions, nesting: Nesting) => Promise<RunResult>;
}

/** Where a nested run sits in its caller: the lanes the caller lends it, and the run and call that started it. */
export interface Nesting {
  readonly lent: ReadonlyMap<string, Loan>;
  readonly parent: RunParent;
}

/** One run, its options checked by the runner. */
export interface RunPlan {
  readonly agent: Agent;
  readonly input: string;
  readonly tenant: string;
  readonly signal: AbortSignal | undefined;
  readonly initial: Readonly<Record<string, unknown>>;
  readonly maxTurns: number;
  readonly allowed: readonly string[];
  /** The same, as a set. */
  readonly allowedSet: ReadonlySet<string>;
  /** What the provider is shown of those tools. */
  readonly specs: readonly ToolSpec[];
  /** The runner's lanes narrowed by the agent's: the turn's own bounds. */
  readonly turnConcurrency: ConcurrencyConfig;
  readonly nesting: Nesting | undefined;
  readonly onFinish: RunFinish | undefined;
}

/** Told the run's final state and messages as it ends (for `run()`, which resolves with them). */
export interface RunFinish {
  finish(final: { state: RunState; messages: readonly Message[] }): void;
}
