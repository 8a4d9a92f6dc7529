// The one-at-a-time engine the gate and settling share, as RxJS's concatMap is mergeMap with a
// concurrency of one: records queue in arrival order, and each is handed to its step only once
// the one before it is through. Plain state (a queue and a few flags), no Subscriber per record.
import { Observable, type Subscriber, type Unsubscribable } from 'rxjs';
import type { CallRecord } from '../records.js';

/** What a serial stage does with one record. */
export interface SerialStage {
  /** Records this stage takes; the others go no further (default: all). */
  takes?(record: CallRecord): boolean;
  /** True when the queue must wait where it is (a stopped batch asks nobody): the record stays first. */
  holds?(record: CallRecord): boolean;
  /**
   * Handles `record` and calls `next()` once it is through, at once or later (or errors the
   * stage through `subscriber`). Returns what ends an answer still awaited, if any.
   */
  step(record: CallRecord, next: () => void, subscriber: Subscriber<CallRecord>): Unsubscribable | undefined;
}

/** The source's records through `stage`, one at a time, in the order they came. */
export function serial(source: Observable<CallRecord>, stage: SerialStage): Observable<CallRecord> {
  return new Observable<CallRecord>((subscriber) => {
    // Records waiting for their turn, from `head` on.
    let queue: Array<CallRecord | undefined> = [];
    let head = 0;
    // The record being handled: what ends its awaited answer (or a mark that one is awaited).
    let busy: Unsubscribable | undefined;
    // True once the source completed.
    let sourceDone = false;
    // True while the queue is being worked through: a re-entered drain returns.
    let draining = false;
    const idle: Unsubscribable = { unsubscribe: () => undefined };

    const drain = (): void => {
      if (draining) return;
      draining = true;
      try {
        while (busy === undefined && head < queue.length && !subscriber.closed) {
          const record = queue[head]!;
          if (stage.holds?.(record) === true) return;
          queue[head++] = undefined;
          // Set once this record is through: the next may go.
          let through = false;
          let sync = true;
          const next = (): void => {
            if (through) return;
            through = true;
            if (sync) return;
            busy = undefined;
            drain();
          };
          const pending = stage.step(record, next, subscriber);
          sync = false;
          if (!through) {
            busy = pending ?? idle;
            return;
          }
        }
        if (head === queue.length) {
          queue = [];
          head = 0;
          if (sourceDone && busy === undefined && !subscriber.closed) subscriber.complete();
        }
      } finally {
        draining = false;
      }
    };

    subscriber.add(() => {
      busy?.unsubscribe();
      busy = undefined;
      queue = [];
    });
    return source.subscribe({
      next(record) {
        if (stage.takes !== undefined && !stage.takes(record)) return;
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
