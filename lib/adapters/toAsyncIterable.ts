// An Observable as an AsyncIterable, for `for await` code and runtimes built on iterators
// (web streams, Node streams, generators). Values are buffered until pulled; leaving the loop
// early unsubscribes, which stops a run (permits back, bodies aborted).
import type { Observable, Subscription } from 'rxjs';

/**
 * Iterates the values of `source$`. It subscribes on the first `next()`, buffers what arrives
 * before it is pulled (a run's transcript is finite, so the buffer is too), rethrows an error
 * at the pull that reaches it, and unsubscribes when the loop is left early (`break`, `return`,
 * a throw): for a run, that stops it. Each `[Symbol.asyncIterator]()` call is its own subscription.
 *
 * ## Example
 * ```ts
 * for await (const event of toAsyncIterable(runner.run$(agent, 'Four hotels in Lisbon'))) {
 *   console.log(event.type);   // RUN_STARTED, MODEL_RESPONSE, TOOL_RESULT ..., RUN_COMPLETED
 * }
 * ```
 */
export function toAsyncIterable<T>(source$: Observable<T>): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator](): AsyncIterator<T> {
      // Values that arrived and were not yet pulled.
      const buffer: T[] = [];
      // Pulls waiting for a value, oldest first (a caller may pull again before the last pull settled).
      const pulls: Array<{ resolve: (result: IteratorResult<T>) => void; reject: (error: unknown) => void }> = [];
      // Set once the source completed or errored (or the loop was left); `failure` is the error still to report.
      let ended = false;
      let failure: { error: unknown } | undefined;
      let subscription: Subscription | undefined;

      const settle = (): void => {
        while (pulls.length > 0 && (buffer.length > 0 || ended)) {
          const pull = pulls.shift()!;
          if (buffer.length > 0) pull.resolve({ value: buffer.shift() as T, done: false });
          else if (failure !== undefined) {
            const { error } = failure;
            failure = undefined;
            pull.reject(error);
          } else pull.resolve({ value: undefined, done: true });
        }
      };
      const start = (): void => {
        if (subscription !== undefined || ended) return;
        subscription = source$.subscribe({
          next: (value) => {
            buffer.push(value);
            settle();
          },
          error: (error: unknown) => {
            ended = true;
            failure = { error };
            settle();
          },
          complete: () => {
            ended = true;
            settle();
          },
        });
      };

      return {
        next: () =>
          new Promise<IteratorResult<T>>((resolve, reject) => {
            pulls.push({ resolve, reject });
            start();
            settle();
          }),
        return: async (): Promise<IteratorResult<T>> => {
          ended = true;
          failure = undefined;
          buffer.length = 0;
          subscription?.unsubscribe();
          settle();
          return { value: undefined, done: true };
        },
      };
    },
  };
}
