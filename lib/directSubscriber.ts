// How the library's records subscribe: each is its source's subscriber itself, a subclass of
// RxJS's public `Subscriber`, so `subscribe` takes it as it is (no wrapper around it, no
// closures per subscription). The one place that says how: a turn, a request to the model, the
// turn reader and run()'s collector extend `DirectSubscriber`, and the batch's stages extend
// `Stage`, a `DirectSubscriber` that passes what it makes on to the subscriber after it, as
// RxJS's own operators do (one subscriber object per stage and subscription, not an observer
// literal with its closures wrapped twice by RxJS).
import { Observable, Subscriber, type OperatorFunction } from 'rxjs';

/**
 * A record that is the subscriber of its source itself. Handed to `source.subscribe(record)`, it
 * is what the source's subscribe function receives and what `subscribe` returns: the source's
 * teardown is added to it, and unsubscribing it reaches the source at once, even while the source
 * is still being subscribed (a source that emits, or whose calls answer, synchronously). It is
 * made before it is subscribed, so whoever holds it can leave before the source's subscribe has
 * returned.
 *
 * RxJS takes a `Subscriber` instance as the subscriber itself in every version: RxJS 7's
 * `Observable.subscribe` tests `instanceof Subscriber` first, and RxJS 8 tests only that. (A
 * plain `Subscription` with `next`, `error` and `complete` passes RxJS 7's duck-typed test too,
 * but not RxJS 8's; this class does not rely on it. spec/directSubscriber.spec.ts fails if the
 * installed RxJS stops taking one as itself.)
 *
 * A subclass writes its own `next`, `error` and `complete`, each a method on its prototype, with
 * its state in its own fields: RxJS's `destination` is the empty observer and unused, and
 * `isStopped` is RxJS's own. Each method returns at once once the record is `closed`; `error` and
 * `complete` unsubscribe the record (its source's teardown runs) before or after passing the
 * ending on, as the subclass says. A throw in `next` is the subclass's to catch: RxJS does not
 * catch it for a subscriber handed to it as is.
 *
 * RxJS 7 marks `Subscriber`'s constructor as internal ("do not use directly"); RxJS 8 makes it the
 * public base of operators (`operate` is `new Subscriber(destination, overrides)`). It is called
 * here with no destination, which both versions accept.
 */
export abstract class DirectSubscriber<T> extends Subscriber<T> {
  constructor() {
    super();
  }

  abstract override next(value: T): void;
  abstract override error(error: unknown): void;
  abstract override complete(): void;
}

/**
 * A stage's subscription: the subscriber of its source itself (a `DirectSubscriber`), added to
 * the subscriber it passes things on to (`out`). The source's teardown is added to it, and `out`
 * leaving reaches the source at once, even while the source is still being subscribed (calls
 * that answer synchronously). What the stage does with each value is
 * `take`; a throw there is the stage's error, passed on, as in RxJS's operators. Once closed (its
 * source ended, or `out` left), a stage hears nothing more; a stage with work that outlives its
 * source (calls still running) hangs that work's teardown on `out`.
 */
export abstract class Stage<In, Out = In> extends DirectSubscriber<In> {
  // Assigned, not defined as a class field: every stage class shares this constructor, and a
  // field defined on instances of many shapes at one site is the slow path of property definition.
  declare protected out: Subscriber<Out>;

  constructor(out: Subscriber<Out>) {
    super();
    this.out = out;
    out.add(this);
  }

  override next(value: In): void {
    if (this.closed) return;
    try {
      this.take(value);
    } catch (error) {
      this.out.error(error);
    }
  }

  override error(error: unknown): void {
    if (this.closed) return;
    this.out.error(error);
    this.unsubscribe();
  }

  // As an RxJS subscriber does, the stage lets go of a source that completed (what it still has
  // to finish, calls in flight say, it keeps on `out`).
  override complete(): void {
    if (this.closed) return;
    try {
      this.sourceCompleted();
    } catch (error) {
      this.out.error(error);
    } finally {
      this.unsubscribe();
    }
  }

  /** A value from the source. */
  protected abstract take(value: In): void;

  /** The source completed: by default, so does the stage. */
  protected sourceCompleted(): void {
    this.out.complete();
  }
}

/** The operator each of whose subscriptions is a stage made for its subscriber. */
export function staged<In, Out = In>(stage: (out: Subscriber<Out>) => Stage<In, Out>): OperatorFunction<In, Out> {
  return (source) =>
    new Observable<Out>((out) => {
      source.subscribe(stage(out));
    });
}
