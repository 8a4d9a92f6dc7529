// ConcurrencyConfig: the three lanes a call stands in (turn, tool, tenant) and each
// tool's own time ceiling. Declared on the runner, narrowed (never widened) by an agent.
import * as t from 'io-ts';
import { decodeConfig, own, PositiveInt, PositiveSeconds, tighter } from './limits.js';

const Options = t.partial({
  maxConcurrentTools: PositiveInt,
  perTool: t.record(t.string, PositiveInt, 'an object of tool names to positive integers'),
  perTenant: PositiveInt,
  perToolSeconds: t.record(t.string, PositiveSeconds, 'an object of tool names to positive seconds'),
});
const fields = ['maxConcurrentTools', 'perTool', 'perTenant', 'perToolSeconds'] as const;

/** What `new ConcurrencyConfig(...)` accepts. Every field is optional; absent means unbounded. */
export interface ConcurrencyOptions {
  /** The turn lane: calls of one model response in flight at once. */
  readonly maxConcurrentTools?: number | undefined;
  /** The tool lanes: calls to one tool in flight at once, across every run on the runner. */
  readonly perTool?: Readonly<Record<string, number>> | undefined;
  /** The tenant lane: calls of one tenant in flight at once, across all of its runs. */
  readonly perTenant?: number | undefined;
  /** Each tool's own ceiling in seconds, counted from dispatch; outrunning it fails that call alone. */
  readonly perToolSeconds?: Readonly<Record<string, number>> | undefined;
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

  constructor(options: ConcurrencyOptions = {}) {
    const decoded = decodeConfig(Options, fields, options, 'ConcurrencyConfig');
    this.maxConcurrentTools = decoded.maxConcurrentTools;
    this.perTool = frozenRecord(decoded.perTool);
    this.perTenant = decoded.perTenant;
    this.perToolSeconds = frozenRecord(decoded.perToolSeconds);
    Object.freeze(this);
  }

  /**
   * The composition rule: field by field (and key by key for `perTool` and `perToolSeconds`)
   * the smaller of the two, so the result is never wider than either side.
   */
  narrowedTo(other: ConcurrencyConfig | ConcurrencyOptions | undefined): ConcurrencyConfig {
    if (other === undefined) return this;
    const that = other instanceof ConcurrencyConfig ? other : new ConcurrencyConfig(other);
    return new ConcurrencyConfig({
      maxConcurrentTools: tighter(this.maxConcurrentTools, that.maxConcurrentTools),
      perTool: tighterRecord(this.perTool, that.perTool),
      perTenant: tighter(this.perTenant, that.perTenant),
      perToolSeconds: tighterRecord(this.perToolSeconds, that.perToolSeconds),
    });
  }

  /** The plain options this config was made of (absent fields left out). */
  toJSON(): ConcurrencyOptions {
    return {
      ...(this.maxConcurrentTools === undefined ? {} : { maxConcurrentTools: this.maxConcurrentTools }),
      ...(Object.keys(this.perTool).length === 0 ? {} : { perTool: { ...this.perTool } }),
      ...(this.perTenant === undefined ? {} : { perTenant: this.perTenant }),
      ...(Object.keys(this.perToolSeconds).length === 0 ? {} : { perToolSeconds: { ...this.perToolSeconds } }),
    };
  }
}
