// A rate lane: admissions, not permits. `limit` calls per `perSeconds`, up to `burst` at once,
// by GCRA (a token bucket kept as one number: the time the bucket is next empty, `tat`) on a
// scheduler, so virtual time (TestScheduler) drives it in specs. Waiters queue in a one-permit
// Lane (the turnstile), which gives the same order as every lane: FIFO within a party,
// round-robin between parties. The waiter holding the turnstile is the head; it is admitted when
// the clock allows, then the turnstile passes on. An admission is a reservation: the bucket is
// debited when the call's body starts (`started()`), not when the call is admitted, and a call
// that leaves without starting gives its reservation back. The lane admits a call only while the
// bucket, as the starts left it, covers every admission not yet started and the new one: an
// admitted call that waits in a later lane still has its slot whenever it starts, counted from then.
// A call that starts as its admission is granted, after the lane's own timer ran late, is counted
// from its slot (at most half an interval back), so a late timer does not push every later slot;
// a window of `perSeconds` after each such start then holds no more than the rate allows (RateCredits.ts).
import type { SchedulerLike, Subscription } from 'rxjs';
import { grant, Lane, type OnGrant } from './Lane.js';
import { PaceLearner } from './PaceLearner.js';
import { RateCredits } from './RateCredits.js';
import { RatePermit, type RateDecider } from './RatePermit.js';
import { checkRate, type Rate, type RateOccupancy } from './RateSpec.js';

export { checkRate, type Rate, type RateOccupancy } from './RateSpec.js';

/** Told of every admission, wait and withdrawal (for occupancy streams), and of pauses. */
export type RateChange = (lane: RateLane, change: 'queued' | 'granted' | 'withdrawn', party: string) => void;

export class RateLane {
  // The queue: one permit, held by the head while it waits for its time.
  private readonly turnstile: Lane;
  // The ms between two admissions at the steady rate (0: no rate, only pauses), and how far
  // ahead of `tat` an admission may come (the burst).
  private interval = 0;
  private tolerance = 0;
  // The time (scheduler ms) the bucket is empty until: an admission is allowed once now >= tat - tolerance.
  private tat = Number.NEGATIVE_INFINITY;
  // Until when a pause runs (for reports; `tat` already carries it).
  private pausedUntil = Number.NEGATIVE_INFINITY;
  // The head, waiting for its time, and the timer that admits it.
  private head: RatePermit | undefined = undefined;
  private timer: Subscription | undefined = undefined;
  // The timer lets the head go without asking (a fleet's server reserved the admission).
  private reservation = false;
  // A fleet's name for the admission it decided (or reserved) for the head, and its slot on the server's clock.
  private admission: string | undefined = undefined;
  private slot = 0;
  // Admissions whose calls have not started yet (by the lane's own clock): each holds a slot of the bucket.
  private outstanding = 0;
  // Starts counted by the lane's own clock, and the admission being granted (a call that starts
  // before its grant returns starts in the same tick as its admission).
  private starts = 0;
  private granting: RatePermit | undefined = undefined;
  // The timer is letting the head go, and the slot the head goes at (when the bucket allowed it).
  private firing = false;
  private aim = 0;
  // The starts counted from their slot rather than from when they came, while their windows are open.
  private readonly credits = new RateCredits();
  // How many pauses began, and how many had when the question out was asked: an answer to a
  // question asked before a pause began is stale (it may admit a call the pause should hold).
  private pauses = 0;
  private askedIn = 0;
  // When the question out was asked (this process's clock), and the round trip of the answer that
  // admitted the head: the server's slot lies somewhere in it, so a start is counted as late as
  // the slot could make it (never sooner than the partner may see it).
  private askedAt = 0;
  private lag = 0;
  // A lane that learns its pace (PaceLearner); undefined for one with a rate of its own, or none.
  private pace: PaceLearner | undefined = undefined;
  // The rate, kept for reports.
  private current: Rate | undefined = undefined;
  // Who decides, when it is not this lane's clock (a fleet's server), and whether a question is out.
  private decider: RateDecider | undefined = undefined;
  private asking = false;

