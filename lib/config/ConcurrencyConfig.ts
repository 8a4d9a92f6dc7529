// ConcurrencyConfig: the three lanes a call stands in (turn, tool, tenant) and each
// tool's own time ceiling. Declared on the runner, narrowed (never widened) by an agent.
import * as t from 'io-ts';
import { decodeConfig, own, PositiveInt, PositiveSeconds, tighter } from './limits.js';
import { frozenRates, RatesCodec, refuseUnknownRateFields, slowerRates, type RateOptions } from './rates.js';
import {
  checkLaneKinds,
  frozenAdaptive,
  frozenBudget,
  laneKindFields,
  narrowerAdaptive,
  narrowerBudget,
  type AdaptiveOptions,
  type BudgetOptions,
} from './laneKinds.js';

const Options = t.partial({
  maxConcurrentTools: PositiveInt,
  perTool: t.record(t.string, PositiveInt, 'an object of tool names to positive integers'),
  perTenant: PositiveInt,
  perToolSeconds: t.record(t.string, PositiveSeconds, 'an object of tool names to positive seconds'),
  abandonAfterSeconds: PositiveSeconds,
  // The rate lanes (lib/config/rates.ts).
  perToolRate: RatesCodec,
  perTenantRate: RatesCodec,
  retryRateLimited: t.boolean,
  // Adaptive and budget lanes (laneKinds.ts).
  ...laneKindFields,
});
const fields = [
  'maxConcurrentTools',
  'perTool',
  'perTenant',
  'perToolSeconds',
  'abandonAfterSeconds',
  // The rate lanes.
  'perToolRate',
  'perTenantRate',
  'retryRateLimited',
  // Adaptive and budget lanes.
  'perToolAdaptive',
  'perTenantBudget',
] as const;

/** What `new ConcurrencyConfig(...)` accepts. Every field is optional; absent means unbounded. */
export interface ConcurrencyOptions {
  /** The turn lane: calls of one model response in flight at once. */
  readonly maxConcurrentTools?: number | undefined;
  /** The tool lanes: calls to one tool in flight at once, across every run on the runner. */
  readonly perTool?: Readonly<Record<string, number>> | undefined;
  /** The tenant lane: calls of one tenant in flight at once, across all of its runs. */
  readonly perTenant?: number | undefined;
  /** Each tool's own ceiling in seconds, counted from its body's start; outrunning it fails that call alone. */
  readonly perToolSeconds?: Readonly<Record<string, number>> | undefined;
  /**
   * Opt-in grace for a body that overruns its call: one still running after its call was stopped
   * or timed out keeps its permits (a lane counts bodies that actually run) until it settles, or
   * until this many seconds have passed, when they are given back and the body is reported as
   * abandoned. Absent: kept until the body settles.
   */
  readonly abandonAfterSeconds?: number | undefined;

  // The rate lanes: taken before any concurrency lane, so no permit is held while a call waits on a clock.
  /** Each tool's rate lane: calls to it admitted at most `limit` per `perSeconds`, up to `burst` at once, across every run on the runner. */
  readonly perToolRate?: Readonly<Record<string, RateOptions>> | undefined;
  /** Each tenant's rate lane, by tenant (`'*'`: every tenant without an entry of its own, each in a lane of its own). */
  readonly perTenantRate?: Readonly<Record<string, RateOptions>> | undefined;
  /**
   * Opt-in: an idempotent call whose body fails with `RateLimitedError` (with a `retryAfterSeconds`)
   * enters its lanes again once: it leaves its permits, waits out the pause at its tool's rate lane,
   * and its body starts again, inside its own ceiling (`perToolSeconds`, counted from its first start).
   */
  readonly retryRateLimited?: boolean | undefined;
  // Adaptive and budget lanes (docs/concurrency.md).
  /**
   * Adaptive tool lanes: the tool's lane limit falls when its calls are rate limited, time out or
   * slow down, and grows back as they succeed, within `min..max` (from `initial`, default `max`).
   * It replaces the fixed `perTool` number of that tool's lane.
   */
  readonly perToolAdaptive?: Readonly<Record<string, AdaptiveOptions>> | undefined;
  /**
   * Each tenant's budget over a window of `perSeconds`: model `tokens` (the providers' usage) and
   * tools' `cost` (declared on the tool, or reported by its body). A turn or call the budget
   * cannot cover is not started.
   */
  readonly perTenantBudget?: BudgetOptions | undefined;
}

function frozenRecord(record: Readonly<Record<string, number>> | undefined): Readonly<Record<string, number>> {
  return Object.freeze(Object.fromEntries(Object.entries(record ?? {})));
}

// Key by key, the smaller of the two; a key only one side bounds keeps that side's bound.
function tighterRecord(
  a: Readonly<Record<string, number>>,
  b: Readonly<Record<string, number>>,
): Record<string, number> {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return Object.fromEntries([...keys].map((key) => [key, tighter(own(a, key), own(b, key))!]));
}

// The longer of two graces; absent says nothing, so the other side's stands.
function longer(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.max(a, b);
}

// Both sides' leave for a retry: false from either is false; absent says nothing.
function bothAllow(a: boolean | undefined, b: boolean | undefined): boolean | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return a && b;
}

