// RunEvent: the transcript of a run. For the same script it is the same sequence of
// events whatever order the calls finished in: no times, and tool events in call order.
// Live progress (queued, started, settled, with times) is runner.activity$, not this.
import type { StopReason } from '../batch/index.js';
import { toErrorInfo, type ErrorInfo } from '../errors.js';
import { stopClassOf, type StopClass } from '../stopClass.js';
import type { FinishReason, Message, ModelResponse, ToolCall, Usage } from './model/model.js';
import type { PendingCall, RunSnapshot } from './resume/snapshotFormat.js';

export type RunEventType =
  | 'RUN_STARTED'
  | 'MODEL_RESPONSE'
  | 'TOOL_RESULT'
  | 'TOOL_ERROR'
  | 'TOOL_INDETERMINATE'
  | 'RUN_COMPLETED'
  | 'RUN_FAILED'
  | 'RUN_CANCELLED'
  | 'RUN_INTERRUPTED';

/** The names of the event types, for comparisons without string literals. */
export const RunEventType = {
  RUN_STARTED: 'RUN_STARTED',
  MODEL_RESPONSE: 'MODEL_RESPONSE',
  TOOL_RESULT: 'TOOL_RESULT',
  TOOL_ERROR: 'TOOL_ERROR',
  TOOL_INDETERMINATE: 'TOOL_INDETERMINATE',
  RUN_COMPLETED: 'RUN_COMPLETED',
  RUN_FAILED: 'RUN_FAILED',
  RUN_CANCELLED: 'RUN_CANCELLED',
  RUN_INTERRUPTED: 'RUN_INTERRUPTED',
} as const satisfies Record<RunEventType, RunEventType>;

export interface RunStartedEvent {
  readonly type: 'RUN_STARTED';
  readonly runId: string;
  readonly agent: string;
  readonly tenant: string;
  /** The text of the user message the run answers: the whole input when it was a string. */
  readonly input: string;
  /** The conversation before that message, when the run was given one (as the model is shown it). */
  readonly history?: readonly Message[];
}
export interface ModelResponseEvent {
  readonly type: 'MODEL_RESPONSE';
  readonly turn: number;
  readonly text?: string;
  readonly toolCalls: readonly ToolCall[];
  /** The turn's token counts, when the provider reported them (streamed or whole, the same). */
  readonly usage?: Usage;
  /** Why the model stopped writing the turn, when the provider said. */
  readonly finishReason?: FinishReason;
}
export interface ToolResultEvent {
  readonly type: 'TOOL_RESULT';
  readonly turn: number;
  readonly callId: string;
  readonly tool: string;
  /** The result in its one JSON form (`jsonForm`): a frozen copy, what the model read as JSON. */
  readonly result: unknown;
}
export interface ToolErrorEvent {
  readonly type: 'TOOL_ERROR';
  readonly turn: number;
  readonly callId: string;
  readonly tool: string;
  readonly error: ErrorInfo;
  /**
   * For a call that did not end by itself (its batch stopped it, or it was cut off alone):
   * `never_dispatched` or `safe_to_call_again`. Absent for a failure of the call's own.
   */
  readonly stopClass?: StopClass;
}
export interface ToolIndeterminateEvent {
  readonly type: 'TOOL_INDETERMINATE';
  readonly turn: number;
  readonly callId: string;
  readonly tool: string;
  readonly message: string;
  /** Always `indeterminate`: the call went out and was stopped, and its side effect may have landed. */
  readonly stopClass?: StopClass;
}
/** The run's answer: the model's text, or for an agent with an output codec what it decoded (`O`). */
export interface RunCompletedEvent<O = unknown> {
  readonly type: 'RUN_COMPLETED';
  readonly output: O;
}
export interface RunFailedEvent {
  readonly type: 'RUN_FAILED';
  readonly error: ErrorInfo;
}
export interface RunCancelledEvent {
  readonly type: 'RUN_CANCELLED';
  readonly reason: string;
}

/**
 * The run waits for a person (docs/resuming.md): `pending` lists the calls waiting for an
 * answer, and `snapshot` (plain JSON) is what `runner.resume` goes on from, in any process. No
 * permit is held meanwhile: the run has ended.
 */
