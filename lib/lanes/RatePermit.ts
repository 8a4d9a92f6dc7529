// A request to a rate lane (RateLane.ts), and who decides a rate lane's admissions when it is not
// the lane's own clock (a fleet's server: redis/rate.ts).
import type { LanePermit, OnGrant } from './Lane.js';
import type { RateLane } from './RateLane.js';

// Where a request to a rate lane stands: queued, next, admitted (its slot reserved), its call started (the slot spent), or gone.
type RateState = 'waiting' | 'head' | 'admitted' | 'started' | 'left';

/**
 * One request to a rate lane. `started()` spends its admission when the call's body starts;
 * `leave()` withdraws it while it waits, gives the admission back while its call has not
 * started, and does nothing after.
 */
export class RatePermit {
  /** @internal */ state: RateState = 'waiting';
  /** @internal A fleet's name for the admission (its reservation in Redis), its slot (on the server's clock; by the lane's own, when the bucket allowed it), and when the lane let it go (scheduler ms). */
  admission: string | undefined = undefined;
  /** @internal */ slot = 0;
  /** @internal */ due = 0;
  /** @internal Its place in the turnstile's queue. */ turn: LanePermit | undefined = undefined;
  /** @internal The learning cycle it was admitted in (a lane learning its pace), or -1. */ cycle = -1;
  constructor(
    private readonly lane: RateLane,
    /** @internal */ readonly onGrant: OnGrant,
    /** @internal */ readonly party: string,
  ) {}

  get holding(): boolean {
    return this.state === 'admitted' || this.state === 'started';
  }

  /** @internal The turnstile granted it: it is next. */
  granted(): void {
    this.lane.headed(this);
  }

  leave(): void {
    this.lane.leave(this);
  }

  /** The call it admitted started (its body was invoked): its admission is spent now, counted from now. Once. */
  started(): void {
    this.lane.started(this);
  }

  /** How the call it admitted went: one that never started is not counted in a learned pace (it never reached the partner). */
  report(signal: string): void {
    if (signal === 'unstarted' && this.cycle >= 0) this.lane.notThrough(this.cycle);
    this.cycle = -1;
  }
}

/**
 * Who decides admissions when it is not the lane's own clock: a store shared by a fleet asks its
 * server. `ask` is called with the lane whose head wants to go; it answers, now or later, with
 * `lane.decided(waitMs)` (0: admitted, the admission recorded where the fleet sees it; more: ask
 * again after that long), `lane.reserved(waitMs)` (an admission recorded for `waitMs` from now:
 * the lane lets its head go then, without asking again), or `lane.failed(error)`. One question
 * at a time per lane.
 */
export interface RateDecider {
  ask(lane: RateLane): void;
  /**
   * The call admitted as `admission` (the name `decided`/`reserved` gave it, at `slot` on the
   * server's clock) started `lateMs` after the lane let it go: the server spends the admission,
   * counted from its slot plus that.
   */
  started?(lane: RateLane, admission: string, slot: number, lateMs: number): void;
  /** The admission `admission` goes unused (its call left without starting, or nobody took it): the server forgets it. */
  returned?(lane: RateLane, admission: string): void;
  /** A call a learning lane admitted in `cycle` never started: the server does not count it. */
  notThrough?(lane: RateLane, cycle: number): void;
  /**
   * The lane let the call admitted as `admission` go and its body has not started yet (it waits
   * in a later lane, say); not told of one whose body started as the lane let it go.
   */
  waiting?(lane: RateLane, admission: string): void;
  /**
   * True while the lane's head must not go, nor ask: admissions of this lane the decider let go
   * are outstanding with the server (reported late, not started). The lane asks again when one of
   * its calls starts or leaves.
   */
  holds?(lane: RateLane): boolean;
}
