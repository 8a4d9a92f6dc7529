// What a run needs of its runner, and a run's plan: the engine's own types, apart from the
// public ones in types.ts (whose declarations an app reads), since they name the runner's parts.
import type { Observable, SchedulerLike, Subject } from 'rxjs';
import type { ConcurrencyConfig, DeadlineConfig } from '../config/index.js';
import type { LaneStore, Loan } from '../lanes/index.js';
import type { LoopMonitor, RunState, ToolRegistry, ToolSpec } from '../tools/index.js';
import type { Agent } from './Agent.js';
import type { Message, ModelProvider, RunInput, Usage } from './model/model.js';
import type { Policies } from './turn/policies.js';
import type { SnapshotStore } from './resume/snapshotStore.js';
import type { RunJournal } from './journal/runJournal.js';
import type { ResumePoint } from './resume/resumePoint.js';
import type { NestedResume } from './resume/snapshotFormat.js';
import type { RunEvent } from './events.js';
import type { CallActivity, Outcome } from '../batch/index.js';
import type { RunnerActivity, RunOptions, RunParent, RunResult } from './types.js';

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
  /** Where a tool body's `runAgent` reaches the runner: its one port for nested runs. */
  readonly nested: NestedRunner;
  /** The runner's tracing, when it was given a tracer. */
  readonly tracing: RunTracing | undefined;
  /** The tools an agent may call now, and what the provider is shown of them (reread when the registry changes). */
  readonly toolsOf: (agent: Agent) => AgentTools;
  /** Where top-level runs are journaled, if anywhere. */
  readonly journal: RunJournal | undefined;
  /** Where a top-level run that ends waiting for a person leaves its snapshot for its one resume, if anywhere. */
  readonly snapshots: SnapshotStore | undefined;
}

/** A traced run, as its calls need it: it hears their activity, and a body runs with its call's span active. */
export interface BodyTrace {
  /** False when no context manager carries a context into a body: it then runs as it would untraced. */
  readonly carries: boolean;
  within(callId: string, body: () => unknown): unknown;
  /** A call's scheduling event; never throws. */
  activity(turn: number, activity: CallActivity): void;
  /** A call's final outcome, just before its `settled` event; never throws. */
  outcome(turn: number, index: number, outcome: Outcome): void;
}

/** The runner's tracing, as a run uses it (trace/tracing.ts is the one there is). */
export interface RunTracing {
  /** A run's trace, before the run is made: the run takes `trace.parts`, whose provider is traced. */
  open(parts: RunnerParts, plan: RunPlan): OpenTrace;
}

/** One run's trace: what the run is made with, its start, its transcript followed; its calls' bodies run inside their spans. */
export interface OpenTrace extends BodyTrace {
  /** The runner's parts, with a traced provider. */
  readonly parts: RunnerParts;
  /** The run was made (its id known): its span starts. */
  begin(runId: string): void;
  /** The run's transcript, with its spans kept up to date. */
  follow(run$: Observable<RunEvent>): Observable<RunEvent>;
}

/** An agent's tools on one runner, as of the registry's `version`. */
export interface AgentTools {
  readonly version: number;
  readonly allowed: readonly string[];
  readonly allowedSet: ReadonlySet<string>;
  /** What the provider is shown of them. */
  readonly specs: readonly ToolSpec[];
  /** Names the agent lists that the registry never had. */
  readonly missing: readonly string[];
}

/**
 * The runner as a nested run reaches it: a sub-agent's run, to its end, inside the call whose body
 * started it (`nesting`). `resumes`, for a call run again on resume, is the nested run that waited
 * (its snapshot and the answers meant for it): the sub-run goes on from there rather than starting.
 */
export interface NestedRunner {
  runNested(agent: Agent, input: RunInput, options: RunOptions, nesting: Nesting, resumes?: NestedResume): Promise<RunResult>;
}

/** Where a nested run sits in its caller: the lanes the caller lends it, and the run and call that started it. */
export interface Nesting {
  readonly lent: ReadonlyMap<string, Loan>;
  readonly parent: RunParent;
}

/** One run, its options checked by the runner. */
export interface RunPlan {
  readonly agent: Agent;
  /** The text of the user message the run answers. */
  readonly input: string;
  /** The conversation before that message, checked and frozen; empty for a string input. */
  readonly history: readonly Message[];
  readonly tenant: string;
  readonly signal: AbortSignal | undefined;
  readonly initial: Readonly<Record<string, unknown>>;
  readonly maxTurns: number;
  /** The agent's tools when the run was planned; a turn rereads them if the registry changed since. */
  readonly tools: AgentTools;
  /** The runner's lanes narrowed by the agent's: the turn's own bounds. */
  readonly turnConcurrency: ConcurrencyConfig;
  readonly nesting: Nesting | undefined;
  readonly onFinish: RunFinish | undefined;
  /** Where a resumed run starts (resumePoint.ts); undefined for a run from its first turn. */
  readonly resume?: ResumePoint | undefined;
}

/** Told the run's final state and messages as it ends (for `run()`, which resolves with them). */
export interface RunFinish {
  finish(final: RunFinal): void;
}

/** What a run hands over as it ends: its state and messages, and the tokens its nested runs reported. */
export interface RunFinal {
  readonly state: RunState;
  readonly messages: readonly Message[];
  readonly nestedUsage: Usage | undefined;
}