  /**
   * @param key the lane's name in its store (`rate:tool:search`)
   * @param rate the rate, or undefined for a lane that only pauses
   * @param scheduler the clock: `now()` and timers
   */
  constructor(
    readonly key: string,
    rate: Rate | undefined,
    private readonly scheduler: SchedulerLike,
    private readonly onChange?: RateChange,
    decider?: RateDecider,
  ) {
    this.turnstile = new Lane(key, 1);
    this.setRate(rate, decider);
  }

  /**
   * The rate the lane admits at; a lane made only to pause takes the first rate it is given.
   * `decider`: who decides admissions at that rate (a fleet's server); by default the lane's own clock.
   */
  setRate(rate: Rate | undefined, decider?: RateDecider): void {
    if (rate === undefined) return;
    checkRate(rate);
    this.current = rate;
    // A rate given wins over one learned.
    this.pace = undefined;
    this.decider = decider;
    this.interval = (rate.perSeconds * 1000) / rate.limit;
    this.tolerance = ((rate.burst ?? 1) - 1) * this.interval;
    this.credits.setRate(rate.perSeconds, rate.limit, rate.burst ?? 1);
    // A pause that came first still holds, and still ends at the steady rate.
    if (this.pausedUntil > Number.NEGATIVE_INFINITY) this.tat = Math.max(this.tat, this.pausedUntil + this.tolerance);
  }

  get rate(): Rate | undefined {
    return this.current;
  }

  /**
   * From now on the lane admits at a pace it learns from its pauses, not at a rate it is given:
   * every call at once until a second pause; then, at each new pause, the calls it admitted since
   * the last one ended over the time from that end to this one's (a partner that counts per
   * window refuses once each window is full, and says when the next begins: this is its quota),
   * less the call whose refusal set off the pause,
   * growing by one call a second for each second without a pause. `decider`: who decides
   * admissions at that pace (a fleet's server, which learns it there); else the lane's own clock.
   */
  learn(decider?: RateDecider): void {
    if (this.pace !== undefined || this.current !== undefined) return;
    this.pace = new PaceLearner();
    this.decider = decider;
  }

  /** True for a lane that learns its pace (`learn`). */
  get learning(): boolean {
    return this.pace !== undefined;
  }

  /** True while a pause runs. */
  get paused(): boolean {
    return this.pausedUntil > this.scheduler.now();
  }

  /** The head waiting for its time, and everyone queued behind it. */
  get waiters(): number {
    return (this.head === undefined ? 0 : 1) + this.turnstile.waiters;
  }

  /** Admissions of this lane's own clock whose calls have not started yet (each holds a slot of the bucket). */
  get admitted(): number {
    return this.outstanding;
  }

  /** Nobody waits, no admission is outstanding, the bucket is full again (no pause runs), and it has learned nothing to keep: the lane may be forgotten. */
  get idle(): boolean {
    const now = this.scheduler.now();
    return this.head === undefined && this.turnstile.idle && this.outstanding === 0 && this.tat <= now && this.pace === undefined && !this.credits.open(now);
  }

  occupancy(): RateOccupancy {
    const rate = this.current;
    const paused = this.pausedUntil > this.scheduler.now();
    const { pace } = this;
    if (pace !== undefined) {
      // A pace under one a second reads as one per so many seconds.
      const per = pace.perSecond >= 1 || pace.perSecond === 0 ? { limit: Math.floor(pace.perSecond), perSeconds: 1 } : { limit: 1, perSeconds: Math.round(1000 / pace.perSecond) / 1000 };
      return { key: this.key, ...per, burst: 1, holders: 0, waiters: this.waiters, learned: true, ...this.reservedPart(), ...(paused ? { pausedUntil: this.pausedUntil } : {}) };
    }
    return {
      key: this.key,
      limit: rate?.limit ?? 0,
      perSeconds: rate?.perSeconds ?? 0,
      burst: rate === undefined ? 0 : (rate.burst ?? 1),
      holders: 0,
      waiters: this.waiters,
      ...this.reservedPart(),
      ...(paused ? { pausedUntil: this.pausedUntil } : {}),
    };
  }

  private reservedPart(): { reserved?: number } {
    return this.outstanding > 0 ? { reserved: this.outstanding } : {};
  }

