// The run's vocabulary, apart from the runner and the turn loop that both use it: what a run is
// asked with, what it resolves with, and what activity$ reports (what a run needs of its
// runner is in parts.ts).
import type { CallActivity } from '../batch/index.js';
import type { ErrorInfo } from '../errors.js';
import type { LaneNotice } from '../lanes/index.js';
import type { RunState } from '../tools/index.js';
import type { RunEvent } from './events.js';
import type { Message, ToolCall, Usage } from './model/model.js';
import type { Approvals, PendingCall, RunSnapshot } from './resume/snapshotFormat.js';

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

export type RunStatus = 'completed' | 'failed' | 'cancelled' | 'interrupted';

/** What every RunResult holds, whatever its ending. */
export interface RunResultFields<O = unknown> {
  readonly events: readonly RunEvent<O>[];
  readonly state: RunState;
  /**
   * The whole conversation: the messages the run was given (a string input is one user
   * message), then the model's and the tools' messages of its turns. Append the user's next
   * message to it and pass it to the next run to go on with the conversation.
   */
  readonly messages: readonly Message[];
  /**
   * The tokens of the run's own turns, summed over the turns whose provider reported usage;
   * absent when none did. A nested run's turns are in its own result, not its caller's.
   */
  readonly usage?: Usage;
  /**
   * The tokens of the run's whole tree: its own turns and those of every run nested in it, at
   * any depth (each nested run's `totalUsage`), counted as each nested run resolves before this
   * run ends; absent when none of them reported usage.
   */
  readonly totalUsage?: Usage;
}

/** A run that completed: `output` is the agent's answer, of its output type `O`. */
export interface CompletedRunResult<O = unknown> extends RunResultFields<O> {
  readonly status: 'completed';
  readonly output: O;
  readonly error?: undefined;
}

/** A run that ended otherwise: `error` says why; there is no output. */
export interface EndedRunResult<O = unknown> extends RunResultFields<O> {
  readonly status: 'failed' | 'cancelled';
  readonly output?: undefined;
  readonly error?: ErrorInfo;
}

/**
 * A run that waits for a person (docs/resuming.md): `pending` are the calls waiting for an
 * answer, `snapshot` what `runner.resume(agent, snapshot, { approvals })` goes on from, in any
 * process with the same agent and tools. No permit is held while it waits.
 */
export interface InterruptedRunResult<O = unknown> extends RunResultFields<O> {
  readonly status: 'interrupted';
  readonly pending: readonly PendingCall[];
  readonly snapshot: RunSnapshot;
  readonly output?: undefined;
  readonly error?: undefined;
}

/**
 * How a run ended. `status` tells which: narrowed to `'completed'`, `output` is the answer of
 * the run's `Agent<O>`, typed `O`; narrowed to `'interrupted'`, `pending` and `snapshot` are there.
 */
export type RunResult<O = unknown> = CompletedRunResult<O> | EndedRunResult<O> | InterruptedRunResult<O>;

/** `runner.resume`'s options: a run's options, and the answers to the calls its snapshot has waiting. */
export interface ResumeOptions extends RunOptions {
  /** By callId (as `pending` lists it): true, false, or `{ approved: false, reason }` (the reason the model reads). */
  readonly approvals: Approvals;
}

/** Where a nested run sits: the run and call that started it. */
export interface RunParent {
  readonly runId: string;
  readonly callId: string;
}

/**
 * Live events of every run on the runner (not part of any transcript): runs starting and ending,
 * the model's text and calls as a streamed turn writes them (`text-delta`, `tool-call`), and
 * the calls' scheduling.
 */
export type RunnerActivity =
  | { readonly type: 'run-started'; readonly runId: string; readonly agent: string; readonly tenant: string; readonly parent?: RunParent; readonly at: number }
  | { readonly type: 'run-ended'; readonly runId: string; readonly status: RunStatus; readonly parent?: RunParent; readonly at: number }
  | { readonly type: 'text-delta'; readonly runId: string; readonly turn: number; readonly delta: string; readonly parent?: RunParent; readonly at: number }
  /**
   * A streamed turn's call, complete as the model wrote it (before it is gated or enters its
   * lanes): `index` is its place in the turn, `input` its arguments as the model sent them. A
   * chat page shows its tool part from here, not only once the model's turn has ended.
   */
  | { readonly type: 'tool-call'; readonly runId: string; readonly turn: number; readonly index: number; readonly callId: string; readonly tool: string; readonly input: ToolCall['arguments']; readonly parent?: RunParent; readonly at: number }
  | (CallActivity & { readonly runId: string; readonly turn: number; readonly parent?: RunParent })
  // What the runner's lane store says of itself (a fleet store that lost its Redis) and of its lanes (a pause).
  | LaneNotice
  // The runner's tracer threw while tracing this run: its tracing stopped there; the run goes on (docs/tracing.md).
  | { readonly type: 'tracing-failed'; readonly runId: string; readonly error: ErrorInfo; readonly parent?: RunParent; readonly at: number };
