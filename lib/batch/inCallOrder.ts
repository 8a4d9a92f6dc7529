// The reorder: outcomes arrive in finish order; each is released as soon as it and
// every earlier call have settled, so the stream is in call order and still streams.
import { Observable, type OperatorFunction } from 'rxjs';

/**
 * Puts items carrying an `index` (0, 1, 2, ...) back in index order, releasing each run of
 * consecutive items as soon as it is complete. Errors if the source ends before all
 * `count` items came, so a lost outcome can never pass silently.
 */
export function inCallOrder<T extends { readonly index: number }>(count: number): OperatorFunction<T, T> {
  return (source) =>
    new Observable<T>((subscriber) => {
      // Settled items not yet released, by position.
      const waiting = new Map<number, T>();
      // The position released next.
      let next = 0;
      // The source may complete while an item is being released (a downstream stop ends the
      // batch): the completion waits until the release loop is done.
      let releasing = false;
      let sourceDone = false;
      const end = (): void => {
        if (next < count) subscriber.error(new Error(`internal: the batch ended with call #${next} unsettled`));
        else subscriber.complete();
      };
      return source.subscribe({
        next: (item) => {
          if (releasing || item.index !== next) {
            waiting.set(item.index, item);
            return;
          }
          // The item released next: straight through, then whatever it was holding back.
          releasing = true;
          next++;
          subscriber.next(item);
          for (let found = waiting.get(next); found !== undefined && !subscriber.closed; found = waiting.get(next)) {
            waiting.delete(next++);
            subscriber.next(found);
          }
          releasing = false;
          if (sourceDone) end();
        },
        error: (error: unknown) => subscriber.error(error),
        complete: () => {
          sourceDone = true;
          if (!releasing) end();
        },
      });
    });
}
