// The checked numbers every config is made of, as branded io-ts codecs,
// and the one decoding step that turns a bad field into a ConfigError.
import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';
import { ConfigError } from '../errors.js';
import { describeValue, failures } from './report.js';

export interface PositiveIntBrand {
  readonly PositiveInt: unique symbol;
}
/** An integer from 1 up: a lane's number of permits. */
export const PositiveInt = t.brand(
  t.number,
  (n): n is t.Branded<number, PositiveIntBrand> => Number.isInteger(n) && n > 0,
  'PositiveInt',
);
export type PositiveInt = t.TypeOf<typeof PositiveInt>;

export interface PositiveSecondsBrand {
  readonly PositiveSeconds: unique symbol;
}
/** A finite number of seconds above zero. */
export const PositiveSeconds = t.brand(
  t.number,
  (n): n is t.Branded<number, PositiveSecondsBrand> => Number.isFinite(n) && n > 0,
  'PositiveSeconds',
);
export type PositiveSeconds = t.TypeOf<typeof PositiveSeconds>;

/**
 * Decodes `input` with `codec`, refusing fields the codec does not name
 * (a misspelt `maxConcurentTools` is a mistake, not a no-op).
 * Throws a ConfigError naming the first bad field: `perTool.search must be a positive integer, got 0`.
 */
export function decodeConfig<C extends t.Mixed>(
  codec: C,
  known: readonly string[],
  input: unknown,
  what: string,
): t.TypeOf<C> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new ConfigError(what, `${what} options must be an object, got ${describeValue(input)}`);
  }
  refuseUnknownFields(input, known, what);
  const decoded = codec.decode(input);
  if (isLeft(decoded)) {
    const [first] = failures(decoded.left);
    const field = first?.path ?? what;
    throw new ConfigError(field, `${field} must be ${first?.expected ?? 'valid'}, got ${describeValue(first?.actual)}`);
  }
  return decoded.right;
}

/**
 * Throws a ConfigError for the first key of `input` not in `known`: a misspelt option that
 * silently does nothing is how a limit goes missing. `field` prefixes the key in the error
 * (`retry.attemps`); `noun` is what the keys are called (`field`, `option`).
 */
export function refuseUnknownFields(input: object, known: readonly string[], what: string, options: { field?: string; noun?: string } = {}): void {
  const { field, noun = 'field' } = options;
  for (const key of Object.keys(input)) {
    if (!known.includes(key)) {
      throw new ConfigError(field === undefined ? key : `${field}.${key}`, `${what} has no ${noun} ${key}; its ${noun}s are ${known.join(', ')}`);
    }
  }
}

/**
 * A config that may be given as itself or as the options to build it from (`concurrency`,
 * `deadline`): anything but an object is refused here, naming `field`; options are checked
 * by the config's own constructor, with its messages. `what` is how the message names the field.
 */
export function refuseNonConfig(value: unknown, field: string, config: string, what = field): void {
  if (value !== undefined && (value === null || typeof value !== 'object')) {
    throw new ConfigError(field, `${what} must be a ${config} or its options, got ${describeValue(value)}`);
  }
}

// A lookup that only sees a record's own keys: `perTool.constructor` is not a limit.
export { own } from '../own.js';

/** The smaller of two optional bounds; absent means unbounded. */
export function tighter(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}
