// Deltas: what each call recorded of the run's state, kept apart while the batch
// runs and merged in call order once it resolves (a later call wins a key).
// Keys are copied as own data properties, so `__proto__` in a delta pollutes nothing.
import { put } from '../own.js';
import type { Delta, Outcome } from './types.js';

/** Copies `patch`'s own enumerable keys onto `target` as plain data properties. */
export function assignDelta(target: Record<string, unknown>, patch: Delta): Record<string, unknown> {
  for (const key of Object.keys(patch)) {
    put(target, key, patch[key]);
  }
  return target;
}

/** The batch's merged delta: the deltas of calls that succeeded, in call order. */
export function mergeDeltas(outcomes: Iterable<Outcome>): Record<string, unknown> {
  const list = Array.isArray(outcomes) ? (outcomes as readonly Outcome[]) : [...outcomes];
  // A batch's outcomes come in call order already; only a list out of order is sorted (a copy).
  const ordered = list.every((outcome, i) => i === 0 || list[i - 1]!.index <= outcome.index) ? list : [...list].sort((a, b) => a.index - b.index);
  const merged: Record<string, unknown> = {};
  for (const outcome of ordered) {
    if (outcome.kind === 'result' && outcome.delta !== undefined) assignDelta(merged, outcome.delta);
  }
  return merged;
}
