// A Lane is a counting semaphore: `limit` permits, granted to waiters in turn.
// Waiters are grouped by party (the tenant, in shared lanes) and parties are
// served round-robin, so one party's long queue cannot hold back another's call;
// within a party, grants are FIFO. Everything here is synchronous and O(1).
import type { LimitChange } from './AdaptiveLimit.js';
import type { Keep } from '../keep.js';

/** What a lane reports of itself: how many hold a permit and how many wait for one. */
export interface LaneOccupancy {
  readonly key: string;
  readonly limit: number;
  readonly holders: number;
  readonly waiters: number;
}

/**
 * A change in a lane, as `LaneTable.changes$` reports it. `lost` comes only from a store shared
 * by a fleet: a permit or a place in the queue its lease no longer covers.
 */
export interface LaneChange extends LaneOccupancy {
  readonly change: 'queued' | 'granted' | 'released' | 'withdrawn' | 'lost';
  readonly party: string;
}

const WAITING = 0;
const HOLDING = 1;
const LEFT = 2;

/**
 * One request for a permit. `leave()` gives the permit back if it was granted, or
 * withdraws the request if it was still waiting; calling it again does nothing.
 * A request granted at once is a plain LanePermit; one that had to wait is a QueuedPermit, which
 * also carries its place in the queue and what to call on its grant (most requests never
 * wait, and a batch of thousands holds one of these per call and lane).
 */
export class LanePermit {
  /** @internal */ state = WAITING;
  constructor(
    /** @internal */ readonly lane: Lane,
    /** @internal */ readonly party: string,
  ) {}

  /** True once the permit was granted and until it is given back. */
  get holding(): boolean {
    return this.state === HOLDING;
  }

  leave(): void {
    this.lane.leave(this);
  }
}

/**
 * Who is told of a grant: a function, or an object whose `granted()` is called. A caller with
 * many requests (a batch of thousands of calls) hands each request's own record rather than
 * a closure made for it. An object may also have `lost(error)` (a function may carry one as a
 * property, so a store that only calls functions still works with it): a store shared by a fleet
 * (RedisLaneStore) calls it when it loses the permit, or the place in the queue, it had for the
 * request (its lease ran out unrefreshed, its Redis could not be reached). An in-process lane never does.
 * A budget lane calls `lost` with a BudgetExceededError when it cannot cover the request. An
 * adaptive lane calls `limitChanged(change)` when what its holder reported moved the lane's limit.
 */
export type OnGrant = (() => void) | LaneGrantTarget;

/** The object form of `OnGrant`: a call's lanes part implements it, one per call, no closure. */
export interface LaneGrantTarget {
  granted(): void;
  lost?(error: Error): void;
  limitChanged?(change: LimitChange): void;
}

/** Tells `onGrant` its permit was granted: calls it, or its `granted()`. For stores that take either form. */
export function grant(onGrant: OnGrant): void {
  if (typeof onGrant === 'function') onGrant();
  else onGrant.granted();
}

/** A request that waits in a party's queue until it is granted (or withdrawn). */
class QueuedPermit extends LanePermit {
  /** @internal */ prev: QueuedPermit | undefined = undefined;
  /** @internal */ next: QueuedPermit | undefined = undefined;
  /** @internal */ queue: PartyQueue | undefined = undefined;
  constructor(
    lane: Lane,
    party: string,
    /** @internal */ readonly onGrant: OnGrant,
  ) {
    super(lane, party);
  }
}

/** One party's waiters, oldest first, and its place in the lane's rotation of parties. */
class PartyQueue {
  head: QueuedPermit | undefined = undefined;
  tail: QueuedPermit | undefined = undefined;
  // Neighbours in the rotation of parties that have someone waiting.
  prev: PartyQueue | undefined = undefined;
  next: PartyQueue | undefined = undefined;
  inRotation = false;
  constructor(readonly party: string) {}
}

export class Lane {
  // Permits currently granted and not yet given back.
  private holderCount = 0;
  // Requests waiting for a permit, over all parties.
  private waiterCount = 0;
  // Each party's queue, kept while the party has waiters.
  private parties: Map<string, PartyQueue> | undefined = undefined;
  // The rotation of parties with waiters; `first` is served next.
  private first: PartyQueue | undefined = undefined;
  private last: PartyQueue | undefined = undefined;
  // True while grants are being handed out, so a release made by a granted waiter
  // (a body that finishes synchronously) does not recurse into another drain.
  private draining = false;

  /**
   * @param key the lane's name in its table (`tool:search`, `tenant:acme`)
   * @param limit how many permits; `Infinity` for a lane that only counts
   * @param onChange told of every change, for occupancy streams and for dropping idle lanes
   */
  constructor(
    readonly key: string,
    private permitCount: number,
    private readonly onChange?: (lane: Lane, change: LaneChange['change'], party: string) => void,
  ) {
    if (!(permitCount >= 1)) throw new TypeError(`Expected a lane limit from 1 up, got ${permitCount}`);
  }

