// The rate lanes' part of ConcurrencyConfig: `{ limit, perSeconds, burst? }` per tool and per
// tenant, its codec, its checks and how two of them narrow. Kept apart from the concurrency
// fields so each kind of lane reads on its own.
import * as t from 'io-ts';
import { put } from '../own.js';
import { own, PositiveInt, PositiveSeconds, refuseUnknownFields } from './limits.js';

/**
 * A rate: `limit` calls per `perSeconds` seconds, up to `burst` at once. `burst` defaults to 1: calls
 * evenly spaced, never more than `limit` in any window of `perSeconds`, as a partner counts them.
 */
export interface RateOptions {
  readonly limit: number;
  readonly perSeconds: number;
  readonly burst?: number | undefined;
}

const rateFields = ['limit', 'perSeconds', 'burst'];

// Each part carries the one name, so a value that is no rate at all reads as one failure.
const rateName = 'a rate { limit, perSeconds, burst? }';
const RateCodec = t.intersection([t.type({ limit: PositiveInt, perSeconds: PositiveSeconds }, rateName), t.partial({ burst: PositiveInt }, rateName)], rateName);

/** The codec of a rates record (`perToolRate`, `perTenantRate`): keys to `{ limit, perSeconds, burst? }`. */
export const RatesCodec = t.record(t.string, RateCodec, 'an object of names to rates { limit, perSeconds, burst? }');

/** Refuses a rate's misspelt field (`perSecond`), naming it: a rate that silently does nothing is a limit gone missing. */
export function refuseUnknownRateFields(record: unknown, field: string): void {
  if (record === null || typeof record !== 'object') return;
  for (const [key, rate] of Object.entries(record)) {
    if (rate !== null && typeof rate === 'object') refuseUnknownFields(rate, rateFields, `${field}.${key}`, { field: `${field}.${key}` });
  }
}

/** A frozen copy of a rates record, each rate frozen, `burst` left out where absent. */
export function frozenRates(record: Readonly<Record<string, RateOptions>> | undefined): Readonly<Record<string, RateOptions>> {
  const copy: Record<string, RateOptions> = {};
  for (const [key, { limit, perSeconds, burst }] of Object.entries(record ?? {})) {
    put(copy, key, Object.freeze(burst === undefined ? { limit, perSeconds } : { limit, perSeconds, burst }));
  }
  return Object.freeze(copy);
}

/** How many calls a rate lets go at once (1 unless it says more). */
export function burstOf(rate: RateOptions): number {
  return rate.burst ?? 1;
}

/**
 * The narrower of two rates: the slower steady rate, and the smaller burst. Absent says nothing,
 * so the other side's stands. Never wider than either side.
 */
export function slowerRate(a: RateOptions | undefined, b: RateOptions | undefined): RateOptions | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  const slower = b.limit / b.perSeconds < a.limit / a.perSeconds ? b : a;
  const burst = Math.min(burstOf(a), burstOf(b));
  // The default burst (1) is left implicit.
  return burst === 1 ? { limit: slower.limit, perSeconds: slower.perSeconds } : { limit: slower.limit, perSeconds: slower.perSeconds, burst };
}

/** Key by key, the narrower of two rates records. */
export function slowerRates(a: Readonly<Record<string, RateOptions>>, b: Readonly<Record<string, RateOptions>>): Record<string, RateOptions> {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return Object.fromEntries([...keys].map((key) => [key, slowerRate(own(a, key), own(b, key))!]));
}

/** True when `narrow` lets fewer calls go than `wide`, at once or over time (an agent's bound worth a lane of its turn's own). */
export function isSlower(narrow: RateOptions | undefined, wide: RateOptions | undefined): narrow is RateOptions {
  if (narrow === undefined) return false;
  if (wide === undefined) return true;
  return narrow.limit / narrow.perSeconds < wide.limit / wide.perSeconds || burstOf(narrow) < burstOf(wide);
}

/** The rate of tenant `tenant` in `perTenantRate`: its own entry, else the `'*'` entry every tenant shares the figures of. */
export function tenantRate(rates: Readonly<Record<string, RateOptions>>, tenant: string): RateOptions | undefined {
  return own(rates, tenant) ?? own(rates, '*');
}
