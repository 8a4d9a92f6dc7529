// One stream served to one client who may go away. Leaving does not just unsubscribe: it
// aborts the signal the stream was started with, so a run stops the way a cancelled run does
// (calls classified, RUN_CANCELLED) and is followed to that ending, unsubscribed only after a grace.
import { asyncScheduler, type Observable, type Subscription } from 'rxjs';
import { scheduleAfter } from '../time.js';

/** How a stream served to a client ended. */
export interface StreamEnding<T> {
  /** Every value the source emitted, those after the client left included (a run's classified ending). */
  readonly values: readonly T[];
  /** True when the client went away before the source ended. */
  readonly clientLeft: boolean;
  /** `complete` or `error` when the source ended by itself; `unsubscribed` when it had not ended `graceMs` after the client left. */
  readonly ended: 'complete' | 'error' | 'unsubscribed';
  /** What the source errored with (or what starting it threw), for `ended: 'error'`. */
  readonly error?: unknown;
}

export interface ClientFollow {
  /** The client went away: abort the source's signal, follow it to its end for up to `graceMs`. */
  leave(): void;
}

/**
 * Subscribes to `source$` (started with `controller.signal`) and passes each value to `write`
 * while the client is there. `leave()` aborts the controller, stops writing, and keeps following
 * so the source can end classified; if it has not ended after `graceMs` it is unsubscribed.
 * `end` is called exactly once, with every value seen.
 */
export function followForClient<T>(
  source$: Observable<T>,
  controller: AbortController,
  sink: { readonly write: (value: T) => void; readonly end: (ending: StreamEnding<T>) => void },
  graceMs: number,
): ClientFollow {
  // Every value, for the ending.
  const values: T[] = [];
  // Whether the client went away, and whether the ending was reported.
  let clientLeft = false;
  let done = false;
  // The wait for the source to end after the client left (any finite graceMs, 24.8 days and more included).
  let grace: Subscription | undefined;
  const finish = (ended: StreamEnding<T>['ended'], error?: unknown): void => {
    if (done) return;
    done = true;
    grace?.unsubscribe();
    sink.end({ values, clientLeft, ended, ...(ended === 'error' ? { error } : {}) });
  };
  const subscription = source$.subscribe({
    next: (value) => {
      values.push(value);
      if (!clientLeft) sink.write(value);
    },
    error: (error: unknown) => finish('error', error),
    complete: () => finish('complete'),
  });
  return {
    leave: () => {
      if (done || clientLeft) return;
      clientLeft = true;
      controller.abort(new Error('the client went away'));
      if (done) return;
      grace = scheduleAfter(asyncScheduler, () => {
        subscription.unsubscribe();
        finish('unsubscribed');
      }, graceMs);
    },
  };
}
