// A function of the user's (a tool body, a gate step, a settle step, a provider) may answer with
// a value, a Promise (or any thenable), or an Observable: this is the one place that tells them
// apart and takes the first answer, as `await` would for the first two.
import { isObservable, type Observer, type Subscribable, type Unsubscribable } from 'rxjs';
import { reportUnhandled } from '../unhandled.js';

/**
 * True for anything with a `then` method: a Promise, or a thenable. It reads `then`, which a
 * hostile value (a getter, a Proxy) can make throw: whoever asks about a value it did not make
 * (a body's answer) guards the call.
 */
export function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/** Who hears an answer: its value, its failure, or that an Observable ended without a value. */
export interface AnswerObserver<T> {
  answered(value: T): void;
  failed(error: unknown): void;
  /** An Observable answer that completed without a value. */
  unanswered(): void;
  /** Told when the answer is a Promise (or a thenable) still to settle, before it is awaited. */
  pending?(): void;
  /**
   * An Observable answer, which this observer subscribes itself (with an RxJS observer of its
   * own, and no wrapper made for it): what ends it early, or undefined. Without it, the
   * Observable's first value is taken for the observer.
   */
  observable?(answer: Subscribable<T>): Unsubscribable | undefined;
}

/**
 * Takes the first answer of `produced`: a plain value at once, a Promise or thenable when it
 * settles, an Observable's first value (or its error, or its completion without one), after
 * which it is unsubscribed. Reading the answer can throw (a throwing `then` getter, a Proxy's
 * traps), and so can a thenable's `then` or an Observable's `subscribe`: that is the answer's
 * failure, never an exception out of here. Returns what ends an Observable answer early (the
 * caller's teardown), or undefined.
 *
 * ## Example
 * ```ts
 * takeAnswer(body(args), { answered: (v) => done(v), failed: (e) => fail(e), unanswered: () => done(undefined) });
 * ```
 */
export function takeAnswer<T>(produced: unknown, observer: AnswerObserver<T>): Unsubscribable | undefined {
  try {
    if (isObservable(produced)) {
      const answer = produced as Subscribable<T>;
      return observer.observable !== undefined ? observer.observable(answer) : new FirstAnswer(observer).take(answer);
    }
    if (isPromiseLike(produced)) {
      observer.pending?.();
      produced.then(
        (value) => observer.answered(value as T),
        (error: unknown) => observer.failed(error),
      );
      return undefined;
    }
  } catch (error) {
    observer.failed(error);
    return undefined;
  }
  observer.answered(produced as T);
  return undefined;
}

// An Observable answer's first value, heard for `observer`: the RxJS observer of the answer is
// this one object, with no observer literal and no closures made for it.
class FirstAnswer<T> implements Observer<T> {
  // Set once the first answer came: later ones, and the completion after it, change nothing.
  private taken = false;
  private subscription: Unsubscribable | undefined = undefined;

  constructor(private readonly observer: AnswerObserver<T>) {}

  take(produced: Subscribable<T>): Unsubscribable | undefined {
    const subscription = produced.subscribe(this);
    if (!this.taken) return (this.subscription = subscription);
    unsubscribeQuietly(subscription);
    return undefined;
  }

  next(value: T): void {
    if (this.end()) this.observer.answered(value);
  }

  error(error: unknown): void {
    if (this.end()) this.observer.failed(error);
  }

  complete(): void {
    if (this.end()) this.observer.unanswered();
  }

  private end(): boolean {
    if (this.taken) return false;
    this.taken = true;
    const { subscription } = this;
    this.subscription = undefined;
    if (subscription !== undefined) unsubscribeQuietly(subscription);
    return true;
  }
}

/**
 * Unsubscribes `subscription`; a teardown that throws must not cut the caller's bookkeeping short
 * (an answer still heard, a call's outcome standing): it is reported, as RxJS reports an error
 * nobody can receive.
 */
export function unsubscribeQuietly(subscription: Unsubscribable): void {
  try {
    subscription.unsubscribe();
  } catch (error) {
    reportUnhandled(error);
  }
}

/**
 * True when `answer` is a Promise (or thenable) or an Observable, whose answer is still to come;
 * false for a plain value, taken as it is with nothing made for it. A value that cannot be asked
 * (a getter or a Proxy that throws) counts as pending: `takeAnswer` then fails it.
 */
export function isPending(answer: unknown): boolean {
  if (answer === null || (typeof answer !== 'object' && typeof answer !== 'function')) return false;
  try {
    return isObservable(answer) || isPromiseLike(answer);
  } catch {
    return true;
  }
}
