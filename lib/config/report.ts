// Turns io-ts validation errors into sentences a person can act on:
// the path that failed, what was expected there, and what came instead.
// Used for configs here and for tool arguments and provider replies later on.
import type * as t from 'io-ts';

/** One failed check: where, what was expected, what came. */
export interface Failure {
  readonly path: string;
  readonly expected: string;
  readonly actual: unknown;
}

const containerTags = new Set(['UnionType', 'IntersectionType']);

// Friendly words for the codecs this library declares; anything else is shown by its io-ts name.
const expectations: Record<string, string> = {
  PositiveInt: 'a positive integer',
  PositiveSeconds: 'a positive finite number of seconds',
  TokenCount: 'a whole number of tokens from 0 up',
  PositiveAmount: 'a positive finite number',
  string: 'string',
  number: 'number',
  boolean: 'boolean',
  Int: 'integer',
};

function expectedOf(type: t.Decoder<unknown, unknown>): string {
  return Object.prototype.hasOwnProperty.call(expectations, type.name) ? expectations[type.name]! : type.name;
}

/** Renders a value briefly for a message: JSON where it can be, cut at 60 characters. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (typeof value === 'function') return 'a function';
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Array.isArray(value) ? 'an array' : 'an object';
  }
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/**
 * Lists every failure in `errors`, one per path (alternatives at one path are joined with "or").
 * `root` names the whole value (`args`, `ConcurrencyConfig`); it prefixes every path.
 */
export function failures(errors: t.Errors, root = ''): Failure[] {
  const byPath = new Map<string, { expected: string[]; actual: unknown }>();
  for (const error of errors) {
    const keys: string[] = root === '' ? [] : [root];
    const { context } = error;
    for (let i = 1; i < context.length; i++) {
      // Members of a union or an intersection are indexed by position; that index is not part of the path.
      if (containerTags.has((context[i - 1]!.type as { _tag?: string })._tag ?? '')) continue;
      keys.push(context[i]!.key);
    }
    const last = context[context.length - 1]!;
    const path = keys.join('.');
    const entry = byPath.get(path) ?? { expected: [], actual: last.actual };
    const expected = error.message ?? expectedOf(last.type);
    if (!entry.expected.includes(expected)) entry.expected.push(expected);
    byPath.set(path, entry);
  }
  return [...byPath].map(([path, { expected, actual }]) => ({ path, expected: expected.join(' or '), actual }));
}

/** `args.q: expected string, got 42`, one failure a clause, joined with "; ". */
export function describeFailures(errors: t.Errors, root = ''): string {
  return failures(errors, root)
    .map(({ path, expected, actual }) => `${path === '' ? '(the value)' : path}: expected ${expected}, got ${describeValue(actual)}`)
    .join('; ');
}
