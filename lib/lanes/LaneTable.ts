// The runner's table of shared lanes (one per tenant, one per tool, one per lane a tool
// declares for itself, one per identical-arguments key), made on first use and dropped as soon
// as idle, so a million tenants seen over a day do not mean a million live lanes.
// A batch keeps a table of its own for its turn and turn-tool lanes. A fleet of processes shares
// its lanes through RedisLaneStore (lib/lanes/redis/) instead, which keeps the same rules.
import { Subject, type Observable } from 'rxjs';
import { grant, Lane, type LaneChange, type LaneOccupancy, type LanePermit, type OnGrant } from './Lane.js';
import { LaneMetrics, type LaneMeter } from './redis/metrics.js';
import type { AdaptiveBounds, LaneSignal } from './AdaptiveLimit.js';
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

export class LaneTable implements LaneStore {
  // Live lanes by key; a lane leaves the map when it has neither holders nor waiters.
  private readonly lanes = new Map<string, Lane>();
  // Made when someone first asks for changes$: a batch's own table never is.
  private changes: Subject<LaneChange> | undefined;
  // The lane metrics, when a meter was given (the same instruments as the fleet store's).
  private readonly metrics: LaneMetrics | undefined;
  // The adaptive limits and the budgets, made on first use: a table with neither has neither.
  private adaptive: AdaptiveLimits | undefined = undefined;
  private budgetLanes: BudgetLanes | undefined = undefined;
  // The clock of budget windows and of how long adaptive permits were held (ms).
  private readonly clock: () => number;

  /**
   * `meter`: an OpenTelemetry meter for the lane metrics (docs/fleet.md); none by default.
   * `now`: the clock budgets and adaptive lanes read, in ms (default `Date.now`; the runner's own
   * table reads its scheduler, so virtual time moves them).
   */
  constructor(options?: { readonly meter?: LaneMeter; readonly now?: () => number }) {
    const meter = options?.meter;
    this.metrics = meter === undefined ? undefined : new LaneMetrics(meter, () => this.occupancy());
    this.clock = options?.now ?? Date.now;
  }

  /** Every queue, grant, release and withdrawal, as it happens. */
  get changes$(): Observable<LaneChange> {
    return (this.changes ??= new Subject<LaneChange>()).asObservable();
  }

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

  occupancy(): LaneOccupancy[] {
    return [...this.lanes.values()].map((lane) => lane.occupancy());
  }

  /** How many lanes are alive (busy or waited on) right now. */
  get size(): number {
    return this.lanes.size;
  }
}
