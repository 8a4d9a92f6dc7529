// The one JSON form of a value. A tool body may return anything; what it returned goes on in
// this form, and only in this form, to the model, the transcript, policies, cassettes and the
// streams (SSE, the UI message stream), so they all carry the same thing and none of them throws.
// Every module may import this file; it imports only lib/errors.ts, lib/own.ts and lib/nesting.ts.
import { JsonFormError, toErrorInfo } from './errors.js';
import { put } from './own.js';
import { MAX_NESTING } from './nesting.js';

/** A value JSON carries as it is. */
export type JsonValue = null | boolean | number | string | readonly JsonValue[] | { readonly [key: string]: JsonValue };

// Deeper than this is refused with a reason, rather than left to whichever walk runs out of
// stack first (this one, JSON.stringify, a parser on the other side of a stream).
const MAX_DEPTH = MAX_NESTING;

// What a value with no place in JSON becomes inside an object (its key is left out) or in an
// array (null): undefined, a function, a symbol, as JSON.stringify treats them.
const ABSENT = Symbol('absent');

// A failure inside the walk: the path is collected as the walk unwinds, innermost key first,
// so a walk that does not fail builds no paths at all.
class Unrepresentable {
  readonly keys: Array<string | number> = [];
  constructor(readonly reason: string) {}
}

/**
 * The JSON form of `value`: a fresh, deeply frozen copy that `JSON.stringify` writes exactly
 * and cannot fail on. JSON's own rules apply (a `toJSON` method is called once, `NaN` and
 * `±Infinity` become `null`, `-0` is `0`, `undefined`, functions and symbols inside an object
 * drop their key and inside an array become `null`, a class instance is its own enumerable
 * fields), and the values JSON refuses or loses get one form each:
 *
 * | value | form |
 * | --- | --- |
 * | `undefined` (the whole value) | `null` |
 * | a BigInt | its decimal digits, as a string (`"1180591620717411303424"`) |
 * | a Date | its ISO text (its `toJSON`); an invalid Date is `null` |
 * | a Map | an array of `[key, value]` pairs, in insertion order |
 * | a Set | an array of its values, in insertion order |
 * | a boxed `Number`, `String`, `Boolean` | the primitive |
 *
 * Each getter is read once. A value that has no JSON form throws a JsonFormError naming where
 * and why: a circular reference, a getter, `toJSON` or proxy trap that throws, a function or a
 * symbol as the whole value, nesting deeper than 1000 levels.
 *
 * ## Example
 * ```ts
 * jsonForm({ at: new Date(0), total: 2n ** 70n, seen: new Set(['a']), gone: undefined, ratio: NaN });
 * // { at: '1970-01-01T00:00:00.000Z', total: '1180591620717411303424', seen: ['a'], ratio: null }
 * const loop: Record<string, unknown> = {}; loop.self = loop;
 * jsonForm(loop);   // throws JsonFormError: self: a circular reference (its path is 'self')
 * ```
 */
export function jsonForm(value: unknown): JsonValue {
  // The common answers (a string, a number) are their own form: no walk, no copy.
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return finite(value);
    case 'undefined':
      return null;
    case 'function':
    case 'symbol':
      throw new JsonFormError('', `a ${typeof value} is not JSON`);
  }
  let form: JsonValue | typeof ABSENT;
  try {
    form = walk(value, '', 0, []);
  } catch (failure) {
    if (!(failure instanceof Unrepresentable)) throw failure;
    throw new JsonFormError(failure.keys.reverse().join('.'), failure.reason);
  }
  // A toJSON that answered undefined, a function or a symbol leaves nothing: null, like undefined.
  return form === ABSENT ? null : form;
}

/**
 * The JSON text of `value`'s JSON form (see `jsonForm`): what the event streams write. Throws
 * a JsonFormError only for a value that has no JSON form.
 */
export function jsonText(value: unknown): string {
  return JSON.stringify(jsonForm(value));
}

