// The stop classification: when a batch stops, every call that had not settled gets
// exactly one outcome, and it says what the call did. A call that never went out is
// undone; a call that went out and was stopped is unknown unless it is idempotent.
import { CallStoppedError, type ErrorInfo } from '../errors.js';
import type { BatchCall, Outcome, StopReason } from './types.js';

/** The stop reason an external cancel gives. */
export function cancelled(why = 'the run was cancelled'): StopReason {
  return { kind: 'cancelled', why };
}

/** The stop reason a failed call gives under the FAIL_RUN policy. */
export function failedBy(outcome: { readonly callId: string; readonly tool: string }, error: ErrorInfo): StopReason {
  return { kind: 'failed', why: `call ${outcome.callId} (${outcome.tool}) failed: ${error.message}`, callId: outcome.callId, error };
}

/** The outcome of call `index`, stopped by `reason`; `dispatched` says whether its body had started. */
export function stoppedOutcome(call: BatchCall, index: number, dispatched: boolean, reason: StopReason): Outcome {
  const { callId, tool } = call;
  if (!dispatched) {
    const error = new CallStoppedError(`never dispatched: ${reason.why}`, false);
    return { index, callId, tool, dispatched, kind: 'error', error: { name: error.name, message: error.message }, stopped: reason };
  }
  const why = reason.kind === 'deadline' && reason.callId === call.callId ? reason.error.message : reason.why;
  const what = `${call.tool} was in flight when the batch stopped (${why}).`;
  if (call.idempotent === true) {
    const error = new CallStoppedError(`${what} Safe to call again`, true);
    return { index, callId, tool, dispatched, kind: 'error', error: { name: error.name, message: error.message }, stopped: reason };
  }
  return { index, callId, tool, dispatched, kind: 'indeterminate', message: `${what} The side effect may have landed`, stopped: reason };
}