  /**
   * Asks for an admission. `onGrant` is told when it comes, which may be at once, before `enter`
   * returns (the permit then reads `holding`). `party`: whose turn it is, for round-robin.
   */
  enter(onGrant: OnGrant, party = ''): RatePermit {
    const permit = new RatePermit(this, onGrant, party);
    permit.turn = this.turnstile.enter(permit, party);
    if (permit.state === 'head') this.admitHead();
    if (permit.state !== 'admitted') this.onChange?.(this, 'queued', party);
    return permit;
  }

  /**
   * Admits nothing for `ms` from now (a partner said to slow down); after it, the steady rate, no
   * burst. An admission a fleet's server reserved for the head is given up (it asks again).
   */
  pause(ms: number): void {
    const now = this.scheduler.now();
    const until = now + ms;
    if (until <= this.pausedUntil) return;
    // A new pause, not one more refusal of the same full window: what the lane admitted since the
    // last one says the pace (a fleet's server learns it from its own count).
    if (this.pace !== undefined && this.pausedUntil <= now && this.decider === undefined) this.setInterval(this.pace.paused(until));
    this.pausedUntil = until;
    this.pauses++;
    this.tat = Math.max(this.tat, until + this.tolerance);
    this.reservation = false;
    this.admitHead();
  }

  /** @internal The turnstile made `permit` the head. */
  headed(permit: RatePermit): void {
    if (permit.state !== 'waiting') return;
    permit.state = 'head';
    this.head = permit;
    // Made the head inside `enter`: enter admits it once its place is recorded.
    if (permit.turn !== undefined) this.admitHead();
  }

  /** @internal use `permit.started()` */
  started(permit: RatePermit): void {
    if (permit.state !== 'admitted') return;
    permit.state = 'started';
    const { decider } = this;
    const admission = this.spend(permit);
    if (decider !== undefined) {
      if (admission !== undefined) decider.started?.(this, admission, permit.slot, Math.max(0, this.scheduler.now() - permit.due));
      this.askAgain();
      return;
    }
    // The slot is counted from the start: the next admission is spaced from it. A call that starts
    // in the tick its admission was granted, which the lane's own timer let go late, is counted
    // from its slot instead, at most half an interval back (so two starts are never closer than
    // half an interval beyond the burst), and its window is kept (RateCredits).
    const now = this.scheduler.now();
    const index = ++this.starts;
    let counted = now;
    if (permit === this.granting && permit.slot < now && this.pace === undefined && this.interval > 0) {
      counted = Math.max(permit.slot, now - this.interval / 2);
      if (!this.credits.keep(index, now)) counted = now;
    }
    this.tat = Math.max(this.tat, counted) + this.interval;
    this.admitHead();
  }

  /** @internal use `permit.leave()` */
  leave(permit: RatePermit): void {
    const { state } = permit;
    if (state === 'left' || state === 'started') {
      permit.state = 'left';
      return;
    }
    if (state === 'admitted') {
      // Admitted, never started: its slot goes back, and the head may take it.
      permit.state = 'left';
      const { decider } = this;
      const admission = this.spend(permit);
      if (decider === undefined) this.admitHead();
      else {
        if (admission !== undefined) decider.returned?.(this, admission);
        this.askAgain();
      }
      return;
    }
    permit.state = 'left';
    if (state === 'head') {
      this.head = undefined;
      // A reserved admission passes to the next in the queue; with nobody there it goes unused.
      if (!this.reservation || this.turnstile.waiters === 0) this.disarm();
    }
    this.onChange?.(this, 'withdrawn', permit.party);
    permit.turn?.leave();
  }

  // An admission leaves the outstanding ones (its call started, or it came back): its fleet name, if any.
  private spend(permit: RatePermit): string | undefined {
    const { admission } = permit;
    permit.admission = undefined;
    if (this.decider === undefined) this.outstanding--;
    return admission;
  }

  // A fleet's server counts the admissions not started: one of this lane's started or came back,
  // so the head (told to ask again later) asks now. A reserved admission on its way is kept.
  private askAgain(): void {
    if (this.head === undefined || this.asking || (this.reservation && this.timer !== undefined)) return;
    this.admitHead();
  }

