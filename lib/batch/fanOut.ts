// fanOut: mergeMap without a limit, for a batch's dispatches. It keeps the active inner
// subscriptions in a Set, so each finishing call costs O(1); RxJS's mergeMap links every
// inner subscription into an array on its subscriber and splices it out on completion,
// which grows with the number of calls in flight (thousands, in a large batch).
import { Observable, type OperatorFunction, type Subscription } from 'rxjs';

/** Subscribes `project(value)` for every source value at once, and forwards their values. */
export function fanOut<T, R>(project: (value: T) => Observable<R>): OperatorFunction<T, R> {
  return (source) =>
    new Observable<R>((subscriber) => {
      // Inner subscriptions still running.
      const active = new Set<Subscription>();
      // True once the source completed; the output completes when the last inner does.
      let sourceDone = false;
      // Registered first, so the inners are torn down before anything the source holds.
      subscriber.add(() => {
        for (const inner of active) inner.unsubscribe();
        active.clear();
      });
      const completeIfDone = (): void => {
        if (sourceDone && active.size === 0) subscriber.complete();
      };
      subscriber.add(
        source.subscribe({
          next: (value) => {
            // The source may go on emitting synchronously after the output was closed (a stop
            // set off by an earlier value): nothing more starts.
            if (subscriber.closed) return;
            let finished = false;
            let inner: Subscription | undefined;
            inner = project(value).subscribe({
              next: (result) => subscriber.next(result),
              error: (error: unknown) => subscriber.error(error),
              complete: () => {
                finished = true;
                if (inner !== undefined) active.delete(inner);
                completeIfDone();
              },
            });
            if (finished) return;
            // Closed while this inner was subscribing: its teardown already ran, so end it here.
            if (subscriber.closed) inner.unsubscribe();
            else active.add(inner);
          },
          error: (error: unknown) => subscriber.error(error),
          complete: () => {
            sourceDone = true;
            completeIfDone();
          },
        }),
      );
    });
}
