// The stop: a cancel from outside, a deadline, or a failure under FAIL_RUN ends the dispatches
// (every body in flight aborted, every permit not held by a running body given back), then
// every call of the batch that had no outcome gets exactly one, by what it had done: never
// dispatched, or stopped in flight (safe to call again if idempotent, else indeterminate).
import { Observable, type MonoTypeOperatorFunction, type Subscribable, type Unsubscribable } from 'rxjs';
import { BatchScope as BatchScopeClass, type BatchScope } from '../batchScope.js';
import type { CallRecord } from '../records.js';
import { failedBy, stoppedOutcome } from '../stops.js';
import type { StopReason } from '../types.js';

/**
 * Passes records through until the batch stops. The first stop wins: from `stop$` (an
 * Observable, or anything with `subscribe(observer)`), from the batch itself (a call past
 * `toolCallSeconds`), or from a failed call when the batch fails fast (FAIL_RUN). On a stop it
 * unsubscribes its source, which tears down everything upstream (the dispatches, the gate,
 * phases not yet started), then emits every record of the batch without an outcome, classified,
 * and completes. A stop that came before the batch started dispatches nothing.
 *
 * ## Example
 * ```ts
 * const stop$ = fromEvent(cancelButton, 'click').pipe(map(() => ({ kind: 'cancelled', why: 'the user pressed stop' })));
 * records$.pipe(untilStopped(stop$), inCallOrder(), settle());
 * // in flight: "search was in flight when the batch stopped (the user pressed stop). Safe to call again"
 * // queued:    "never dispatched: the user pressed stop"
 * ```
 */
export function untilStopped(stop$?: Subscribable<StopReason>): MonoTypeOperatorFunction<CallRecord> {
  return (source) =>
    new Observable<CallRecord>((subscriber) => {
      // The batch, known from the first record, or at once when the stop given is the batch's own.
      let batch: BatchScope | undefined;
      // The source's subscription, ended by the stop.
      let upstream: Unsubscribable | undefined;
      // The stop, once it came.
      let stopped: StopReason | undefined;
      // The outside stop's subscription.
      let listening: Unsubscribable | undefined;
      // True until the source is subscribed: a stop then waits for the records it must classify.
      let starting = true;
      // True once the stop took effect.
      let classified = false;

      const classify = (reason: StopReason): void => {
        if (classified) return;
        classified = true;
        // Everything upstream ends first: bodies aborted, permits back, no call starts after this.
        upstream?.unsubscribe();
        upstream = undefined;
        listening?.unsubscribe();
        listening = undefined;
        const open = batch === undefined ? [] : batch.unsettled();
        // Every outcome is decided (and told as ended) before any goes on, as in one step.
        // (A record the batch's close() decided meanwhile, its subscriber gone from inside a watcher, keeps that outcome.)
        for (const record of open) if (record.state !== 'ended') record.decide(stoppedOutcome(record.call, record.index, record.state === 'running', reason));
        for (const record of open) {
          if (subscriber.closed) return;
          subscriber.next(record);
        }
        subscriber.complete();
      };

      // A stop from outside: through the batch, which holds it while a call is mid-bookkeeping.
      const stop = (reason: StopReason): void => {
        stopped ??= reason;
        if (batch !== undefined) batch.stop(reason);
        else if (!starting) classify(reason);
      };

      const meet = (scope: BatchScope): void => {
        if (batch !== undefined) return;
        batch = scope;
        scope.onStop((reason) => {
          stopped ??= reason;
          if (!starting) classify(reason);
          // Stopped while its source is being subscribed (a body that stops its own batch, say):
          // the calls still arriving are classified once they all have, but the calls dispatched
          // end now, as the unsubscription would end them, so an answer after the stop is ignored.
          else scope.tearDownDispatched();
        });
        if (stopped !== undefined) scope.stop(stopped);
      };

      subscriber.add(() => {
        upstream?.unsubscribe();
        listening?.unsubscribe();
        upstream = listening = undefined;
      });
      if (isBatchScope(stop$)) meet(stop$);
      else if (stop$ !== undefined) {
        const subscription = stop$.subscribe({ next: stop });
        if (stopped !== undefined) subscription.unsubscribe();
        else listening = subscription;
      }
      const subscription = source.subscribe({
        next(record) {
          meet(record.batch);
          subscriber.next(record);
          // FAIL_RUN: a failure stops the batch once its own outcome has gone on.
          const { outcome } = record;
          if (record.state === 'ended' && record.batch.failFast && outcome?.kind === 'error' && outcome.stopped === undefined) {
            record.batch.stop(failedBy(outcome, outcome.error));
          }
        },
        error(error: unknown) {
          subscriber.error(error);
        },
        complete() {
          // Calls a stop kept from their dispatch end here, classified.
          const reason = stopped ?? batch?.stopped;
          if (reason !== undefined) {
            if (!starting) classify(reason);
            return;
          }
          // Every call had its outcome: a stop can come no more.
          listening?.unsubscribe();
          listening = undefined;
          subscriber.complete();
        },
      });
      starting = false;
      if (classified || subscriber.closed) subscription.unsubscribe();
      else {
        upstream = subscription;
        // A stop that came while the batch started (or before): its calls are all known now.
        const reason = batch?.stopped ?? stopped;
        if (reason !== undefined) classify(reason);
      }
      return undefined;
    });
}

function isBatchScope(value: unknown): value is BatchScope {
  return value instanceof BatchScopeClass;
}