  /** The ms between two admissions at the steady rate, and how many ms early the burst lets one come. */
  get spacing(): { readonly interval: number; readonly tolerance: number } {
    return { interval: this.interval, tolerance: this.tolerance };
  }

  // Asks whether the head may go: the lane's own clock answers at once, a decider maybe later.
  private admitHead(): void {
    // A reserved admission is on its way: the head goes when it comes.
    if (this.reservation && this.timer !== undefined) return;
    this.disarm();
    if (this.head === undefined) return;
    const { decider } = this;
    if (decider === undefined) {
      const wait = this.localWait();
      this.decided(wait, undefined, this.aim);
      return;
    }
    // One question at a time: its answer is for whoever is the head when it comes.
    if (this.asking) return;
    // Its own calls outstanding fill the burst: it asks once one starts or leaves.
    if (decider.holds?.(this) === true) return;
    this.asking = true;
    this.askedIn = this.pauses;
    this.askedAt = this.scheduler.now();
    decider.ask(this);
  }

  // By the lane's own clock: 0 when the head may go now, else how long to wait (Infinity: until an
  // admission outstanding starts or comes back). The bucket, as the starts so far left it, must
  // cover every admission not yet started and this one, as if each started now: one that starts
  // later finds its slot all the same (the bucket only refills meanwhile), and is counted from
  // when it starts, so a call a later lane let go late and the next one are never closer than the
  // steady interval. The windows of starts counted from their slot (`RateCredits.bound`) hold it too.
  // Sets `aim`, the head's slot: when the bucket allowed it, for the timer that lets it go; else now.
  private localWait(): number {
    const now = this.scheduler.now();
    const { interval, tolerance, outstanding } = this;
    this.aim = now;
    // A lane with no rate (only pauses) spaces nothing.
    if (interval > 0 && outstanding * interval > tolerance) return Number.POSITIVE_INFINITY;
    const steady = this.tat + outstanding * interval - tolerance;
    const slot = this.credits.any ? Math.max(steady, this.credits.bound(now, this.starts + outstanding + 1)) : steady;
    const at = Math.max(slot, now + outstanding * interval - tolerance);
    if (at > now) return at - now;
    if (this.firing) this.aim = slot;
    // A learned pace may have grown since the last admission: this one is spaced by it already.
    if (this.pace !== undefined) this.setInterval(this.pace.admitted(now));
    return 0;
  }

  // A learned pace (calls a second; 0: none yet) as the ms between admissions, evenly spaced.
  private setInterval(perSecond: number): void {
    this.interval = perSecond > 0 ? 1000 / perSecond : 0;
    this.tolerance = 0;
  }

  /**
   * @internal The answer to `ask`: 0, the head is admitted (as `admission` at `slot`, the
   * server's names for it, when it counts admissions not yet started); more, it asks again after
   * that many ms.
   */
  decided(waitMs: number, admission?: string, slot = 0): void {
    if (this.stale(admission)) return;
    this.asking = false;
    this.disarm();
    const head = this.head;
    // Withdrawn while the question was out: a fleet's admission then goes unused (never more calls, only fewer).
    if (head === undefined) {
      this.giveBack(admission);
      return;
    }
    // Nothing to time: the head goes when an admission outstanding starts or comes back.
    if (waitMs === Number.POSITIVE_INFINITY) return;
    if (waitMs > 0) {
      this.timer = this.scheduler.schedule(RateLane.due, waitMs, this);
      return;
    }
    this.admission = admission;
    this.slot = slot;
    this.lag = this.scheduler.now() - this.askedAt;
    this.admit(head);
  }

  /**
   * @internal The answer to `ask`: an admission recorded for `waitMs` from now (as `admission`
   * at `slot`, when the server names it). The head then goes without asking again; if it left
   * meanwhile, the next in the queue goes in its place (with nobody there, the admission goes
   * unused, and back: never more calls, only fewer).
   */
  reserved(waitMs: number, admission?: string, slot = 0): void {
    if (this.stale(admission)) return;
    this.asking = false;
    this.disarm();
    if (this.head === undefined) {
      this.giveBack(admission);
      return;
    }
    this.admission = admission;
    this.slot = slot;
    this.lag = this.scheduler.now() - this.askedAt;
    if (!(waitMs > 0)) {
      this.admit(this.head);
      return;
    }
    this.reservation = true;
    this.timer = this.scheduler.schedule(RateLane.due, waitMs, this);
  }

