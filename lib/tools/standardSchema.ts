// Schemas from other validation libraries (zod 4, valibot, arktype...) through the Standard
// Schema interface they share, beside io-ts codecs: telling the two apart, checking a value with
// either (a Standard Schema may answer later, an io-ts codec always answers at once), saying
// what failed in the form io-ts failures take, and finding the JSON Schema a model is shown.
// The interface is written out here, types only: no validation library is imported.
import { isLeft, left, right, type Either } from 'fp-ts/lib/Either.js';
import type * as t from 'io-ts';
import { describeFailures, describeValue } from '../config/index.js';
import { toErrorInfo } from '../errors.js';

/** One problem a Standard Schema found: its message and where (keys, or `{ key }` segments). */
export interface StandardIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/** What a Standard Schema's `validate` gives: the value, or the issues. */
export type StandardResult<Output> = { readonly value: Output; readonly issues?: undefined } | { readonly issues: ReadonlyArray<StandardIssue> };

/**
 * A schema that follows the Standard Schema specification, version 1 (`@standard-schema/spec`):
 * zod (3.24 and up), valibot 1, arktype 2 and others. Only what this library reads is listed; a
 * schema of any of those libraries fits it as it is.
 */
export interface StandardSchema<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1;
    /** The library that made the schema (`zod`, `valibot`, `arktype`). */
    readonly vendor: string;
    /** Checks a value: the result at once, or a Promise of it (a schema with async checks). */
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    /** Where the schema's input and output types are read from; never present at run time. */
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  };
}

/** What checks a tool's arguments or an agent's output: an io-ts codec or a Standard Schema. */
export type Schema<A = unknown> = t.Decoder<unknown, A> | StandardSchema<unknown, A>;

/** The type a Standard Schema gives when a value passes it. */
export type StandardOutput<S extends StandardSchema> = NonNullable<S['~standard']['types']>['output'];

/** What a schema checks a value into: io-ts's decoded type, or a Standard Schema's output. */
export type SchemaOutput<S> = S extends StandardSchema ? StandardOutput<S> : S extends t.Decoder<unknown, infer A> ? A : unknown;

/**
 * True for a Standard Schema (version 1). Looked at before io-ts's `decode`, since a zod 4 schema
 * has a `decode` method too. An arktype schema is a function, so functions are looked at as well.
 */
export function isStandardSchema(value: unknown): value is StandardSchema {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  const props = (value as { readonly '~standard'?: unknown })['~standard'];
  return props !== null && typeof props === 'object' && (props as { version?: unknown }).version === 1 && typeof (props as { validate?: unknown }).validate === 'function';
}

/** True for an io-ts decoder (anything with a `decode` function that is not a Standard Schema). */
export function isCodec(value: unknown): value is t.Decoder<unknown, unknown> {
  return !isStandardSchema(value) && value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { decode?: unknown }).decode === 'function';
}

/** A check's verdict: the value, or what failed (`args.q: expected string, got 42; ...`). */
export type Checked = Either<string, unknown>;

/**
 * Checks `value` with `schema`. An io-ts codec, and a Standard Schema that answers at once, give
 * their verdict at once; a Standard Schema whose `validate` returns a Promise gives a Promise,
 * which never rejects (a throw or a rejection is a failure naming it). `root` prefixes every path.
 */
export function check(schema: Schema, value: unknown, root: string): Checked | Promise<Checked> {
  if (!isStandardSchema(schema)) {
    const decoded = schema.decode(value);
    return isLeft(decoded) ? left(describeFailures(decoded.left, root)) : decoded;
  }
  let result: StandardResult<unknown> | Promise<StandardResult<unknown>>;
  try {
    result = schema['~standard'].validate(value);
  } catch (error) {
    return left(thrown(schema, root, error));
  }
  if (!isThenable(result)) return verdict(result, value, root);
  return Promise.resolve(result).then(
    (settled) => verdict(settled, value, root),
    (error: unknown) => left(thrown(schema, root, error)),
  );
}

function isThenable<T>(value: T | Promise<T>): value is Promise<T> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function';
}

