// How a call takes its adaptive and budget lanes, and what it tells them: a lane step of either
// kind is entered through its own door of the store, and once the call's outcome is decided (or
// it is torn down) each permit it holds hears how the work went; a body's reported cost reaches
// its budget lane. A call with neither kind configured takes plain steps and tells nothing.
import type { AdaptiveBounds, BudgetSpec, LaneSignal, LaneStore, OnGrant, Permit } from '../lanes/index.js';
import type { Outcome } from './types.js';

/** The kind-specific part of a lane step: an adaptive lane's bounds, or a budget and the amount a call asks of it. */
export interface LaneKind {
  readonly adaptive: AdaptiveBounds | undefined;
  readonly budget: BudgetSpec | undefined;
  readonly amount: number;
}

/** A plain (counting) lane step's kind. */
export const plainLane: LaneKind = Object.freeze({ adaptive: undefined, budget: undefined, amount: 0 });

/** Enters a step of an adaptive or budget lane, or returns undefined for a plain one (taken as before). */
export function enterKind(store: LaneStore, key: string, kind: LaneKind, onGrant: OnGrant, party: string): Permit | undefined {
  if (kind.budget !== undefined) return store.enterBudget!(key, kind.budget, kind.amount, onGrant, party);
  if (kind.adaptive !== undefined) return store.enterAdaptive!(key, kind.adaptive, onGrant, party);
  return undefined;
}

// Errors that say the downstream is overloaded: a partner's slow down, or a call that outran its ceiling.
const overload: ReadonlySet<string> = new Set(['RateLimitedError', 'ToolTimedOutError']);

/** What an outcome says of the work under a call's permits. */
export function signalOf(outcome: Outcome): LaneSignal {
  if (!outcome.dispatched) return 'unstarted';
  if (outcome.kind === 'result') return 'ok';
  if (outcome.kind === 'indeterminate' || outcome.stopped !== undefined) return 'stopped';
  return overload.has(outcome.error.name) ? 'overload' : 'failed';
}

/** Tells the first `taken` permits that listen how the work went (`signal`, or an outcome read only if one listens). */
export function tellLanes(permits: ReadonlyArray<Permit | undefined>, taken: number, signal: LaneSignal | Outcome): void {
  let told: LaneSignal | undefined = typeof signal === 'string' ? signal : undefined;
  for (let i = 0; i < taken; i++) {
    const permit = permits[i]!;
    if (permit.report === undefined) continue;
    told ??= signalOf(signal as Outcome);
    permit.report(told);
  }
}

/** Tells the first `taken` permits that take a cost (budget lanes) what the work cost in all. */
export function chargeLanes(permits: ReadonlyArray<Permit | undefined>, taken: number, total: number): void {
  for (let i = 0; i < taken; i++) permits[i]!.charge?.(total);
}
