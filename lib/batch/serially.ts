// serially: a step applied to each value one at a time, in order: what concatMap does,
// without an Observable per value when the step answers synchronously (it usually
// does: a settle step with no async policy). A Promise or Observable is waited for,
// and the values behind it queue.
import { from, Observable, type ObservableInput, type OperatorFunction, type Subscription } from 'rxjs';

/** Maps each value with `step`, one at a time and in order. `isValue` tells a plain answer from an async one. */
export function serially<T, R>(step: (value: T) => R | ObservableInput<R>, isValue: (answer: unknown) => answer is R): OperatorFunction<T, R> {
  return (source) =>
    new Observable<R>((subscriber) => {
      // Values waiting for the one in progress: queue[head] onwards.
      let queue: T[] = [];
      let head = 0;
      // The async answer in progress, if any.
      let pending: Subscription | undefined;
      let sourceDone = false;
      subscriber.add(() => pending?.unsubscribe());

      const drain = (): void => {
        while (pending === undefined && head < queue.length && !subscriber.closed) {
          const value = queue[head]!;
          queue[head++] = undefined as T;
          let answer: R | ObservableInput<R>;
          try {
            answer = step(value);
          } catch (error) {
            subscriber.error(error);
            return;
          }
          if (isValue(answer)) {
            subscriber.next(answer);
            continue;
          }
          let done = false;
          const subscription = from(answer).subscribe({
            next: (result) => subscriber.next(result),
            error: (error: unknown) => subscriber.error(error),
            complete: () => {
              done = true;
              pending = undefined;
              drain();
            },
          });
          if (!done) pending = subscription;
        }
        if (head === queue.length) {
          queue = [];
          head = 0;
          if (sourceDone && pending === undefined) subscriber.complete();
        }
      };

      subscriber.add(
        source.subscribe({
          next: (value) => {
            queue.push(value);
            drain();
          },
          error: (error: unknown) => subscriber.error(error),
          complete: () => {
            sourceDone = true;
            drain();
          },
        }),
      );
    });
}