/**
 * The lanes a call stands in, and the tightest one decides.
 *
 * Limits are positive integers, seconds positive finite numbers; anything else throws a
 * `ConfigError` naming the field and the value. The object is immutable.
 *
 * ## Example
 * ```ts
 * const runnerWide = new ConcurrencyConfig({ maxConcurrentTools: 8, perTool: { search: 4 } });
 * const planner = runnerWide.narrowedTo({ maxConcurrentTools: 2, perTool: { search: 6 } });
 * planner.maxConcurrentTools; // 2
 * planner.perTool.search;     // 4: an agent never widens
 * ```
 */
export class ConcurrencyConfig {
  readonly maxConcurrentTools: number | undefined;
  readonly perTool: Readonly<Record<string, number>>;
  readonly perTenant: number | undefined;
  readonly perToolSeconds: Readonly<Record<string, number>>;
  readonly abandonAfterSeconds: number | undefined;
  // The rate lanes.
  readonly perToolRate: Readonly<Record<string, RateOptions>>;
  readonly perTenantRate: Readonly<Record<string, RateOptions>>;
  readonly retryRateLimited: boolean | undefined;
  // Adaptive and budget lanes.
  readonly perToolAdaptive: Readonly<Record<string, AdaptiveOptions>>;
  readonly perTenantBudget: BudgetOptions | undefined;

  constructor(options: ConcurrencyOptions = {}) {
    const decoded = decodeConfig(Options, fields, options, 'ConcurrencyConfig');
    this.maxConcurrentTools = decoded.maxConcurrentTools;
    this.perTool = frozenRecord(decoded.perTool);
    this.perTenant = decoded.perTenant;
    this.perToolSeconds = frozenRecord(decoded.perToolSeconds);
    this.abandonAfterSeconds = decoded.abandonAfterSeconds;
    // The rate lanes.
    refuseUnknownRateFields(options.perToolRate, 'perToolRate');
    refuseUnknownRateFields(options.perTenantRate, 'perTenantRate');
    this.perToolRate = frozenRates(decoded.perToolRate);
    this.perTenantRate = frozenRates(decoded.perTenantRate);
    this.retryRateLimited = decoded.retryRateLimited;
    // Adaptive and budget lanes.
    checkLaneKinds(decoded);
    this.perToolAdaptive = frozenAdaptive(decoded.perToolAdaptive);
    this.perTenantBudget = frozenBudget(decoded.perTenantBudget);
    Object.freeze(this);
  }

  /**
   * The composition rule: field by field (and key by key for `perTool` and `perToolSeconds`)
   * the smaller of the two, so the result is never wider than either side. `abandonAfterSeconds`
   * keeps the longer grace, for the same reason: a shorter one gives permits back sooner.
   * `perToolRate` and `perTenantRate`, key by key, keep the slower steady rate and the smaller burst.
   */
  narrowedTo(other: ConcurrencyConfig | ConcurrencyOptions | undefined): ConcurrencyConfig {
    if (other === undefined) return this;
    const that = other instanceof ConcurrencyConfig ? other : new ConcurrencyConfig(other);
    return new ConcurrencyConfig({
      maxConcurrentTools: tighter(this.maxConcurrentTools, that.maxConcurrentTools),
      perTool: tighterRecord(this.perTool, that.perTool),
      perTenant: tighter(this.perTenant, that.perTenant),
      perToolSeconds: tighterRecord(this.perToolSeconds, that.perToolSeconds),
      // A shorter grace gives permits back sooner, so it is the wider of two: the longer one is kept.
      abandonAfterSeconds: longer(this.abandonAfterSeconds, that.abandonAfterSeconds),
      // The rate lanes: key by key the slower steady rate and the smaller burst.
      perToolRate: slowerRates(this.perToolRate, that.perToolRate),
      perTenantRate: slowerRates(this.perTenantRate, that.perTenantRate),
      // A retry is one more call: either side saying no wins; absent says nothing.
      retryRateLimited: bothAllow(this.retryRateLimited, that.retryRateLimited),
      // Adaptive and budget lanes: the lower bounds, the smaller budget over the longer window.
      perToolAdaptive: narrowerAdaptive(this.perToolAdaptive, that.perToolAdaptive),
      perTenantBudget: narrowerBudget(this.perTenantBudget, that.perTenantBudget),
    });
  }

  /** The plain options this config was made of (absent fields left out). */
  toJSON(): ConcurrencyOptions {
    return {
      ...(this.maxConcurrentTools === undefined ? {} : { maxConcurrentTools: this.maxConcurrentTools }),
      ...(Object.keys(this.perTool).length === 0 ? {} : { perTool: { ...this.perTool } }),
      ...(this.perTenant === undefined ? {} : { perTenant: this.perTenant }),
      ...(Object.keys(this.perToolSeconds).length === 0 ? {} : { perToolSeconds: { ...this.perToolSeconds } }),
      ...(this.abandonAfterSeconds === undefined ? {} : { abandonAfterSeconds: this.abandonAfterSeconds }),
      // The rate lanes.
      ...(Object.keys(this.perToolRate).length === 0 ? {} : { perToolRate: { ...this.perToolRate } }),
      ...(Object.keys(this.perTenantRate).length === 0 ? {} : { perTenantRate: { ...this.perTenantRate } }),
      ...(this.retryRateLimited === undefined ? {} : { retryRateLimited: this.retryRateLimited }),
      // Adaptive and budget lanes.
      ...(Object.keys(this.perToolAdaptive).length === 0 ? {} : { perToolAdaptive: { ...this.perToolAdaptive } }),
      ...(this.perTenantBudget === undefined ? {} : { perTenantBudget: { ...this.perTenantBudget } }),
    };
  }
}
