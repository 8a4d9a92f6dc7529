// Canonical JSON: object keys sorted, so two equal values always give the same text.
// Used for the identical-arguments lane key and, later, for fingerprints and cassettes.
// safe-stable-stringify is well kept, fast, and survives circular values and BigInts.
import { configure } from 'safe-stable-stringify';

const stringify = configure({ deterministic: true, circularValue: '[Circular]', bigint: true });

/** The canonical JSON text of `value` (sorted keys; `[Circular]` for a cycle). */
export function canonicalJson(value: unknown): string {
  return stringify(value) ?? 'undefined';
}
