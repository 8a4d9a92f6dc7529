// How the library's records subscribe: each is its source's subscriber itself, a subclass of
// RxJS's public `Subscriber`, so `subscribe` takes it as it is (no wrapper around it, no
// closures per subscription). The one place that says how: the batch's stages, a turn, a
// request to the model, the turn reader and run()'s collector all extend this class.
import { Subscriber } from 'rxjs';

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
