// The ConcurrencyConfig fields of the adaptive and budget lanes: their codecs, the checks that
// span fields (min <= initial <= max, a budget that counts something), and how an agent's
// narrow the runner's. ConcurrencyConfig.ts composes them with its other fields.
import * as t from 'io-ts';
import { ConfigError } from '../errors.js';
import { own, PositiveInt, PositiveSeconds, refuseUnknownFields, tighter } from './limits.js';
import { describeValue } from './report.js';

export interface PositiveAmountBrand {
  readonly PositiveAmount: unique symbol;
}
/** A finite amount above zero: a budget's cost. */
export const PositiveAmount = t.brand(
  t.number,
  (n): n is t.Branded<number, PositiveAmountBrand> => Number.isFinite(n) && n > 0,
  'PositiveAmount',
);

/**
 * One tool's adaptive lane: its limit moves within `min..max`, from `initial` (default `max`).
 * `pace: true` also has the tool's rate lane learn the partner's pace from its slow downs (for a
 * partner that counts requests per window, where no concurrency bounds a rate); a tool with a
 * `perToolRate` of its own keeps that rate instead. The runner's to declare: an agent's is left out.
 */
export interface AdaptiveOptions {
  readonly min: number;
  readonly max: number;
  readonly initial?: number | undefined;
  readonly pace?: boolean | undefined;
}

/** A tenant's budget over a window of `perSeconds`: model tokens, tools' cost, or both. */
export interface BudgetOptions {
  readonly tokens?: number | undefined;
  readonly cost?: number | undefined;
  readonly perSeconds: number;
  /**
   * The tokens a model turn reserves from `tokens` before it is asked (its usage is not known until
   * it answers; it is then charged what it reported instead). Without it a turn needs only
   * something left, and every run of the tenant in flight may overspend by one turn; with it, the
   * budget is overspent only by what turns report beyond their reservation.
   */
  readonly turnTokens?: number | undefined;
}

const Adaptive = t.intersection([t.type({ min: PositiveInt, max: PositiveInt }), t.partial({ initial: PositiveInt, pace: t.boolean })]);
const Budget = t.intersection([t.type({ perSeconds: PositiveSeconds }), t.partial({ tokens: PositiveInt, cost: PositiveAmount, turnTokens: PositiveInt })]);

/** The codecs of the fields, for ConcurrencyConfig's own. */
export const laneKindFields = {
  perToolAdaptive: t.record(t.string, Adaptive, 'an object of tool names to { min, max, initial?, pace? }'),
  perTenantBudget: Budget,
};

const adaptiveKeys = ['min', 'max', 'initial', 'pace'];
const budgetKeys = ['tokens', 'cost', 'perSeconds', 'turnTokens'];

/**
 * The checks the codecs cannot make, on decoded fields: no unknown keys, `min <= max`,
 * `initial` within them, a budget that bounds tokens or cost. Throws a ConfigError naming the field.
 */
export function checkLaneKinds(input: { readonly perToolAdaptive?: unknown; readonly perTenantBudget?: unknown }): void {
  const adaptive = input.perToolAdaptive as Readonly<Record<string, AdaptiveOptions>> | undefined;
  for (const tool of Object.keys(adaptive ?? {})) {
    const field = `perToolAdaptive.${tool}`;
    const bounds = own(adaptive!, tool)!;
    refuseUnknownFields(bounds, adaptiveKeys, field, { field });
    if (bounds.min > bounds.max) {
      throw new ConfigError(`${field}.max`, `${field}.max must be at least its min (${bounds.min}), got ${bounds.max}`);
    }
    const { initial } = bounds;
    if (initial !== undefined && (initial < bounds.min || initial > bounds.max)) {
      throw new ConfigError(`${field}.initial`, `${field}.initial must be within min..max (${bounds.min}..${bounds.max}), got ${describeValue(initial)}`);
    }
  }
  const budget = input.perTenantBudget as BudgetOptions | undefined;
  if (budget !== undefined) {
    refuseUnknownFields(budget, budgetKeys, 'perTenantBudget', { field: 'perTenantBudget' });
    if (budget.tokens === undefined && budget.cost === undefined) {
      throw new ConfigError('perTenantBudget', 'perTenantBudget must bound tokens, cost or both, got neither');
    }
    if (budget.turnTokens !== undefined && (budget.tokens === undefined || budget.turnTokens > budget.tokens)) {
      throw new ConfigError(
        'perTenantBudget.turnTokens',
        `perTenantBudget.turnTokens reserves part of the token budget for each turn: it needs tokens, at least as many; got turnTokens ${budget.turnTokens} and tokens ${String(budget.tokens)}`,
      );
    }
  }
}

/** The frozen adaptive bounds, key by key. */
export function frozenAdaptive(record: Readonly<Record<string, AdaptiveOptions>> | undefined): Readonly<Record<string, AdaptiveOptions>> {
  return Object.freeze(
    Object.fromEntries(
      Object.entries(record ?? {}).map(([tool, { min, max, initial, pace }]) => [
        tool,
        Object.freeze({ min, max, ...(initial === undefined ? {} : { initial }), ...(pace === true ? { pace } : {}) }),
      ]),
    ),
  );
}

/**
 * Two sides' adaptive bounds, key by key: where both bound a tool, the lower of each (a lower
 * `min` lets the limit fall further, a lower `max` caps it sooner, a lower `initial` starts it
 * lower), so the result never lets more calls run than either side.
 */
export function narrowerAdaptive(
  a: Readonly<Record<string, AdaptiveOptions>>,
  b: Readonly<Record<string, AdaptiveOptions>>,
): Record<string, AdaptiveOptions> {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return Object.fromEntries(
    [...keys].map((key) => {
      const x = own(a, key);
      const y = own(b, key);
      // A pace is learned by the shared rate lane: the runner's (`a`) to ask for, never an agent's.
      if (y === undefined) return [key, x!];
      const { pace: _agents, ...bounds } = y;
      if (x === undefined) return [key, bounds];
      const pace = x.pace === true ? { pace: true } : {};
      return [key, { min: Math.min(x.min, y.min), max: Math.min(x.max, y.max), initial: Math.min(x.initial ?? x.max, y.initial ?? y.max), ...pace }];
    }),
  );
}

/** Two budgets: the smaller of each amount, over the longer window. */
export function narrowerBudget(a: BudgetOptions | undefined, b: BudgetOptions | undefined): BudgetOptions | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  const tokens = tighter(a.tokens, b.tokens);
  const cost = tighter(a.cost, b.cost);
  // A larger reservation per turn is the narrower one: it lets fewer turns start.
  const turnTokens = a.turnTokens === undefined ? b.turnTokens : b.turnTokens === undefined ? a.turnTokens : Math.max(a.turnTokens, b.turnTokens);
  return {
    ...(tokens === undefined ? {} : { tokens }),
    ...(cost === undefined ? {} : { cost }),
    ...(turnTokens === undefined ? {} : { turnTokens: tokens === undefined ? turnTokens : Math.min(turnTokens, tokens) }),
    perSeconds: Math.max(a.perSeconds, b.perSeconds),
  };
}

/** The frozen budget, as given. */
export function frozenBudget(budget: BudgetOptions | undefined): BudgetOptions | undefined {
  return budget === undefined ? undefined : Object.freeze({ ...budget });
}