// One value, as its holder's `key` (for toJSON, which JSON hands the key). `ancestors` are the
// objects being walked above it, to tell a cycle from a value that is merely shared.
function walk(value: unknown, key: string, depth: number, ancestors: object[]): JsonValue | typeof ABSENT {
  try {
    if (value !== null && (typeof value === 'object' || typeof value === 'bigint')) {
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function') value = toJSON.call(value, key);
    }
    switch (typeof value) {
      case 'string':
      case 'boolean':
        return value;
      case 'number':
        return finite(value);
      case 'bigint':
        return value.toString();
      case 'undefined':
      case 'function':
      case 'symbol':
        return ABSENT;
    }
    if (value === null) return null;
    return composite(value as object, depth, ancestors);
  } catch (failure) {
    throw unrepresentable(failure);
  }
}

// JSON's number: NaN and ±Infinity are null, and -0 is 0 (what JSON.stringify writes for it).
function finite(value: number): number | null {
  return Number.isFinite(value) ? value + 0 : null;
}

// What reading the value threw (a getter, toJSON, a proxy trap), as the walk's failure.
function unrepresentable(failure: unknown): Unrepresentable {
  return failure instanceof Unrepresentable ? failure : new Unrepresentable(toErrorInfo(failure).message);
}

// The failure, one key further from the root: the key it was read at.
function at(failure: unknown, key: string | number): Unrepresentable {
  const located = unrepresentable(failure);
  located.keys.push(key);
  return located;
}

function composite(value: object, depth: number, ancestors: object[]): JsonValue {
  if (depth >= MAX_DEPTH) throw new Unrepresentable(`nested more than ${MAX_DEPTH} levels deep`);
  if (ancestors.includes(value)) throw new Unrepresentable('a circular reference');
  ancestors.push(value);
  let form: JsonValue;
  if (Array.isArray(value)) form = items(value as readonly unknown[], depth, ancestors);
  else {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto === Object.prototype || proto === null) form = fields(value, depth, ancestors);
    else if (value instanceof Map) form = items(Array.from(value as Map<unknown, unknown>, pair), depth, ancestors);
    else if (value instanceof Set) form = items(Array.from(value as Set<unknown>), depth, ancestors);
    // JSON unwraps a boxed primitive; a boxed BigInt goes as its digits, like a BigInt.
    else if (value instanceof Number || value instanceof String || value instanceof Boolean || value instanceof BigInt) {
      form = walk(value.valueOf(), '', depth, ancestors) as JsonValue;
    } else form = fields(value, depth, ancestors);
  }
  ancestors.pop();
  return form;
}

// A Map entry as a pair; a fresh array, so the walk sees no cycle through the entry itself.
function pair(entry: [unknown, unknown]): unknown[] {
  return [entry[0], entry[1]];
}

function items(value: readonly unknown[], depth: number, ancestors: object[]): JsonValue {
  const length = value.length;
  const out = new Array<JsonValue>(length);
  for (let i = 0; i < length; i++) {
    let item: unknown;
    try {
      item = value[i];
      // Strings, numbers and booleans, most of any result, are taken here, without a call.
      if (typeof item === 'number') item = finite(item);
      else if (typeof item !== 'string' && typeof item !== 'boolean') item = walk(item, String(i), depth + 1, ancestors);
    } catch (failure) {
      throw at(failure, i);
    }
    out[i] = item === ABSENT ? null : (item as JsonValue);
  }
  return Object.freeze(out);
}

function fields(value: object, depth: number, ancestors: object[]): JsonValue {
  const out: Record<string, JsonValue> = {};
  for (const key of Object.keys(value)) {
    let item: unknown;
    try {
      item = (value as Record<string, unknown>)[key];
      if (typeof item === 'number') item = finite(item);
      else if (typeof item !== 'string' && typeof item !== 'boolean') item = walk(item, key, depth + 1, ancestors);
    } catch (failure) {
      throw at(failure, key);
    }
    if (item === ABSENT) continue;
    put(out, key, item as JsonValue);
  }
  return Object.freeze(out);
}
