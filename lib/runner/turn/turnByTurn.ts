// The run's turns, one after another: `concatMap` over turns as `expand` with a concurrency of
// one would give them, the next turn known only once the one before it completes (what the
// model answered and how the batch went decide whether there is one).
import { Observable, type Subscriber, type Unsubscribable } from 'rxjs';
import { DirectSubscriber } from '../../directSubscriber.js';
import type { Keep } from '../../keep.js';

/** Where the turns come from: the next one once the one before it completed, and what a failed one ends with. */
export interface TurnSource<T> {
  /** The next turn, or undefined when there is none. */
  nextTurn(): Observable<T> | undefined;
  /** The last value of a sequence whose turn failed (undefined for none); without it, the error goes on. */
  turnFailed?(error: unknown): T | undefined;
}

/**
 * An Observable of turns: subscribes to the turn `source.nextTurn()` gives, passes its values on,
 * and once it completes asks for the following one; completes when there is none. A turn that
 * fails is handed to `source.turnFailed`, whose value (if any) ends the sequence, as `catchError`
 * would.
 * A turn's values reach the subscriber through one reader, not one layer per turn gone by, and
 * turns that complete synchronously are taken in a loop, not by recursion.
 *
 * ## Example
 * ```ts
 * let n = 0;
 * turnByTurn({ nextTurn: () => (n < 3 ? of(`turn ${++n}`) : undefined) }).subscribe(console.log);
 * // turn 1, turn 2, turn 3
 * ```
 */
export function turnByTurn<T>(source: TurnSource<T>): Observable<T> {
  return new Observable<T>((subscriber) => {
    const turns = new Turns(subscriber, source);
    // One teardown for every turn, added before the first: whatever the subscriber adds after
    // subscribing (a run's own teardown) runs after the turn being read has ended.
    subscriber.add(turns);
    turns.loop();
  });
}

// One subscription of turnByTurn: the turn being read, ended with it.
class Turns<T> implements Unsubscribable {
  // True while the loop runs, and whether a turn completed inside it (the loop then goes on).
  private looping = false;
  private completed = false;
  // The reader of the turn now read.
  private reading: TurnReader<T> | undefined = undefined;

  constructor(
    readonly subscriber: Subscriber<T>,
    private readonly source: TurnSource<T>,
  ) {}

  unsubscribe(): void {
    const { reading } = this;
    this.reading = undefined;
    reading?.unsubscribe();
  }

  loop(): void {
    const { subscriber } = this;
    this.looping = true;
    do {
      this.completed = false;
      if (subscriber.closed) break;
      let turn$: Observable<T> | undefined;
      try {
        turn$ = this.source.nextTurn();
      } catch (error) {
        this.failed(error);
        break;
      }
      if (turn$ === undefined) {
        subscriber.complete();
        break;
      }
      // The reader is the turn's subscriber itself, known before the turn is subscribed: leaving
      // the sequence ends the turn at once, even while the turn is still being subscribed.
      const reader = (this.reading = new TurnReader(this));
      turn$.subscribe(reader);
    } while (this.completed);
    this.looping = false;
  }

  /** @internal The turn read now completed (its reader torn down already): on to the next. */
  turnEnded(reader: TurnReader<T>): void {
    if (this.reading === reader) this.reading = undefined;
    if (this.looping) this.completed = true;
    else this.loop();
  }

  /** @internal A turn failed: `failed`'s value ends the sequence, or the error does. */
  failed(error: unknown): void {
    this.reading = undefined;
    const { subscriber, source } = this;
    if (source.turnFailed === undefined) return subscriber.error(error);
    let last: T | undefined;
    try {
      last = source.turnFailed(error);
    } catch (thrown) {
      return subscriber.error(thrown);
    }
    if (last !== undefined) subscriber.next(last);
    subscriber.complete();
  }
}

// Reads one turn: the turn's subscriber itself (a `DirectSubscriber`), one object per turn, and
// unsubscribing it reaches whatever the turn subscribed, however far its subscribe has got.
class TurnReader<T> extends DirectSubscriber<T> {
  constructor(private readonly turns: Turns<T>) {
    super();
  }

  override next(value: T): void {
    if (!this.closed) this.turns.subscriber.next(value);
  }

  override error(error: unknown): void {
    if (this.closed) return;
    this.unsubscribe();
    this.turns.failed(error);
  }

  override complete(): void {
    if (this.closed) return;
    // The turn's own teardown runs before the next turn starts.
    this.unsubscribe();
    this.turns.turnEnded(this);
  }
}

/** @internal A sequence per run and a reader per turn, inert, for keepWarmShapes (lib/shapes.ts). */
export function keepShapes(keep: Keep): void {
  const inertTurns = new Turns<never>(undefined as never, undefined as never);
  keep(() => inertTurns);
  keep(() => new TurnReader(inertTurns));
}
