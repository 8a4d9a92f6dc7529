// Ceilings: the timers of a batch's calls. Every call of one batch with the same ceiling
// (a tool's perToolSeconds, or the deadline's toolCallSeconds) is timed from its dispatch,
// and dispatches only move forward in time, so those timers expire in the order they were
// set: one queue per duration and one scheduler action for its head replace a timer per
// call. The scheduler stays the batch's, so ceilings run in virtual time under TestScheduler.
import type { SchedulerLike, Subscription } from 'rxjs';

/** One armed ceiling; `cancel` disarms it (it is then skipped when its time comes). */
export interface Ceiling {
  cancel(): void;
}

// A class rather than a literal with a method: a method written in an object literal is a new
// function per ceiling. It keeps what to call and on what, so a caller with many ceilings can
// hand one shared function and itself rather than a closure per ceiling.
class Entry implements Ceiling {
  cancelled = false;
  constructor(
    readonly due: number,
    readonly expire: (target: unknown) => void,
    readonly target: unknown,
  ) {}

  cancel(): void {
    this.cancelled = true;
  }
}

class DurationQueue {
  // Armed ceilings, earliest first: entries[head] onwards.
  private entries: Entry[] = [];
  private head = 0;
  // The scheduler action waiting for the head, if any.
  private action: Subscription | undefined;

  constructor(
    private readonly scheduler: SchedulerLike,
    private readonly ms: number,
  ) {}

  arm(expire: (target: unknown) => void, target: unknown): Ceiling {
    const entry = new Entry(this.scheduler.now() + this.ms, expire, target);
    this.entries.push(entry);
    if (this.action === undefined) this.wake(entry.due);
    return entry;
  }

  /** Ends the scheduler action; armed ceilings never fire afterwards. */
  close(): void {
    this.action?.unsubscribe();
    this.action = undefined;
    this.entries = [];
    this.head = 0;
  }

  private wake(due: number): void {
    this.action = this.scheduler.schedule(() => this.fire(), Math.max(0, due - this.scheduler.now()));
  }

  private fire(): void {
    this.action = undefined;
    const now = this.scheduler.now();
    while (this.head < this.entries.length) {
      const entry = this.entries[this.head]!;
      if (!entry.cancelled && entry.due > now) break;
      this.entries[this.head++] = undefined as unknown as Entry;
      if (!entry.cancelled) entry.expire(entry.target);
    }
    if (this.head === this.entries.length) {
      this.entries = [];
      this.head = 0;
    } else if (this.action === undefined) {
      // Skip cancelled entries at the head before choosing when to wake.
      this.wake(this.entries[this.head]!.due);
    }
  }
}

/** The ceilings of one batch, one queue per duration. */
export class Ceilings {
  private readonly queues = new Map<number, DurationQueue>();

  constructor(private readonly scheduler: SchedulerLike) {}

  /** Calls `expire` after `ms`, unless cancelled first. */
  arm(ms: number, expire: () => void): Ceiling;
  /** Calls `expire(target)` after `ms`, unless cancelled first. */
  arm<T>(ms: number, expire: (target: T) => void, target: T): Ceiling;
  arm(ms: number, expire: (target: unknown) => void, target?: unknown): Ceiling {
    let queue = this.queues.get(ms);
    if (queue === undefined) {
      queue = new DurationQueue(this.scheduler, ms);
      this.queues.set(ms, queue);
    }
    return queue.arm(expire, target);
  }

  /** Ends every timer; called when the batch ends, however it ends. */
  close(): void {
    for (const queue of this.queues.values()) queue.close();
    this.queues.clear();
  }
}