export interface RunInterruptedEvent {
  readonly type: 'RUN_INTERRUPTED';
  readonly pending: readonly PendingCall[];
  readonly snapshot: RunSnapshot;
}

/** How one tool call ended, as the transcript (and `hooks.onToolEnd`) sees it. */
export type ToolOutcomeEvent = ToolResultEvent | ToolErrorEvent | ToolIndeterminateEvent;

/** One event of a run's transcript; `O` is the output type of the run's agent (`Agent<O>`). */
export type RunEvent<O = unknown> =
  | RunStartedEvent
  | ModelResponseEvent
  | ToolOutcomeEvent
  | RunCompletedEvent<O>
  | RunFailedEvent
  | RunCancelledEvent
  | RunInterruptedEvent;

/**
 * What an outcome needs for its event: the call, and how it ended; for an error, whether its
 * body had started and whether its batch stopped it (`stopped`, any value: the stop), which with
 * its error's name give its stop class (`stopClassOf`).
 */
export type OutcomeLike = { readonly callId: string; readonly tool: string } & (
  | { readonly kind: 'result'; readonly result?: unknown }
  | { readonly kind: 'error'; readonly error: ErrorInfo; readonly dispatched: boolean; readonly stopped?: unknown }
  | { readonly kind: 'indeterminate'; readonly message: string }
);

/**
 * The transcript event of a call's outcome in turn `turn`, with the outcome's stop class when it
 * has one. The one place these events are made: live, and rebuilt from a journal, a snapshot or
 * a cassette alike, so an outcome written before events carried the class gets it too.
 */
export function toOutcomeEvent(turn: number, outcome: OutcomeLike): ToolOutcomeEvent {
  const { callId, tool } = outcome;
  switch (outcome.kind) {
    case 'result':
      return { type: 'TOOL_RESULT', turn, callId, tool, result: outcome.result };
    case 'error': {
      const stopClass = stopClassOf(outcome);
      const { error } = outcome;
      return stopClass === undefined ? { type: 'TOOL_ERROR', turn, callId, tool, error } : { type: 'TOOL_ERROR', turn, callId, tool, error, stopClass };
    }
    case 'indeterminate':
      return { type: 'TOOL_INDETERMINATE', turn, callId, tool, message: outcome.message, stopClass: 'indeterminate' };
  }
}

/** The status a run's final event gives it: the one mapping from an ending to `RunResult.status`. */
export function statusOf(event: RunCompletedEvent | RunFailedEvent | RunCancelledEvent | RunInterruptedEvent): 'completed' | 'failed' | 'cancelled' | 'interrupted' {
  if (event.type === 'RUN_INTERRUPTED') return 'interrupted';
  return event.type === 'RUN_COMPLETED' ? 'completed' : event.type === 'RUN_FAILED' ? 'failed' : 'cancelled';
}

/**
 * The transcript event of the model's response in turn `turn`: the same for a turn streamed or
 * given whole. Usage and finish reason appear only when the provider gave them.
 */
export function toResponseEvent(turn: number, response: ModelResponse): ModelResponseEvent {
  const { text, toolCalls = [], usage, finishReason } = response;
  // The usual turns as literals of their own (no object spread per turn); the field order is the
  // transcript's either way.
  if (usage === undefined && finishReason === undefined) {
    return text === undefined ? { type: 'MODEL_RESPONSE', turn, toolCalls } : { type: 'MODEL_RESPONSE', turn, text, toolCalls };
  }
  return {
    type: 'MODEL_RESPONSE',
    turn,
    ...(text !== undefined ? { text } : {}),
    toolCalls,
    ...(usage !== undefined ? { usage } : {}),
    ...(finishReason !== undefined ? { finishReason } : {}),
  };
}

/** The run's final event for a stop: RUN_CANCELLED for a cancel, RUN_FAILED for a deadline or a failure under FAIL_RUN. */
export function ending(reason: StopReason): RunEvent {
  return reason.kind === 'cancelled' ? { type: 'RUN_CANCELLED', reason: reason.why } : { type: 'RUN_FAILED', error: reason.error };
}

/** RUN_FAILED for `error`, read as the transcript carries errors. */
export function failed(error: unknown): RunEvent {
  return { type: 'RUN_FAILED', error: toErrorInfo(error) };
}
