// Where two JSON values differ, as paths a person can read (`tools.lookup.description`,
// `messages[3].content`). Used to say what changed in a fingerprint, where a replayed
// request left the recorded one, and where a replayed transcript did.
import { canonicalJson } from '../canonical.js';
import { describeValue } from '../config/index.js';

/** One place two values differ; `undefined` on a side means the key is absent there. */
export interface Difference {
  /** Dotted path from the root, with `[i]` for array positions; `''` for the root itself. */
  readonly path: string;
  readonly recorded: unknown;
  readonly current: unknown;
}

function isPlainObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function child(path: string, key: string): string {
  return /^[A-Za-z_$][\w$-]*$/.test(key) ? (path === '' ? key : `${path}.${key}`) : `${path}[${JSON.stringify(key)}]`;
}

/**
 * The places where `recorded` and `current` differ, compared as JSON (key order ignored, an
 * `undefined` value the same as an absent key), depth first in sorted key order, at most `limit`.
 *
 * ## Example
 * ```ts
 * differences({ a: 1, b: { c: [1, 2] } }, { a: 1, b: { c: [1, 3] } });
 * // [{ path: 'b.c[1]', recorded: 2, current: 3 }]
 * ```
 */
export function differences(recorded: unknown, current: unknown, limit = Number.POSITIVE_INFINITY): Difference[] {
  const found: Difference[] = [];
  const walk = (a: unknown, b: unknown, path: string): void => {
    if (found.length >= limit) return;
    if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = 0; i < Math.max(a.length, b.length); i++) walk(a[i], b[i], `${path}[${i}]`);
      return;
    }
    if (isPlainObject(a) && isPlainObject(b)) {
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
      for (const key of keys) walk(a[key], b[key], child(path, key));
      return;
    }
    if (canonicalJson(a) !== canonicalJson(b)) found.push({ path, recorded: a, current: b });
  };
  walk(recorded, current, '');
  return found;
}

/** `tools.lookup.description: recorded "a", now "b"` (or "added" / "removed"). */
export function describeDifference({ path, recorded, current }: Difference): string {
  const where = path === '' ? 'the value' : path;
  if (recorded === undefined) return `${where} was added (${describeValue(current)})`;
  if (current === undefined) return `${where} was removed (it was ${describeValue(recorded)})`;
  return `${where}: recorded ${describeValue(recorded)}, now ${describeValue(current)}`;
}
