// The rate lanes a call takes before any concurrency lane (so it holds no permit while it waits
// on a clock), and what a partner's "slow down" does to them. Read by the fan-out (inLanes) when
// it works out a tool's lanes, and when a call ends.
import type { SchedulerLike } from 'rxjs';
import { isSlower, own, tenantRate, type ConcurrencyConfig, type RateOptions } from '../config/index.js';
import { RatedStore, type LaneStore } from '../lanes/index.js';
import type { LaneStep } from './callLanes.js';
import type { ErrorInfo } from '../errors.js';
import type { Outcome } from './types.js';

// Tool names are few: each key is made once, as a call start asks for it.
const rateKeys = new Map<string, string>();

/** The key of tool `tool`'s rate lane, the one a partner's "slow down" pauses. */
export function toolRateKey(tool: string): string {
  let key = rateKeys.get(tool);
  if (key === undefined) {
    key = `rate:tool:${tool}`;
    if (rateKeys.size < 4096) rateKeys.set(tool, key);
  }
  return key;
}

/** A store's rate lanes at each rate, made once per rate (and per store) for a fan-out. */
export class RateViews {
  private readonly views = new Map<RateOptions | undefined, RatedStore>();
  constructor(
    private readonly store: LaneStore,
    private readonly scheduler: SchedulerLike,
  ) {}

  of(rate: RateOptions | undefined): RatedStore {
    let view = this.views.get(rate);
    if (view === undefined) {
      view = new RatedStore(this.store, rate, this.scheduler);
      this.views.set(rate, view);
    }
    return view;
  }
}

/** What adding a call's rate lanes needs of the fan-out: the configs, and a store's rate lanes at a rate. */
export interface RateHost {
  readonly sharedLanes: LaneStore;
  readonly sharedConfig: ConcurrencyConfig;
  readonly turnConfig: ConcurrencyConfig;
  /** The shared store's rate lanes at `rate` (`turn`: the batch's own table's), made once per fan-out. */
  rateView(turn: boolean, rate: RateOptions | undefined): LaneStore;
  /** Has the shared store's rate lane `key` learn its pace (an adaptive tool's `pace: true`); false if the store cannot. */
  learnRate(key: string): boolean;
}

/**
 * Adds a call's rate lanes to `steps`, in the fixed order: its tenant's, its tool's, then the
 * turn's own where the agent narrowed them (in the batch's table, so they bound this turn only).
 * A tool with no rate declared takes its rate lane only while the store says it is paused, or
 * always when it is adaptive with `pace: true` (the lane learns the partner's pace): a call with
 * no rate lane pays nothing.
 */
export function addRateSteps(steps: LaneStep[], host: RateHost, tool: string, tenant: string): void {
  const { sharedConfig, turnConfig, sharedLanes } = host;
  const tenantRateOf = tenantRate(sharedConfig.perTenantRate, tenant);
  if (tenantRateOf !== undefined) steps.push(step(host.rateView(false, tenantRateOf), `rate:tenant:${tenant}`, tenant));
  const toolRate = own(sharedConfig.perToolRate, tool);
  const key = toolRateKey(tool);
  // An adaptive tool that learns its partner's pace takes its rate lane always: the lane counts what it admits.
  const learning = toolRate === undefined && own(sharedConfig.perToolAdaptive, tool)?.pace === true && host.learnRate(key);
  if (toolRate !== undefined || learning || sharedLanes.paused?.(key) === true) steps.push(step(host.rateView(false, toolRate), key, tenant));
  if (turnConfig === sharedConfig) return;
  const turnTenant = tenantRate(turnConfig.perTenantRate, tenant);
  if (isSlower(turnTenant, tenantRateOf)) steps.push(step(host.rateView(true, turnTenant), `turn-rate:tenant:${tenant}`, ''));
  const turnTool = own(turnConfig.perToolRate, tool);
  if (isSlower(turnTool, toolRate)) steps.push(step(host.rateView(true, turnTool), `turn-rate:tool:${tool}`, ''));
}

function step(store: LaneStore, key: string, party: string): LaneStep {
  return { store, key, limit: 1, party, loan: undefined };
}

/**
 * A call failed with a partner's "slow down" (`RateLimitedError`, or an error with HTTP status 429): its tool's rate lane admits
 * nothing new for `retryAfterSeconds`, wherever the store is shared. Calls waiting for the lane
 * wait on; they do not fail.
 */
export function slowDown(store: LaneStore, outcome: Outcome, scheduler: SchedulerLike): void {
  if (outcome.kind !== 'error' || outcome.stopped !== undefined) return;
  // A RateLimitedError, or any error that carries a partner's 429 (a wire adapter's ProviderHttpError).
  if (outcome.error.name !== 'RateLimitedError' && outcome.error.status !== 429) return;
  pauseTool(store, outcome.tool, outcome.error, scheduler);
}

/** Pauses tool `tool`'s rate lane for the error's `retryAfterSeconds`; true if the store now says it is paused. */
export function pauseTool(store: LaneStore, tool: string, error: ErrorInfo, scheduler: SchedulerLike): boolean {
  const seconds = error.retryAfterSeconds;
  if (seconds === undefined || !(seconds > 0) || store.pause === undefined) return false;
  const key = toolRateKey(tool);
  store.pause(key, seconds, error.message, scheduler);
  return store.paused?.(key) === true;
}
