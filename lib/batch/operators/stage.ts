// How the batch's operators subscribe: as RxJS's own operators do, with one subscriber object per
// stage and subscription that is both the observer of what comes in and a child of what it
// passes on to, not an observer literal with its closures wrapped twice by RxJS.
import { Observable, type OperatorFunction, type Subscriber } from 'rxjs';
import { DirectSubscriber } from '../../directSubscriber.js';

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
