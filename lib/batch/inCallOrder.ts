// The reorder: outcomes arrive in finish order; each is released as soon as it and
// every earlier call have settled, so the stream is in call order and still streams.
import { concat, defer, mergeMap, scan, throwError, type OperatorFunction } from 'rxjs';

interface Reorder<T> {
  // Settled items not yet released, by position.
  readonly waiting: Map<number, T>;
  // The position released next.
  next: number;
  // What the last item released (empty while an earlier call is still out).
  ready: T[];
}

/**
 * Puts items carrying an `index` (0, 1, 2, ...) back in index order, releasing each run of
 * consecutive items as soon as it is complete. Errors if the source ends before all
 * `count` items came, so a lost outcome can never pass silently.
 */
export function inCallOrder<T extends { readonly index: number }>(count: number): OperatorFunction<T, T> {
  return (source) =>
    defer(() => {
      const state: Reorder<T> = { waiting: new Map(), next: 0, ready: [] };
      const ordered$ = source.pipe(
        scan((acc, item) => {
          acc.waiting.set(item.index, item);
          const ready: T[] = [];
          for (let found = acc.waiting.get(acc.next); found !== undefined; found = acc.waiting.get(acc.next)) {
            acc.waiting.delete(acc.next++);
            ready.push(found);
          }
          acc.ready = ready;
          return acc;
        }, state),
        mergeMap((acc) => acc.ready),
      );
      const complete$ = defer(() =>
        state.next < count
          ? throwError(() => new Error(`internal: the batch ended with call #${state.next} unsettled`))
          : [],
      );
      return concat(ordered$, complete$);
    });
}
