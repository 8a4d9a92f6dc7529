// The runner's table of shared lanes (one per tenant, one per tool, one per lane a tool
// declares for itself, one per identical-arguments key), made on first use and dropped as soon
// as idle, so a million tenants seen over a day do not mean a million live lanes.
// A batch keeps a table of its own for its turn and turn-tool lanes. A fleet of processes shares
// its lanes through RedisLaneStore (lib/lanes/redis/) instead, which keeps the same rules.
import { Subject, type Observable, type SchedulerLike } from 'rxjs';
import { grant, Lane, type LaneChange, type LaneOccupancy, type LanePermit, type OnGrant } from './Lane.js';
import { RateLane, type Rate } from './RateLane.js';
import type { RateDecider } from './RatePermit.js';
import { LaneMetrics, type LaneMeter } from './redis/metrics.js';
import type { AdaptiveBounds, LaneSignal, LimitCause } from './AdaptiveLimit.js';
import { AdaptiveLimits, AdaptivePermit } from './adaptiveLanes.js';
import { BudgetLanes, type BudgetOccupancy, type BudgetSpec } from './BudgetLane.js';

/** A request for a permit: `leave()` gives it back, or withdraws it while it still waits. */
export interface Permit {
  readonly holding: boolean;
  /**
   * The permit's fencing token, from a store shared by a fleet: a decimal integer that grows with
   * every grant of the lane, for downstreams that must refuse a holder whose lease ran out.
   */
  readonly fence?: string;
  leave(): void;
  /**
   * How the work held under the permit went (adaptive and budget lanes listen; others have none):
   * an adaptive lane's limit moves with it, a budget lane gives back what work that never
   * started had spent. Told once, when the work's outcome is decided or it is torn down.
   */
  report?(signal: LaneSignal): void;
  /** What the work cost in all, for a budget lane: the difference from what it spent so far is spent (or given back). */
  charge?(total: number): void;
  /**
   * The work the permit admitted started (a call's body was invoked): a rate lane spends its
   * admission now, and counts its slot from now (an admission whose work never starts is given
   * back by `leave()`). Told once, by whoever starts the work; lanes that count holders have none.
   */
  started?(): void;
}

/**
 * What a lane store says of itself, on the runner's `activity$`: a store shared by a fleet that
 * cannot reach its Redis (`unreachable`: calls on its lanes fail, never started), that fell
 * back to in-process lanes (`in-process`, when its options allow), or that reaches it again.
 */
export interface LaneStoreNotice {
  readonly type: 'lane-store';
  readonly status: 'unreachable' | 'in-process' | 'restored';
  /** Why, in words. */
  readonly reason: string;
  /** When (ms since the epoch). */
  readonly at: number;
}

/**
 * A lane paused, on the runner's `activity$`: a partner said to slow down (a call failed with
 * `RateLimitedError`), so lane `key` admits nothing new until `until` (scheduler ms), everywhere
 * the store is shared.
 */
export interface LanePauseNotice {
  readonly type: 'lane-paused';
  readonly key: string;
  readonly seconds: number;
  readonly until: number;
  /** Why, in words (the partner's message). */
  readonly reason: string;
  readonly at: number;
}

/**
 * An adaptive lane's limit moved in another process of the fleet (its holders' reports), as this
 * process heard it through the store: on the runner's `activity$` beside this process's own
 * `limit-changed` events, which name the call whose outcome moved it.
 */
export interface LaneLimitNotice {
  readonly type: 'lane-limit';
  readonly key: string;
  readonly limit: number;
  readonly previous: number;
  readonly cause: LimitCause;
  /** When this process heard it (ms since the epoch). */
  readonly at: number;
}

/** What a store says of itself or of its lanes, beside their occupancy, as the runner's `activity$` carries it. */
export type LaneNotice = LaneStoreNotice | LanePauseNotice | LaneLimitNotice;

/**
 * The small interface the batch needs of a store of lanes: enter (ask for a permit), leave
 * (give it back), watch occupancy. The in-memory `LaneTable` is one; `RedisLaneStore`, shared
 * by a fleet of processes, is another.
 */
