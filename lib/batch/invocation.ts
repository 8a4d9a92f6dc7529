// One invocation of a call's body as an Observable: the body may return a value,
// a Promise or an Observable, or throw; it gets an AbortSignal that aborts if the
// invocation is torn down before it settled (stopped, timed out, unsubscribed).
import { config, defaultIfEmpty, from, isObservable, Observable, of, take } from 'rxjs';

/** True for anything with a `then` method: a Promise, or a thenable. */
export function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * What a body returned, as an Observable of its one result: a value as itself, a Promise's
 * value, or an Observable's first value (`undefined` if it completes empty).
 */
export function fromResult(produced: unknown): Observable<unknown> {
  if (isObservable(produced)) return produced.pipe(take(1), defaultIfEmpty(undefined));
  // `from` handles the rejection, so a body that fails after being torn down leaves no unhandled rejection.
  if (isPromiseLike(produced)) return from(produced);
  return of(produced);
}

/** Why a body's signal aborted: it was torn down before it settled. */
export class InvocationAbortedError extends Error {
  override readonly name = 'AbortError';
}

/**
 * Invokes `body` on subscription. The result is the value returned, the value a Promise
 * resolves with, or the first value of an Observable (which is then unsubscribed; an
 * Observable that completes empty gives `undefined`).
 */
export function invocation(body: (signal: AbortSignal) => unknown): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    const controller = new AbortController();
    // True once the body produced its result or its error.
    let settled = false;
    let produced: unknown;
    try {
      produced = body(controller.signal);
    } catch (error) {
      settled = true;
      subscriber.error(error);
      return;
    }
    const subscription = fromResult(produced).subscribe({
      next: (value) => {
        settled = true;
        subscriber.next(value);
        subscriber.complete();
      },
      error: (error: unknown) => {
        settled = true;
        subscriber.error(error);
      },
    });
    return () => {
      subscription.unsubscribe();
      if (!settled) controller.abort(new InvocationAbortedError('the call was stopped before it settled'));
    };
  });
}

/**
 * Reports an error nobody can receive (a watcher or a hook that threw where the batch must go
 * on) the way RxJS reports one a subscriber threw: to `config.onUnhandledError` if set, else
 * thrown later, outside the batch.
 */
export function reportUnhandled(error: unknown): void {
  const handler = config.onUnhandledError;
  if (handler !== null) handler(error);
  else
    setTimeout(() => {
      throw error;
    });
}