function thrown(schema: StandardSchema, root: string, error: unknown): string {
  return `${root}: the ${schema['~standard'].vendor} schema threw while checking (${toErrorInfo(error).message})`;
}

function verdict(result: StandardResult<unknown>, value: unknown, root: string): Checked {
  if (result === null || typeof result !== 'object') return left(`${root}: the schema answered ${describeValue(result)}, not a result`);
  const { issues } = result;
  if (issues === undefined || issues === null) return right((result as { value: unknown }).value);
  return left(describeIssues(issues, value, root));
}

/**
 * The issues in the form io-ts failures take: `args.q: expected string, got 42`, one clause an
 * issue, joined with "; ". The expectation is the issue's own `expected` when the library gives
 * one (zod, valibot and arktype do for a wrong type), otherwise its message; what came is read
 * from the checked value at the issue's path.
 */
export function describeIssues(issues: ReadonlyArray<StandardIssue>, value: unknown, root: string): string {
  const clauses: string[] = [];
  for (const issue of issues) {
    const keys = (issue.path ?? []).map((segment) => (segment !== null && typeof segment === 'object' ? segment.key : segment));
    const path = [root, ...keys.map(String)].filter((key) => key !== '').join('.');
    const { expected } = issue as { expected?: unknown };
    const what = typeof expected === 'string' && expected !== '' ? `expected ${expected}` : issue.message;
    const clause = `${path === '' ? '(the value)' : path}: ${what}, got ${describeValue(at(value, keys))}`;
    if (!clauses.includes(clause)) clauses.push(clause);
  }
  return clauses.length === 0 ? `${root}: the schema refused the value without saying why` : clauses.join('; ');
}

// The value at `keys` inside `value`, or undefined where there is none.
function at(value: unknown, keys: readonly PropertyKey[]): unknown {
  let here = value;
  for (const key of keys) {
    if (here === null || typeof here !== 'object') return undefined;
    here = Object.prototype.hasOwnProperty.call(here, key) ? (here as Record<PropertyKey, unknown>)[key] : undefined;
  }
  return here;
}

/** Why a Standard Schema cannot be shown to a model, or the JSON Schema of its input. */
export type Described = { readonly schema: unknown } | { readonly missing: string };

/**
 * The JSON Schema of what a Standard Schema accepts (its input), from the schema's own converter:
 * the Standard JSON Schema interface (`~standard.jsonSchema.input`, zod 4.2+ and arktype), or a
 * zod 4 schema's `toJSONSchema()` method. `missing` says why there is none (no converter, or the
 * converter refused: a type JSON Schema cannot express).
 */
export function describeStandard(schema: StandardSchema): Described {
  const props = schema['~standard'] as { readonly jsonSchema?: { readonly input?: unknown } };
  const converter = props.jsonSchema?.input;
  const own = (schema as { readonly toJSONSchema?: unknown }).toJSONSchema;
  try {
    if (typeof converter === 'function') return { schema: (converter as (options: { target: string }) => unknown).call(props.jsonSchema, { target: 'draft-2020-12' }) };
    if (typeof own === 'function') return { schema: (own as (options: { io: string }) => unknown).call(schema, { io: 'input' }) };
  } catch (error) {
    return { missing: `its JSON Schema converter refused it (${toErrorInfo(error).message})` };
  }
  return { missing: `the ${schema['~standard'].vendor} schema has no JSON Schema converter (no ~standard.jsonSchema)` };
}

/**
 * A schema's name, as a fingerprint records it: an io-ts codec's own name; a Standard Schema's
 * vendor, with the JSON Schema of what it accepts when its library gives one (so a changed schema
 * changes the name).
 */
export function schemaName(schema: Schema): string {
  if (!isStandardSchema(schema)) return schema.name;
  const described = describeStandard(schema);
  let shape: string | undefined;
  try {
    shape = 'schema' in described ? JSON.stringify(described.schema) : undefined;
  } catch {
    shape = undefined;
  }
  return shape === undefined ? `${schema['~standard'].vendor} schema` : `${schema['~standard'].vendor} ${shape}`;
}
