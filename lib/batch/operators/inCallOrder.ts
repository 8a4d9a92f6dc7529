// The reorder: the scan that turns records in finish order into records in call order. A
// record whose outcome is decided waits here until every call before it has one; then the whole
// settled prefix goes out at once. Records passing for other reasons (a body that started) are
// not outcomes, and stay here.
import { Observable, type MonoTypeOperatorFunction } from 'rxjs';
import type { CallRecord } from '../records.js';

/**
 * Emits each record once its outcome is decided and every earlier call's has been emitted:
 * call order, whatever order the calls finished in, and as early as call order allows (a
 * streaming reorder, not a buffer of the whole batch). Completes when its source completes;
 * a call of the batch left without an outcome then is an error, never silence.
 *
 * ## Example
 * ```ts
 * // c finishes first, then a, then b
 * records$.pipe(inCallOrder()).subscribe((r) => console.log(r.call.callId));
 * // a, b, c: a as soon as it settles, then b and c together
 * ```
 */
export function inCallOrder(): MonoTypeOperatorFunction<CallRecord> {
  return (source) =>
    new Observable<CallRecord>((subscriber) => {
      // Decided records waiting for an earlier call, by index.
      let waiting: Array<CallRecord | undefined> = [];
      // The index of the next call to emit.
      let next = 0;
      // The batch, known from the first record.
      let seen: CallRecord | undefined;
      subscriber.add(() => {
        waiting = [];
        seen = undefined;
      });
      return source.subscribe({
        next(record) {
          if (record.state !== 'ended') return;
          seen ??= record;
          if (record.index !== next) {
            waiting[record.index] = record;
            return;
          }
          subscriber.next(record);
          next++;
          // The prefix this record completed goes out with it.
          let later: CallRecord | undefined;
          while ((later = waiting[next]) !== undefined && !subscriber.closed) {
            waiting[next] = undefined;
            subscriber.next(later);
            next++;
          }
        },
        error(error: unknown) {
          subscriber.error(error);
        },
        complete() {
          const expected = seen?.batch.size ?? next;
          // Every call has its outcome by now; one missing is a bug, and it must not pass silently.
          if (next >= expected) subscriber.complete();
          else subscriber.error(new Error(`internal: the batch ended with call #${next} unsettled`));
        },
      });
    });
}