  /** How many permits the lane has. */
  get limit(): number {
    return this.permitCount;
  }

  /**
   * Gives the lane `limit` permits (an adaptive lane's limit moved). More permits go to waiters
   * at once; fewer take nothing back from holders: the lane grants nothing until enough leave.
   */
  resize(limit: number): void {
    if (!(limit >= 1)) throw new TypeError(`Expected a lane limit from 1 up, got ${limit}`);
    this.permitCount = limit;
    this.drain();
  }

  get holders(): number {
    return this.holderCount;
  }

  get waiters(): number {
    return this.waiterCount;
  }

  get idle(): boolean {
    return this.holderCount === 0 && this.waiterCount === 0;
  }

  occupancy(): LaneOccupancy {
    return { key: this.key, limit: this.permitCount, holders: this.holderCount, waiters: this.waiterCount };
  }

  /**
   * Asks for a permit. `onGrant` is told when it is granted, which may be at once,
   * before `enter` returns: the permit's `holding` then reads true. Give the permit back
   * (or withdraw) with `permit.leave()`.
   */
  enter(onGrant: OnGrant, party = ''): LanePermit {
    if (this.holderCount < this.permitCount && this.waiterCount === 0) {
      // A free permit and nobody ahead: granted at once, without queueing.
      const permit = new LanePermit(this, party);
      permit.state = HOLDING;
      this.holderCount++;
      this.onChange?.(this, 'granted', party);
      grant(onGrant);
      return permit;
    }
    // Made when the lane first queues someone: a lane whose permits are always free has none.
    const parties = (this.parties ??= new Map<string, PartyQueue>());
    let queue = parties.get(party);
    if (queue === undefined) {
      queue = new PartyQueue(party);
      parties.set(party, queue);
    }
    const permit = new QueuedPermit(this, party, onGrant);
    permit.queue = queue;
    if (queue.tail === undefined) queue.head = permit;
    else {
      queue.tail.next = permit;
      permit.prev = queue.tail;
    }
    queue.tail = permit;
    if (!queue.inRotation) this.rotateIn(queue);
    this.waiterCount++;
    this.onChange?.(this, 'queued', party);
    this.drain();
    return permit;
  }

  /** @internal use `permit.leave()` */
  leave(permit: LanePermit): void {
    if (permit.state === LEFT) return;
    const { party } = permit;
    if (permit.state === HOLDING) {
      permit.state = LEFT;
      this.holderCount--;
      this.onChange?.(this, 'released', party);
      this.drain();
    } else {
      permit.state = LEFT;
      // Only a queued permit is ever waiting.
      this.unlink(permit as QueuedPermit);
      this.waiterCount--;
      this.onChange?.(this, 'withdrawn', party);
    }
  }

  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.holderCount < this.permitCount && this.first !== undefined) {
        const queue = this.first;
        const permit = queue.head!;
        this.unlink(permit);
        // Round-robin: a party that still waits goes to the back of the rotation.
        if (queue.inRotation && this.first === queue && this.last !== queue) {
          this.rotateOut(queue);
          this.rotateIn(queue);
        }
        this.waiterCount--;
        this.holderCount++;
        permit.state = HOLDING;
        this.onChange?.(this, 'granted', queue.party);
        grant(permit.onGrant);
      }
    } finally {
      this.draining = false;
    }
  }

  private unlink(permit: QueuedPermit): void {
    const queue = permit.queue!;
    if (permit.prev === undefined) queue.head = permit.next;
    else permit.prev.next = permit.next;
    if (permit.next === undefined) queue.tail = permit.prev;
    else permit.next.prev = permit.prev;
    permit.prev = permit.next = undefined;
    permit.queue = undefined;
    if (queue.head === undefined) {
      this.rotateOut(queue);
      this.parties?.delete(queue.party);
    }
  }

  private rotateIn(queue: PartyQueue): void {
    queue.inRotation = true;
    queue.prev = this.last;
    queue.next = undefined;
    if (this.last === undefined) this.first = queue;
    else this.last.next = queue;
    this.last = queue;
  }

  private rotateOut(queue: PartyQueue): void {
    if (!queue.inRotation) return;
    queue.inRotation = false;
    if (queue.prev === undefined) this.first = queue.next;
    else queue.prev.next = queue.next;
    if (queue.next === undefined) this.last = queue.prev;
    else queue.next.prev = queue.prev;
    queue.prev = queue.next = undefined;
  }
}

/** @internal A lane (a table drops its idle ones) and its permits and queues, inert, for keepWarmShapes (lib/shapes.ts). */
export function keepShapes(keep: Keep): void {
  const inertLane = new Lane('', 1);
  keep(() => inertLane);
  keep(() => new LanePermit(inertLane, ''));
  keep(() => new QueuedPermit(inertLane, '', () => undefined));
  keep(() => new PartyQueue(''));
}
