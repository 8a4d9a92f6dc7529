// The gate: the serial steps a call passes before it is dispatched (the runner's onToolStart
// hook, input guardrail and approval), one call at a time, in call order, while the calls it
// let through already run. A refusal does not stop the call's record: it goes on, refused,
// and ends as a failure without taking its lanes.
import { identity, Observable, type MonoTypeOperatorFunction, type Unsubscribable } from 'rxjs';
import { toErrorInfo, type ErrorInfo } from '../../errors.js';
import { takeAnswer } from '../answer.js';
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
  return (source) =>
    new Observable<CallRecord>((subscriber) => {
      // Records waiting for their turn at the gate, from `head` on.
      let queue: Array<CallRecord | undefined> = [];
      let head = 0;
      // The answer being waited for, if any.
      let asking: Unsubscribable | undefined;
      // True once the source completed.
      let sourceDone = false;
      // True while the queue is being worked through: a re-entered drain returns.
      let draining = false;

      const pass = (record: CallRecord, refused: ErrorInfo | undefined): void => {
        if (refused !== undefined) record.refused = refused;
        subscriber.next(record);
      };

      const answered = (record: CallRecord, refused: ErrorInfo | undefined): void => {
        asking = undefined;
        pass(record, refused);
        drain();
      };

      const ask = (record: CallRecord): void => {
        let answer: unknown;
        try {
          answer = step(record.call, record.index);
        } catch (error) {
          pass(record, toErrorInfo(error));
          return;
        }
        // Set once the verdict is in (or the gate was torn down): later answers change nothing.
        let done = false;
        let pending: Unsubscribable | undefined;
        const take = (refused: ErrorInfo | undefined): void => {
          if (done) return;
          done = true;
          answered(record, refused);
        };
        asking = {
          unsubscribe: () => {
            done = true;
            pending?.unsubscribe();
          },
        };
        pending = takeAnswer<GateVerdict>(answer, {
          answered: (verdict) => take(verdictError(verdict)),
          failed: (error) => take(toErrorInfo(error)),
          unanswered: () => take(undefined),
        });
      };

      const drain = (): void => {
        if (draining) return;
        draining = true;
        try {
          while (asking === undefined && head < queue.length && !subscriber.closed) {
            const record = queue[head]!;
            // A stopped batch asks nobody about calls it will not dispatch: they wait to be classified.
            if (record.batch.stopped !== undefined || record.batch.closed) return;
            queue[head++] = undefined;
            if (record.call.rejected !== undefined || record.refused !== undefined || record.state === 'ended') subscriber.next(record);
            else ask(record);
          }
          if (head === queue.length) {
            queue = [];
            head = 0;
            if (sourceDone && asking === undefined) subscriber.complete();
          }
        } finally {
          draining = false;
        }
      };

      subscriber.add(() => {
        asking?.unsubscribe();
        asking = undefined;
        queue = [];
      });
      return source.subscribe({
        next(record) {
          queue.push(record);
          drain();
        },
        error(error: unknown) {
          subscriber.error(error);
        },
        complete() {
          sourceDone = true;
          drain();
        },
      });
    });
}
