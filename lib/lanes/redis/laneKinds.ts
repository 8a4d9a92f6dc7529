// The fleet's lanes beyond the concurrency ones, as one RedisLaneStore keeps them: rate lanes
// (rate.ts, made when first used), adaptive lanes (adaptive.ts) and budgets (budget.ts). The
// store asks for its concurrency permits itself; this part asks Redis for the rest, and knows
// which lanes are adaptive (their acquire reads the learned limit as a ninth key). What the
// processes tell each other of these lanes (pauses, limits) comes over one news connection.
import type { SchedulerLike } from 'rxjs';

import type { LaneOccupancy, OnGrant } from '../Lane.js';
import type { Permit } from '../LaneTable.js';
import type { Rate } from '../RateLane.js';
import type { AdaptiveBounds } from '../AdaptiveLimit.js';
import type { BudgetOccupancy, BudgetSpec } from '../BudgetLane.js';
import { adaptiveKeyOf, FleetAdaptiveLanes, FleetAdaptivePermit, type AdaptiveHost } from './adaptive.js';
import { FleetBudgets } from './budget.js';
import type { RedisConnection } from './connection.js';
import { FleetNews } from './news.js';
import { FleetRates, type FleetRateHost } from './rate.js';

/** What the lane kinds need of their store. */
export interface FleetLaneKindsHost extends Omit<FleetRateHost, 'listen'>, Omit<AdaptiveHost, 'listen'> {
  readonly connection: RedisConnection;
  /** Asks the store's concurrency lane `key` for a permit (an adaptive lane is one, at its learned limit). */
  enter(key: string, limit: number, onGrant: OnGrant, party: string): Permit;
}

export class FleetLaneKinds {
  private rates: FleetRates | undefined = undefined;
  private readonly adaptive: FleetAdaptiveLanes;
  private readonly budgets: FleetBudgets;
  // The adaptive lanes this process has asked, and their bounds.
  private readonly adaptiveKeys = new Map<string, AdaptiveBounds>();
  private readonly news: FleetNews;
  // The host as the rate and adaptive lanes see it: the store's, and the news connection.
  private readonly kindsHost: FleetRateHost & AdaptiveHost;

  constructor(private readonly host: FleetLaneKindsHost) {
    const news = (this.news = new FleetNews(host.connection));
    this.kindsHost = { ...host, listen: (channel, heard) => news.listen(channel, heard) };
    this.adaptive = new FleetAdaptiveLanes(this.kindsHost);
    this.budgets = new FleetBudgets(host.prefix, (script, keys, args) => host.ask(script, keys, args));
  }

  enterAdaptive(key: string, bounds: AdaptiveBounds, onGrant: OnGrant, party: string): Permit {
    this.adaptiveKeys.set(key, bounds);
    this.adaptive.listen();
    const permit = new FleetAdaptivePermit(this.adaptive, key, bounds, onGrant);
    permit.inner = this.host.enter(key, this.adaptive.limitOf(key, bounds), permit, party);
    return permit;
  }

  /** The adaptive lanes this process has asked, each with the limit Redis last answered with. */
  limits(): Array<{ readonly key: string; readonly limit: number; readonly min: number; readonly max: number }> {
    return this.adaptive.list(this.adaptiveKeys);
  }

  /** The budgets this process has asked with a window open at Redis's last answer (budget.ts). */
  budgetList(): BudgetOccupancy[] {
    return this.budgets.list();
  }

  /** The extra key a lane's acquire reads: an adaptive lane's learned limit; none for the others. */
  extraKeyOf(key: string): string | undefined {
    return this.adaptiveKeys.has(key) ? adaptiveKeyOf(this.host.prefix, key) : undefined;
  }

  enterBudget(key: string, spec: BudgetSpec, amount: number, onGrant: OnGrant, party: string): Permit {
    return this.budgets.enter(key, spec, amount, onGrant, party);
  }

  enterRate(key: string, rate: Rate | undefined, onGrant: OnGrant, party: string, scheduler: SchedulerLike): Permit {
    return this.fleetRates().enterRate(key, rate, onGrant, party, scheduler);
  }

  pause(key: string, seconds: number, reason: string, scheduler: SchedulerLike): void {
    this.fleetRates().pause(key, seconds, reason, scheduler);
  }

  paused(key: string): boolean {
    return this.fleetRates().paused(key);
  }

  learnRate(key: string, scheduler: SchedulerLike): void {
    this.fleetRates().learnRate(key, scheduler);
  }

  /** `lanes`, then the rate lanes that matter (someone waits, a bucket refills, a pause runs). */
  occupancy(lanes: LaneOccupancy[]): LaneOccupancy[] {
    return this.rates === undefined ? lanes : lanes.concat(this.rates.table.occupancy());
  }

  /** Resolves once every script these lanes sent has its reply. */
  async idle(): Promise<void> {
    await Promise.all([this.adaptive.idle(), this.budgets.idle()]);
  }

  /** Sends no more, and closes the news connection, if it was ever used (dropped if it has not closed within `ms`). */
  async close(ms: number): Promise<void> {
    await Promise.all([this.rates?.close(), this.news.close(ms)]);
  }

  private fleetRates(): FleetRates {
    return (this.rates ??= new FleetRates(this.kindsHost));
  }
}