export interface LaneStore {
  /**
   * Asks lane `key` (made with `limit` permits if new) for a permit. `onGrant` is a function or
   * an object whose `granted()` is called (a batch of thousands hands each call's own record
   * rather than a closure made for it): tell it with `grant(onGrant)`. It may be told before
   * this returns (the permit then reads `holding`), or later.
   */
  enter(key: string, limit: number, onGrant: OnGrant, party?: string): Permit;
  /** The lanes alive now, busy or waited on. */
  occupancy(): LaneOccupancy[];
  /** Every queue, grant, release and withdrawal, as it happens. */
  readonly changes$: Observable<LaneChange>;
  /** What the store says of itself (a fleet store losing its Redis); the runner forwards it to `activity$`. */
  readonly notices$?: Observable<LaneStoreNotice>;
  /** Its lanes paused (a partner's "slow down"); the runner forwards them to `activity$`. */
  readonly pauses$?: Observable<LanePauseNotice>;
  /** Its adaptive lanes' limits moved by another process of a fleet; the runner forwards them to `activity$`. */
  readonly limits$?: Observable<LaneLimitNotice>;
  /**
   * Asks rate lane `key` for an admission: `rate.limit` per `rate.perSeconds`, up to `rate.burst`
   * at once, timed on `scheduler` (a fleet store times it by its server's clock and waits on
   * `scheduler`). An admission holds nothing; `leave()` withdraws a request that still waits.
   * `rate` undefined: the lane is taken only if it exists (it was paused), else admitted at once.
   * A store without this method has no rate lanes: a call that needs one fails, never started.
   */
  enterRate?(key: string, rate: Rate | undefined, onGrant: OnGrant, party: string, scheduler: SchedulerLike): Permit;
  /** Lane `key` admits nothing new for `seconds`, wherever the store is shared (a partner's "slow down"). */
  pause?(key: string, seconds: number, reason: string, scheduler: SchedulerLike): void;
  /** True while rate lane `key` is paused (known in this process, without asking anyone). */
  paused?(key: string): boolean;
  /**
   * Has rate lane `key` learn its pace from its pauses (`RateLane.learn`), made now if it is not
   * yet; a lane with a rate of its own keeps it. Calls then take the lane with `rate` undefined.
   * A store without this method learns no pace.
   */
  learnRate?(key: string, scheduler: SchedulerLike): void;
  /**
   * Asks adaptive lane `key` for a permit: like `enter`, but the lane's limit is its own, moving
   * within `bounds` with what its holders `report` (docs/concurrency.md, adaptive lanes). A store
   * without adaptive lanes leaves this out, and the lane is taken at `bounds.max`.
   */
  enterAdaptive?(key: string, bounds: AdaptiveBounds, onGrant: OnGrant, party?: string): Permit;
  /**
   * Asks budget `key` to cover `amount` of `spec` (0: an amount not known in advance, which needs
   * something left): granted and spent when covered, else `lost` with a BudgetExceededError.
   * A store without budget lanes leaves this out, and budgets are not kept.
   */
  enterBudget?(key: string, spec: BudgetSpec, amount: number, onGrant: OnGrant, party?: string): Permit;
  /** The adaptive lanes' limits now. */
  limits?(): Array<{ readonly key: string; readonly limit: number; readonly min: number; readonly max: number }>;
  /** The budgets with an open window. */
  budgets?(): BudgetOccupancy[];
}

// An admission from a rate lane that does not exist: nothing to wait for, nothing to leave.
const admitted: Permit = Object.freeze({ holding: true, leave(): void {} });

export class LaneTable implements LaneStore {
  // Live lanes by key; a lane leaves the map when it has neither holders nor waiters.
  private readonly lanes = new Map<string, Lane>();
  // Made when someone first asks for changes$: a batch's own table never is.
  private changes: Subject<LaneChange> | undefined;
  // The lane metrics, when a meter was given (the same instruments as the fleet store's).
  private readonly metrics: LaneMetrics | undefined;
  // Rate lanes by key, made when first asked (a table that never sees a rate has none), and how
  // many there were after the last sweep of the idle ones.
  private rates: Map<string, RateLane> | undefined = undefined;
  private sweptAt = 0;
  // Made when someone first asks for pauses$.
  private pauses: Subject<LanePauseNotice> | undefined;

  // Who decides its rate lanes' admissions, when not their own clocks (a fleet store's server).
  private readonly rateDecider: RateDecider | undefined;

  // The adaptive limits and the budgets, made on first use: a table with neither has neither.
  private adaptive: AdaptiveLimits | undefined = undefined;
  private budgetLanes: BudgetLanes | undefined = undefined;
  // The clock of budget windows and of how long adaptive permits were held (ms).
  private readonly clock: () => number;

  /**
   * `meter`: an OpenTelemetry meter for the lane metrics (docs/fleet.md); none by default.
   * `now`: the clock budgets and adaptive lanes read, in ms (default `Date.now`; the runner's own
   * table reads its scheduler, so virtual time moves them).
   * `rateDecider`: who decides admissions of the rate lanes that have a rate (a fleet store's server); by default each lane's own clock.
   */
  constructor(options?: { readonly meter?: LaneMeter; readonly now?: () => number; readonly rateDecider?: RateDecider }) {
    const meter = options?.meter;
    this.rateDecider = options?.rateDecider;
    this.metrics = meter === undefined ? undefined : new LaneMetrics(meter, () => this.occupancy());
    this.clock = options?.now ?? Date.now;
  }

  /** Every queue, grant, release and withdrawal, as it happens. */
  get changes$(): Observable<LaneChange> {
    return (this.changes ??= new Subject<LaneChange>()).asObservable();
  }

  /** Its rate lanes paused, as it happens. */
  get pauses$(): Observable<LanePauseNotice> {
    return (this.pauses ??= new Subject<LanePauseNotice>()).asObservable();
  }

  private readonly onRateChange = (lane: RateLane, change: 'queued' | 'granted' | 'withdrawn', party: string): void => {
    if (this.changes?.observed === true) this.changes.next(Object.assign(lane.occupancy(), { change, party }));
  };

