// Ceilings: the timers of a batch's calls. Every call of one batch with the same ceiling
// (a tool's perToolSeconds, or the deadline's toolCallSeconds) is timed from its start,
// and starts only move forward in time, so those timers expire in the order they were
// set: one queue per duration and one scheduler action for its head replace a timer per
// call. The scheduler stays the batch's, so ceilings run in virtual time under TestScheduler.
//
// A ceiling is not cancelled one by one: the batch says which targets no longer care (calls
// that settled), those are passed over, and what expires is told its target and checks it
// too. So a ceiling costs three array slots, not an object and a boxed number (72 bytes a
// call in a batch of thousands), and the batch closes every queue when it ends.
import { asyncScheduler, type SchedulerLike, type Subscription } from 'rxjs';
import type { Keep } from '../keep.js';
import { MAX_TIMER_MS } from '../time.js';

const neverStale = (): boolean => false;

class DurationQueue<T> {
  // Armed ceilings, earliest first, from `head` on: when each is due, what to call, on what.
  // Dues stay numbers only, so the array keeps them unboxed.
  private dues: number[] = [];
  private expires: Array<(target: T) => void> = [];
  private targets: Array<T | undefined> = [];
  private head = 0;
  // The scheduler action waiting for the head, if any.
  private action: Subscription | undefined;
  // True while due ceilings expire: one armed meanwhile (an expiry freed a permit and a call of
  // the batch started in it) must not set the wake-up, which is the head's, chosen after the loop.
  private firing = false;

  constructor(
    private readonly scheduler: SchedulerLike,
    private readonly ms: number,
    private readonly stale: (target: T) => boolean,
  ) {}

  arm(expire: (target: T) => void, target: T): void {
    const due = this.scheduler.now() + this.ms;
    this.dues.push(due);
    this.expires.push(expire);
    this.targets.push(target);
    if (this.action === undefined && !this.firing) this.wake(due);
  }

  /** Ends the scheduler action; armed ceilings never fire afterwards. */
  close(): void {
    this.action?.unsubscribe();
    this.action = undefined;
    this.reset();
  }

  private reset(): void {
    this.dues = [];
    this.expires = [];
    this.targets = [];
    this.head = 0;
  }

  // A wait longer than a Node timer keeps (MAX_TIMER_MS, about 24.8 days) is cut to that: the
  // queue wakes early, finds nothing due, and wakes again for what is left (the chaining of
  // scheduleAfter, which fire() already does). Node would otherwise make it 1 ms, every time.
  private wake(due: number): void {
    this.action = this.scheduler.schedule(() => this.fire(), Math.min(MAX_TIMER_MS, Math.max(0, due - this.scheduler.now())));
  }

  private fire(): void {
    this.action = undefined;
    const now = this.scheduler.now();
    const { dues, expires, targets } = this;
    this.firing = true;
    try {
      while (this.head < dues.length && dues[this.head]! <= now) {
        const at = this.head++;
        const expire = expires[at]!;
        const target = targets[at] as T;
        // Let go of what fired, so it does not outlive its time here.
        targets[at] = undefined;
        expire(target);
        // An expiry that closed the queue (it ended the batch) leaves nothing to fire.
        if (this.dues !== dues) return;
      }
    } finally {
      this.firing = false;
    }
    // Targets that no longer care, at the head, are passed over before choosing when to wake.
    while (this.head < dues.length && this.stale(targets[this.head] as T)) targets[this.head++] = undefined;
    if (this.head === dues.length) this.reset();
    else if (this.action === undefined) this.wake(dues[this.head]!);
  }
}

/** The ceilings of one batch, one queue per duration, over targets of type `T` (a call's record). */
export class Ceilings<T> {
  // Most batches time their calls by one duration: its queue is kept in two fields, and a map
  // is made for a second.
  private firstMs: number | undefined = undefined;
  private first: DurationQueue<T> | undefined = undefined;
  private queues: Map<number, DurationQueue<T>> | undefined = undefined;

  /** @param stale says of a target that it no longer cares (its expiry would do nothing): it is passed over */
  constructor(
    private readonly scheduler: SchedulerLike,
    private readonly stale: (target: T) => boolean = neverStale,
  ) {}

  /** Calls `expire(target)` after `ms`; `expire` decides whether `target` still cares. */
  arm(ms: number, expire: (target: T) => void, target: T): void {
    this.queueOf(ms).arm(expire, target);
  }

  /** Ends every timer; called when the batch ends, however it ends. */
  close(): void {
    this.first?.close();
    this.first = this.firstMs = undefined;
    if (this.queues === undefined) return;
    for (const queue of this.queues.values()) queue.close();
    this.queues = undefined;
  }

  private queueOf(ms: number): DurationQueue<T> {
    if (ms === this.firstMs) return this.first!;
    if (this.first === undefined) {
      this.firstMs = ms;
      return (this.first = new DurationQueue<T>(this.scheduler, ms, this.stale));
    }
    const queues = (this.queues ??= new Map<number, DurationQueue<T>>());
    let queue = queues.get(ms);
    if (queue === undefined) {
      queue = new DurationQueue<T>(this.scheduler, ms, this.stale);
      queues.set(ms, queue);
    }
    return queue;
  }
}

/**
 * @internal One of each per batch, inert, for keepWarmShapes (lib/shapes.ts), with the scheduler
 * action and the Node timer a queue waits on (both ended at once, kept ended).
 */
export function keepShapes(keep: Keep): void {
  keep(() => new Ceilings(asyncScheduler));
  keep(() => new DurationQueue(asyncScheduler, 1, neverStale));
  keep(() => {
    const endedAction = asyncScheduler.schedule(neverStale, MAX_TIMER_MS);
    endedAction.unsubscribe();
    return endedAction;
  });
  keep(() => {
    const endedTimer = setTimeout(neverStale, MAX_TIMER_MS);
    clearTimeout(endedTimer);
    return endedTimer;
  });
}
