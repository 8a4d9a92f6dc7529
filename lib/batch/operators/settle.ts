// Settling: the serial steps after the reorder (the runner's output guardrail, end hook and the
// result's serialisation), one record at a time, in call order. A step may replace the outcome
// (a refused result becomes an error). The outcome a record leaves with is its final one: the
// `settled` activity is told here, so watchers see what the transcript says.
import { from, isObservable, Observable, type MonoTypeOperatorFunction, type ObservableInput, type Unsubscribable } from 'rxjs';
import { isPromiseLike } from '../invocation.js';
import type { CallRecord } from '../records.js';
import { failedBy } from '../stops.js';
import type { BatchCall, Outcome } from '../types.js';

/** A settle step: the outcome as it goes out, at once or as a Promise or an Observable (its first value). */
export type SettleStep = (outcome: Outcome, call: BatchCall) => Outcome | ObservableInput<Outcome>;

function isOutcome(value: unknown): value is Outcome {
  return value !== null && typeof value === 'object' && 'kind' in value && 'index' in value && !isObservable(value) && !isPromiseLike(value);
}

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
  return (source) =>
    new Observable<CallRecord>((subscriber) => {
      // Records waiting for the one ahead of them to settle, from `head` on.
      let queue: Array<CallRecord | undefined> = [];
      let head = 0;
      // The step's answer being waited for.
      let settling: Unsubscribable | undefined;
      let sourceDone = false;
      let draining = false;

      const out = (record: CallRecord, outcome: Outcome): void => {
        record.settled(outcome);
        subscriber.next(record);
        const { batch } = record;
        if (batch.failFast && outcome.kind === 'error' && outcome.stopped === undefined) batch.stop(failedBy(outcome, outcome.error));
      };

      const drain = (): void => {
        if (draining) return;
        draining = true;
        try {
          while (settling === undefined && head < queue.length && !subscriber.closed) {
            const record = queue[head]!;
            queue[head++] = undefined;
            const outcome = record.outcome!;
            if (step === undefined) {
              out(record, outcome);
              continue;
            }
            let answer: Outcome | ObservableInput<Outcome>;
            try {
              answer = step(outcome, record.call);
            } catch (error) {
              subscriber.error(error);
              return;
            }
            if (isOutcome(answer)) {
              out(record, answer);
              continue;
            }
            // Its first value is the outcome, and one only: a call goes out once. An answer that
            // ends without a value keeps the outcome as it was, rather than losing the call.
            let taken = false;
            const take = (settled: Outcome): void => {
              if (taken) return;
              taken = true;
              const answering = settling;
              settling = undefined;
              answering?.unsubscribe();
              out(record, settled);
              drain();
            };
            const subscription = from(answer).subscribe({
              next: take,
              error: (error: unknown) => taken || subscriber.error(error),
              complete: () => take(outcome),
            });
            if (taken) subscription.unsubscribe();
            else settling = subscription;
          }
          if (head === queue.length) {
            queue = [];
            head = 0;
            if (sourceDone && settling === undefined && !subscriber.closed) subscriber.complete();
          }
        } finally {
          draining = false;
        }
      };

      subscriber.add(() => {
        settling?.unsubscribe();
        settling = undefined;
        queue = [];
      });
      return source.subscribe({
        next(record) {
          if (record.state !== 'ended') return;
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