  private readonly onChange = (lane: Lane, change: LaneChange['change'], party: string): void => {
    if (this.changes?.observed === true) {
      this.changes.next(Object.assign(lane.occupancy(), { change, party }));
    }
    if ((change === 'released' || change === 'withdrawn') && lane.idle && this.lanes.get(lane.key) === lane) {
      this.lanes.delete(lane.key);
    }
  };

  /** Asks lane `key` (made with `limit` permits if new) for a permit; `onGrant` (a function, or an object's `granted()`) may be told before this returns. */
  enter(key: string, limit: number, onGrant: OnGrant, party = ''): Permit {
    let lane = this.lanes.get(key);
    if (lane === undefined) {
      lane = new Lane(key, limit, this.onChange);
      this.lanes.set(key, lane);
    }
    const metrics = this.metrics;
    if (metrics === undefined) return lane.enter(onGrant, party);
    const askedAt = performance.now();
    return lane.enter(() => {
      metrics.granted(key, performance.now() - askedAt);
      grant(onGrant);
    }, party);
  }

  enterRate(key: string, rate: Rate | undefined, onGrant: OnGrant, party: string, scheduler: SchedulerLike): Permit {
    let lane = this.rates?.get(key);
    if (lane === undefined) {
      if (rate === undefined) {
        grant(onGrant);
        return admitted;
      }
      lane = this.rateLane(key, rate, scheduler);
    } else if (lane.rate === undefined) lane.setRate(rate, this.rateDecider);
    return lane.enter(onGrant, party);
  }

  pause(key: string, seconds: number, reason: string, scheduler: SchedulerLike): void {
    const lane = this.rates?.get(key) ?? this.rateLane(key, undefined, scheduler);
    lane.pause(seconds * 1000);
    const at = scheduler.now();
    this.pauses?.next({ type: 'lane-paused', key, seconds, until: at + seconds * 1000, reason, at });
  }

  paused(key: string): boolean {
    return this.rates?.get(key)?.paused === true;
  }

  /** True when rate lane `key` learns its pace. */
  learning(key: string): boolean {
    return this.rates?.get(key)?.learning === true;
  }

  learnRate(key: string, scheduler: SchedulerLike): void {
    const lane = this.rates?.get(key) ?? this.rateLane(key, undefined, scheduler);
    lane.learn(this.rateDecider);
  }

  // A new rate lane. Idle ones (nobody waits, the bucket full again) are swept out whenever the
  // map has doubled since the last sweep, so a tenant seen once is not kept forever.
  private rateLane(key: string, rate: Rate | undefined, scheduler: SchedulerLike): RateLane {
    const rates = (this.rates ??= new Map());
    if (rates.size >= 2 * this.sweptAt + 16) {
      for (const [name, lane] of rates) if (lane.idle) rates.delete(name);
      this.sweptAt = rates.size;
    }
    const lane = new RateLane(key, rate, scheduler, this.onRateChange, this.rateDecider);
    rates.set(key, lane);
    return lane;
  }

  /** Asks adaptive lane `key` for a permit; the lane's limit moves within `bounds` with what its holders report. */
  enterAdaptive(key: string, bounds: AdaptiveBounds, onGrant: OnGrant, party = ''): Permit {
    const state = (this.adaptive ??= new AdaptiveLimits()).of(key, bounds);
    const permit = new AdaptivePermit(this.home, state, onGrant);
    const lane = this.lanes.get(key);
    // A lane made at an older limit (a plain enter on the same key) follows the adaptive one.
    if (lane !== undefined && lane.limit !== state.limit) lane.resize(state.limit);
    permit.inner = this.enter(key, state.limit, permit, party) as LanePermit;
    return permit;
  }

  /** Asks budget `key` to cover `amount`: granted (and spent) at once, or refused with a BudgetExceededError. */
  enterBudget(key: string, spec: BudgetSpec, amount: number, onGrant: OnGrant, party = ''): Permit {
    return (this.budgetLanes ??= new BudgetLanes(this.clock)).enter(key, spec, amount, onGrant, party);
  }

  limits(): Array<{ readonly key: string; readonly limit: number; readonly min: number; readonly max: number }> {
    return this.adaptive?.list() ?? [];
  }

  budgets(): BudgetOccupancy[] {
    return this.budgetLanes?.list() ?? [];
  }

  // What an adaptive permit needs of this table.
  private readonly home = { live: (key: string) => this.lanes.get(key), now: () => this.clock() };

  /** The live lane under `key`, if any (for tests and views). */
  get(key: string): LaneOccupancy | undefined {
    return this.lanes.get(key)?.occupancy();
  }

  /** The concurrency lanes alive now, then the rate lanes that still matter (someone waits, a pause runs, the bucket refills). */
  occupancy(): LaneOccupancy[] {
    const lanes: LaneOccupancy[] = [...this.lanes.values()].map((lane) => lane.occupancy());
    if (this.rates !== undefined) for (const lane of this.rates.values()) if (!lane.idle) lanes.push(lane.occupancy());
    return lanes;
  }

  /** How many lanes are alive (busy or waited on) right now. */
  get size(): number {
    return this.lanes.size;
  }
}
