// The gate: the serial steps a call passes before it enters its lanes (the runner's onToolStart
// hook, input guardrail and approval), one call at a time, in call order, while the calls it
// let through already run. A refusal does not stop the call's record: it goes on, refused,
// and ends as a failure without taking its lanes.
import { identity, type MonoTypeOperatorFunction, type Observable } from 'rxjs';
import { toErrorInfo, type ErrorInfo } from '../../errors.js';
import { isPending, takeAnswer } from '../answer.js';
import { serial, type Serial } from './serial.js';
import type { CallRecord } from '../records.js';
import type { BatchCall, GateVerdict } from '../types.js';

/** A gate step: nothing (or undefined) lets the call through; an error, or its text, refuses it. */
export type GateStep = (call: BatchCall, index: number) => GateVerdict | PromiseLike<GateVerdict> | Observable<GateVerdict>;

function verdictError(verdict: unknown): ErrorInfo | undefined {
  if (verdict === undefined || verdict === null) return undefined;
  if (typeof verdict === 'string') return { name: 'ToolRejectedError', message: verdict };
  return toErrorInfo(verdict);
}

/**
 * Asks `step` about each call, one at a time and in call order: the next call is asked only
 * once the answer for the one before it is in (a Promise or an Observable is waited for; its
 * first value is the verdict). A step that throws or rejects refuses the call with its message.
 * Calls already refused (bad arguments) and calls of a stopped batch are not asked. Without a
 * step the gate is the identity: a batch without policies pays nothing for it.
 *
 * ## Example
 * ```ts
 * phase$.pipe(
 *   gate((call) => (call.tool === 'booking' && !approved(call) ? 'not approved' : undefined)),
 *   inLanes({ concurrency }),
 * );
 * // a refused booking ends as TOOL_ERROR "not approved", never dispatched
 * ```
 */
export function gate(step?: GateStep): MonoTypeOperatorFunction<CallRecord> {
  if (step === undefined) return identity;
  return serial({
    // A stopped batch asks nobody about calls it will not start: they wait to be classified.
    stays: (record) => record.batch.stopped !== undefined || record.batch.closed,
    step(record, serial) {
      // Calls refused already (bad arguments), known already (a resumed run), or decided, are not asked.
      if (record.call.refused !== undefined || record.call.outcome !== undefined || record.refused !== undefined || record.outcome !== undefined) return letThrough(record, serial, undefined);
      let answer: unknown;
      try {
        answer = step(record.call, record.index);
      } catch (error) {
        return letThrough(record, serial, toErrorInfo(error));
      }
      // A verdict given at once goes through at once, with nothing made for it.
      if (!isPending(answer)) return letThrough(record, serial, verdictError(answer));
      // Set once the verdict is in (or the gate was torn down): later answers change nothing.
      let done = false;
      const take = (refused: ErrorInfo | undefined): void => {
        if (done) return;
        done = true;
        letThrough(record, serial, refused);
      };
      const pending = takeAnswer<GateVerdict>(answer, {
        answered: (verdict) => take(verdictError(verdict)),
        failed: (error) => take(toErrorInfo(error)),
        unanswered: () => take(undefined),
      });
      return {
        unsubscribe: () => {
          done = true;
          pending?.unsubscribe();
        },
      };
    },
  });
}

// The record goes on (refused, if the gate said so), and the next call may be asked.
function letThrough(record: CallRecord, serial: Serial, refused: ErrorInfo | undefined): undefined {
  if (refused !== undefined) record.refuse(refused);
  serial.through(record);
  return undefined;
}
