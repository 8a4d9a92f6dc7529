// The stop: a cancel from outside, a deadline, or a failure under FAIL_RUN ends the calls in their
// lanes (every body in flight aborted, every permit not held by a running body left), then
// every call of the batch that had no outcome gets exactly one, by what it had done: never
// dispatched, or stopped in flight (safe to call again if idempotent, else indeterminate).
import { Observable, type MonoTypeOperatorFunction, type Subscribable, type Subscriber, type Unsubscribable } from 'rxjs';
import { BatchScope as BatchScopeClass, type BatchScope } from '../batchScope.js';
import { CallBody } from '../callBody.js';
import type { CallNews } from '../records.js';
import { Stage } from '../../directSubscriber.js';
import type { StopReason } from '../types.js';

/**
 * Passes records through until the batch stops. The first stop wins: from `stop$` (an
 * Observable, or anything with `subscribe(observer)`), from the batch itself (a call past
 * `toolCallSeconds`), or from a failed call when the batch fails fast (FAIL_RUN). On a stop it
 * unsubscribes its source, which tears down everything upstream (the fan-outs, the gate,
 * phases not yet started), then emits every record of the batch without an outcome, classified,
 * and completes. A stop that came before the batch started starts nothing.
 *
 * ## Example
 * ```ts
 * const stop$ = fromEvent(cancelButton, 'click').pipe(map(() => ({ kind: 'cancelled', why: 'the user pressed stop' })));
 * records$.pipe(untilStopped(stop$), inCallOrder(), settle());
 * // in flight: "search was in flight when the batch stopped (the user pressed stop). Safe to call again"
 * // queued:    "never dispatched: the user pressed stop"
 * ```
 */
export function untilStopped(stop$?: Subscribable<StopReason>): MonoTypeOperatorFunction<CallNews> {
  return (source) =>
    new Observable<CallNews>((out) => {
      const stage = new UntilStopped(out);
      stage.listen(stop$);
      source.subscribe(stage);
      stage.started();
    });
}

// One subscription of untilStopped. The stage is its source's subscriber: a stop unsubscribes it
// (everything upstream ends), and the classified records go straight on to `out`.
class UntilStopped extends Stage<CallNews> {
  // The batch, known from the first record, or at once when the stop given is the batch's own.
  private batch: BatchScope | undefined = undefined;
  // A stop from outside heard before the batch was known; the batch keeps it once met.
  private early: StopReason | undefined = undefined;
  // The outside stop's subscription.
  private listening: Unsubscribable | undefined = undefined;
  // True until the source is subscribed: a stop then waits for the records it must classify.
  private starting = true;
  // True once the stop took effect.
  private classified = false;

  constructor(out: Subscriber<CallNews>) {
    super(out);
    // The outside stop is heard for as long as `out` is there, not only while the source is.
    out.add(() => this.unlisten());
  }

  // The stop: the batch's (its one holder), or the one heard before the batch was known.
  private get stopped(): StopReason | undefined {
    return this.batch?.stopped ?? this.early;
  }

  /** Hears `stop$`: the batch's own (through the batch), or a stop from outside. */
  listen(stop$: Subscribable<StopReason> | undefined): void {
    if (isBatchScope(stop$)) this.meet(stop$);
    else if (stop$ !== undefined) {
      const subscription = stop$.subscribe({ next: (reason) => this.stop(reason) });
      if (this.stopped !== undefined) subscription.unsubscribe();
      else this.listening = subscription;
    }
  }

  /** The source is subscribed: a stop that came meanwhile (or before) takes effect now, its calls all known. */
  started(): void {
    this.starting = false;
    if (this.classified || this.out.closed) return;
    const reason = this.stopped;
    if (reason !== undefined) this.classify(reason);
  }

  protected take(news: CallNews): void {
    if (news instanceof CallBody) {
      this.meet(news.record.batch);
      this.out.next(news);
      return;
    }
    this.meet(news.batch);
    this.out.next(news);
    // FAIL_RUN: a failure stops the batch once its own outcome has gone on.
    const { outcome } = news;
    if (outcome !== undefined) news.batch.stopIfFailed(outcome);
  }

  protected override sourceCompleted(): void {
    // Calls a stop kept from their lanes end here, classified.
    const reason = this.stopped;
    if (reason !== undefined) {
      if (!this.starting) this.classify(reason);
      return;
    }
    // Every call had its outcome: a stop can come no more.
    this.unlisten();
    this.out.complete();
  }

  // A stop from outside: through the batch, which defers it while a call is mid-bookkeeping.
  private stop(reason: StopReason): void {
    if (this.batch !== undefined) this.batch.stop(reason);
    else {
      this.early ??= reason;
      if (!this.starting) this.classify(reason);
    }
  }

  private meet(scope: BatchScope): void {
    if (this.batch !== undefined) return;
    this.batch = scope;
    scope.onStop((reason) => {
      if (!this.starting) this.classify(reason);
      // Stopped while its source is being subscribed (a body that stops its own batch, say):
      // the calls still arriving are classified once they all have, but the calls in their lanes
      // end now, as the unsubscription would end them, so an answer after the stop is ignored.
      else scope.teardownEntered();
    });
    if (this.early !== undefined) scope.stop(this.early);
  }

  private classify(reason: StopReason): void {
    if (this.classified) return;
    this.classified = true;
    const { out, batch } = this;
    // Everything upstream ends first: bodies aborted, permits left, no call starts after this.
    this.unsubscribe();
    this.unlisten();
    // Every outcome is decided (and told as ended) before any goes on, as in one step.
    const open = batch === undefined ? [] : batch.classify(reason);
    for (const record of open) {
      if (out.closed) return;
      out.next(record);
    }
    out.complete();
  }

  private unlisten(): void {
    const { listening } = this;
    this.listening = undefined;
    listening?.unsubscribe();
  }
}

function isBatchScope(value: unknown): value is BatchScope {
  return value instanceof BatchScopeClass;
}