  // An admission of a fleet's server that nobody takes: it forgets it.
  private giveBack(admission: string | undefined): void {
    if (admission !== undefined) this.decider?.returned?.(this, admission);
  }

  /** @internal A call admitted in learning cycle `cycle` never started: the pace does not count it. */
  notThrough(cycle: number): void {
    const { pace, decider } = this;
    if (pace === undefined) return;
    if (decider !== undefined) decider.notThrough?.(this, cycle);
    else if (pace.notThrough(cycle)) this.setInterval(pace.perSecond);
  }

  /** @internal What a fleet's server answered of a learning lane: the cycle its admissions are counted in, and the pace it learned. */
  learned(cycle: number, perSecond: number): void {
    const { pace } = this;
    if (pace === undefined) return;
    pace.cycle = cycle;
    pace.perSecond = perSecond;
  }

  // An answer of a fleet's server to a question asked before a pause began here: whatever it
  // admitted is not used (the fleet spends an admission, never a call too many); asked again.
  private stale(admission: string | undefined): boolean {
    if (this.decider === undefined || this.askedIn === this.pauses) return false;
    this.giveBack(admission);
    this.asking = false;
    this.admitHead();
    return true;
  }

  private admit(head: RatePermit): void {
    const { decider } = this;
    if (decider?.holds?.(this) === true) {
      // Decided before one of this lane's calls was reported late: the admission goes back
      // unused, and the head asks again once one of those starts or leaves.
      const { admission } = this;
      this.admission = undefined;
      this.lag = 0;
      this.giveBack(admission);
      return;
    }
    this.head = undefined;
    head.state = 'admitted';
    // Its slot is held until its call starts or it leaves (started, leave).
    if (this.decider === undefined) this.outstanding++;
    head.admission = this.admission;
    head.slot = this.slot;
    head.due = this.scheduler.now() - this.lag;
    this.admission = undefined;
    this.lag = 0;
    if (this.pace !== undefined) head.cycle = this.pace.cycle;
    this.onChange?.(this, 'granted', head.party);
    // Told before the turnstile passes on, so admissions go out in queue order; a call that starts
    // before this returns starts in the tick of its admission.
    const granting = this.granting;
    this.granting = head;
    try {
      grant(head.onGrant);
    } finally {
      this.granting = granting;
    }
    // Let go, not started (it waits in a later lane): a fleet's server may need to know.
    if (decider !== undefined && head.state === 'admitted' && head.admission !== undefined) decider.waiting?.(this, head.admission);
    head.turn!.leave();
  }

  /** @internal The decider could not answer (a fleet's server unreachable): the head is told it lost its place, and the next one asks. */
  failed(error: Error): void {
    this.asking = false;
    const head = this.head;
    if (head === undefined) return;
    this.head = undefined;
    head.state = 'left';
    this.onChange?.(this, 'withdrawn', head.party);
    // A function may carry lost() as a property, as an object may have it as a method.
    const { onGrant } = head;
    (onGrant as { lost?: (error: Error) => void }).lost?.call(onGrant, error);
    head.turn!.leave();
  }

  private disarm(): void {
    this.timer?.unsubscribe();
    this.timer = undefined;
    this.reservation = false;
    // A reserved admission nobody will take (the head left with nobody behind, a pause): back to the server.
    const { admission } = this;
    this.admission = undefined;
    this.giveBack(admission);
  }

  // The timer came due: a function of the lane, so arming it makes no closure.
  private static due(this: unknown, lane: RateLane | undefined): void {
    if (lane === undefined) return;
    lane.timer = undefined;
    if (lane.reservation) {
      lane.reservation = false;
      if (lane.head !== undefined) lane.admit(lane.head);
      return;
    }
    lane.firing = true;
    try {
      lane.admitHead();
    } finally {
      lane.firing = false;
    }
  }
}

