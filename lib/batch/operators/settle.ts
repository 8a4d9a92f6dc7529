// Settling: the serial steps after the reorder (the runner's output guardrail, end hook and the
// result's serialisation), one record at a time, in call order. A step may replace the outcome
// (a refused result becomes an error). The outcome a record leaves with is its final one: the
// `settled` activity is told here, so watchers see what the transcript says.
import type { MonoTypeOperatorFunction, Observable } from 'rxjs';
import { isPending, takeAnswer } from '../answer.js';
import { serial, type Serial } from './serial.js';
import type { CallRecord } from '../records.js';
import type { BatchCall, Outcome } from '../types.js';

/** What a settle step answers with: the outcome at once, or a Promise or an Observable of it (its first value). */
export type SettleAnswer = Outcome | PromiseLike<Outcome> | Observable<Outcome>;

/** A settle step: the outcome as it goes out. */
export type SettleStep = (outcome: Outcome, call: BatchCall) => SettleAnswer;

/**
 * Passes each record through `step`, one at a time and in call order, and emits it with the
 * outcome the step gave back. A step that throws or errors errors the batch (a step is the
 * runner's own code; a policy's failure is turned into a refusal before it gets here). Under
 * the batch's FAIL_RUN policy, an outcome a step turned into a failure stops the batch once it
 * has gone out. Without a step, records go straight through (and are told as settled).
 *
 * ## Example
 * ```ts
 * records$.pipe(
 *   inCallOrder(),
 *   settle((outcome) => (outcome.kind === 'result' && leaks(outcome.result) ? refuse(outcome) : outcome)),
 * );
 * ```
 */
export function settle(step?: SettleStep): MonoTypeOperatorFunction<CallRecord> {
  return serial({
    // Outcomes only: a record no stage decided yet is not one.
    takes: (record) => record.outcome !== undefined,
    // Under FAIL_RUN, a failure stops the batch once its own outcome has gone out, before the next settles.
    wentOn: (record) => record.batch.stopIfFailed(record.outcome!),
    step(record, serial) {
      const outcome = record.outcome!;
      if (step === undefined) return settled(record, serial, outcome);
      let answer: SettleAnswer;
      try {
        answer = step(outcome, record.call);
      } catch (error) {
        serial.fail(error);
        return undefined;
      }
      // An outcome given at once goes out at once, with nothing made for it.
      if (!isPending(answer)) return settled(record, serial, answer as Outcome);
      // Set once the step answered (or the stage was torn down): later answers change nothing.
      let done = false;
      const take = (final: Outcome): void => {
        if (done) return;
        done = true;
        settled(record, serial, final);
      };
      const pending = takeAnswer<Outcome>(answer, {
        answered: take,
        failed: (error) => serial.fail(error),
        // A step that ends without an outcome leaves the one it was given.
        unanswered: () => take(outcome),
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

// The record goes out with its final outcome, and the next may settle.
function settled(record: CallRecord, serial: Serial, outcome: Outcome): undefined {
  record.settled(outcome);
  serial.through(record);
  return undefined;
}
