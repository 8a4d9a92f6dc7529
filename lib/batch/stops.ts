// The stop classification: when a batch stops, every call that had not settled gets
// exactly one outcome, and it says what the call did. A call that never went out is
// undone; a call that went out and was stopped is unknown unless it is idempotent.
import { CallInterruptedError, CallStoppedError, type ErrorInfo } from '../errors.js';
import { batchStopped, inFlightMessage, inFlightWhen, neverDispatchedMessage, stopClass } from '../stopClass.js';
import type { BatchCall, ErrorOutcome, Outcome, StopReason } from './types.js';

/** What a cancel says when its signal gave no reason of its own. */
export const cancelledWhy = 'the run was cancelled';

/**
 * The stop reason an external cancel gives: "the run was cancelled", followed by the reason
 * the caller aborted with (`controller.abort(reason)`), when it gave one.
 */
export function cancelled(reason?: unknown): StopReason {
  const given = givenReason(reason);
  return { kind: 'cancelled', why: given === undefined ? cancelledWhy : `${cancelledWhy}: ${given}` };
}

/**
 * The reason an AbortSignal aborted with, as text, or undefined when none was given: a bare
 * `abort()` gives a DOMException named AbortError, which says nothing the sentence around it
 * does not. A string is itself; an error its message (its name if the message is empty); any
 * other value its text. Never throws: a reason is the caller's value, and a getter or a proxy
 * in it must not break the stop that reads it (such a reason reads as none).
 */
export function givenReason(reason: unknown): string | undefined {
  try {
    if (reason === undefined || reason === null) return undefined;
    if (typeof reason === 'string') return nonBlank(reason);
    if (typeof reason !== 'object' && typeof reason !== 'function') return String(reason);
    if (reason instanceof DOMException && reason.name === 'AbortError') return undefined;
    const { name, message } = reason as { name?: unknown; message?: unknown };
    if (typeof message === 'string' && message.trim() !== '') return message;
    if (typeof name === 'string' && name !== '' && name !== 'Error') return name;
    if (reason instanceof Error) return undefined;
    return nonBlank(JSON.stringify(reason) ?? String(reason));
  } catch {
    return undefined;
  }
}

function nonBlank(text: string): string | undefined {
  return text.trim() === '' ? undefined : text;
}

/**
 * FAIL_RUN's rule, the one place it is written: under it (`failFast`), an outcome stops its batch,
 * and fails its run, when it is a failure of the call's own, not a stop of its batch.
 */
export function failsFast(failFast: boolean, outcome: Outcome): outcome is ErrorOutcome {
  return failFast && outcome.kind === 'error' && outcome.stopped === undefined;
}

/** The stop of its batch that ended this call, if one did (the call did not end by itself). */
export function stopOf(outcome: Outcome): StopReason | undefined {
  return outcome.kind === 'result' ? undefined : outcome.stopped;
}

/** The stop that ended a batch, read from its outcomes: the first that carries one. */
export function batchStop(outcomes: readonly Outcome[]): StopReason | undefined {
  for (const outcome of outcomes) {
    const stop = stopOf(outcome);
    if (stop !== undefined) return stop;
  }
  return undefined;
}

/** The stop reason a failed call gives under the FAIL_RUN policy. */
export function failedBy(outcome: { readonly callId: string; readonly tool: string }, error: ErrorInfo): StopReason {
  return { kind: 'failed', why: `call ${outcome.callId} (${outcome.tool}) failed: ${error.message}`, callId: outcome.callId, error };
}

/**
 * The one way an error outcome is built: call `index` of the batch (`callId`, `tool`), whether
 * its body had started, its error, and the stop that ended it if a stop did. Field by field, in
 * one order, so every error outcome shares one hidden class (see docs/performance.md on spreads).
 */
export function errorOutcome(call: { readonly index: number; readonly callId: string; readonly tool: string }, dispatched: boolean, error: ErrorInfo, stopped?: StopReason): ErrorOutcome {
  const { index, callId, tool } = call;
  return stopped === undefined ? { index, callId, tool, kind: 'error', dispatched, error } : { index, callId, tool, kind: 'error', dispatched, error, stopped };
}

/** The outcome of call `index`, stopped by `reason`; `dispatched` says whether its body had started. Its class is `stopClass`'s. */
export function stoppedOutcome(call: BatchCall, index: number, dispatched: boolean, reason: StopReason): Outcome {
  // A call whose outcome was known already keeps it: what it did stays done.
  if (call.outcome !== undefined) return call.outcome;
  const { callId, tool } = call;
  const idempotent = call.idempotent === true;
  const which = { index, callId, tool };
  switch (stopClass(dispatched, idempotent)) {
    case 'never_dispatched': {
      const error = new CallStoppedError(neverDispatchedMessage(reason.why), false);
      return errorOutcome(which, dispatched, { name: error.name, message: error.message }, reason);
    }
    case 'safe_to_call_again': {
      const error = new CallStoppedError(inFlightMessage(stoppedWhat(call, reason), true), true);
      return errorOutcome(which, dispatched, { name: error.name, message: error.message }, reason);
    }
    case 'indeterminate':
      return { index, callId, tool, dispatched, kind: 'indeterminate', message: inFlightMessage(stoppedWhat(call, reason), false), stopped: reason };
  }
}

// What happened to a call in flight when its batch stopped: the deadline's own words for the call that passed it.
function stoppedWhat(call: BatchCall, reason: StopReason): string {
  const why = reason.kind === 'deadline' && reason.callId === call.callId ? reason.error.message : reason.why;
  return inFlightWhen(call.tool, batchStopped(why));
}

/**
 * The outcome of call `index`, cut off in flight by something that stops this call alone: a lane
 * store shared by a fleet lost its permit (`error`, a LaneLostError, says which lane and why:
 * "its lease on tool:search was lost (...)"), or its body's request went out and got no answer
 * (a CallInterruptedError: "its request to MCP server files timed out (...)"). Only this call
 * ends: safe to call again if idempotent, else its side effect may have landed. The error keeps
 * its name, which is how `stopClassOf` knows the call was cut off.
 */
export function lostOutcome(call: BatchCall, index: number, error: ErrorInfo): Outcome {
  const { callId, tool } = call;
  const what = inFlightWhen(tool, error.message);
  if (call.idempotent === true) {
    return { index, callId, tool, dispatched: true, kind: 'error', error: { name: error.name, message: inFlightMessage(what, true) } };
  }
  return { index, callId, tool, dispatched: true, kind: 'indeterminate', message: inFlightMessage(what, false) };
}

/** The error of a queued call whose lane was lost (`error`, a LaneLostError): never dispatched, and why. */
export function lostBeforeDispatch(error: ErrorInfo): ErrorInfo {
  return { name: error.name, message: neverDispatchedMessage(error.message) };
}

/**
 * True for an error that says the call's request went out and was cut off (CallInterruptedError):
 * its call is then classified by `lostOutcome`, as a call stopped in flight. Never throws: a
 * thrown value is the body's, and a Proxy's trap must not break the call's bookkeeping.
 */
export function wasCutOff(error: unknown): boolean {
  try {
    return error instanceof CallInterruptedError;
  } catch {
    return false;
  }
}
