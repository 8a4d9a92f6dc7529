// Derives the JSON Schema a model provider is shown for a tool's arguments from the tool's
// io-ts codec, so the codec that checks the model's arguments is also the one place that
// describes them, and the two cannot drift apart.
import * as t from 'io-ts';

/** Any value JSON can carry. */
export type JsonValue = string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/** A JSON Schema (draft 2020-12 vocabulary), as plain JSON. */
export type JsonSchema = { readonly [key: string]: JsonValue };

type Codec = t.Decoder<unknown, unknown>;

/** The recursive codecs whose definition is being expanded on the current path. */
type Expanding = ReadonlySet<Codec>;

/** An object schema taken apart, so exactness and intersections can be applied to it. */
type ObjectShape = {
  readonly properties: ReadonlyArray<readonly [string, JsonSchema]>;
  readonly required: readonly string[];
  readonly additionalProperties: boolean;
};

const OBJECT_SHAPE_KEYS: ReadonlySet<string> = new Set(['type', 'properties', 'required', 'additionalProperties']);

/**
 * The JSON Schema for a tool's arguments, derived from the tool's codec.
 *
 * Providers require tool parameters to be an object schema, so the top level always is one:
 * with no codec (a tool that declares no args), or with a codec whose schema is not
 * `type: 'object'` (an opaque custom `t.Type`, a string, a union, an intersection that cannot be
 * merged...), the result is the permissive `{ type: 'object', additionalProperties: true }` and
 * the codec alone judges the arguments when they arrive.
 *
 * Below the top level an opaque codec gives `{}`: accepting what we cannot describe is better
 * than describing it wrongly, since the codec still decodes the real value. No `description`s
 * are added because a codec carries none, and inventing them would mislead the model. The
 * output is deterministic (properties in declaration order) and plain JSON.
 */
export function toJsonSchema(codec: Codec | undefined): JsonSchema {
  const schema = codec === undefined ? undefined : schemaOf(codec, new Set());
  return schema?.['type'] === 'object' ? schema : { type: 'object', additionalProperties: true };
}

function schemaOf(codec: Codec, expanding: Expanding): JsonSchema {
  // t.Int (and the older t.Integer) are refinements of number: check them before refinements in general.
  if (codec === t.Int || codec === t.Integer) return { type: 'integer' };
  if (codec instanceof t.StringType) return { type: 'string' };
  if (codec instanceof t.NumberType) return { type: 'number' };
  if (codec instanceof t.BooleanType) return { type: 'boolean' };
  if (codec instanceof t.NullType) return { type: 'null' };
  if (codec instanceof t.LiteralType) return literalSchema(codec.value);
  if (codec instanceof t.KeyofType) return { type: 'string', enum: Object.keys(codec.keys) };
  if (codec instanceof t.AnyArrayType) return { type: 'array' };
  if (codec instanceof t.AnyDictionaryType || codec instanceof t.ObjectType) return { type: 'object' };
  if (codec instanceof t.InterfaceType) return propsSchema(codec.props, true, expanding);
  if (codec instanceof t.PartialType) return propsSchema(codec.props, false, expanding);
  if (codec instanceof t.StrictType) return closed(propsSchema(codec.props, true, expanding));
  if (codec instanceof t.ExactType) return closed(schemaOf(codec.type, expanding));
  if (codec instanceof t.ArrayType || codec instanceof t.ReadonlyArrayType) {
    return { type: 'array', items: schemaOf(codec.type, expanding) };
  }
  if (codec instanceof t.TupleType) return tupleSchema(codec.types, expanding);
  if (codec instanceof t.DictionaryType) return recordSchema(codec.domain, codec.codomain, expanding);
  if (codec instanceof t.UnionType) return unionSchema(codec.types, expanding);
  if (codec instanceof t.IntersectionType) return intersectionSchema(codec.types, expanding);
  if (codec instanceof t.RefinementType || codec instanceof t.ReadonlyType) return schemaOf(codec.type, expanding);
  if (codec instanceof t.RecursiveType) return recursiveSchema(codec, codec.type, expanding);
  // undefined/void (JSON cannot carry them; absence is expressed through `required`), unknown,
  // any, never, bigint, functions and opaque custom codecs.
  return {};
}

function literalSchema(value: string | number | boolean): JsonSchema {
  return { type: jsonTypeOf(value), const: value };
}

function jsonTypeOf(value: string | number | boolean): 'string' | 'number' | 'boolean' {
  return typeof value === 'string' ? 'string' : typeof value === 'number' ? 'number' : 'boolean';
}

function propsSchema(props: t.Props, keysRequired: boolean, expanding: Expanding): JsonSchema {
  const keys = Object.keys(props);
  return renderShape({
    properties: keys.map((key) => [key, schemaOf(props[key]!, expanding)] as const),
    required: keysRequired ? keys.filter((key) => !mayBeAbsent(props[key]!)) : [],
    additionalProperties: true,
  });
}

/**
 * io-ts validates a missing key as `undefined`, so a key may be left out exactly when its codec
 * decodes `undefined`: a union with `t.undefined`, `t.unknown`, a codec with a default...
 * A codec that throws on the probe is taken to need its key.
 */
function mayBeAbsent(codec: Codec): boolean {
  try {
    return codec.decode(undefined)._tag === 'Right';
  } catch {
    return false;
  }
}

/** Exact codecs strip unknown keys, so the model should not be invited to send any. */
function closed(schema: JsonSchema): JsonSchema {
  const shape = asObjectShape(schema);
  return shape === undefined ? schema : renderShape({ ...shape, additionalProperties: false });
}

function tupleSchema(types: readonly Codec[], expanding: Expanding): JsonSchema {
  return {
    type: 'array',
    prefixItems: types.map((codec) => schemaOf(codec, expanding)),
    minItems: types.length,
    maxItems: types.length,
  };
}

function recordSchema(domain: Codec, codomain: Codec, expanding: Expanding): JsonSchema {
  const keys = domainKeys(domain);
  if (keys === undefined) return { type: 'object', additionalProperties: schemaOf(codomain, expanding) };
  // io-ts builds a record over a finite domain from t.strict, so it behaves like an exact t.type.
  return renderShape({
    properties: keys.map((key) => [key, schemaOf(codomain, expanding)] as const),
    required: mayBeAbsent(codomain) ? [] : keys,
    additionalProperties: false,
  });
}

/** The keys of a finite record domain, found the way io-ts's `record` finds them; undefined if infinite. */
function domainKeys(domain: Codec): readonly string[] | undefined {
  if (domain instanceof t.LiteralType) return typeof domain.value === 'string' ? [domain.value] : undefined;
  if (domain instanceof t.KeyofType) return Object.keys(domain.keys);
  if (!(domain instanceof t.UnionType)) return undefined;
  const parts = (domain.types as readonly Codec[]).map(domainKeys);
  return parts.every((part) => part !== undefined) ? unique(parts.flat()) : undefined;
}

function unionSchema(types: readonly Codec[], expanding: Expanding): JsonSchema {
  const present = types.filter((codec) => !(codec instanceof t.UndefinedType || codec instanceof t.VoidType));
  if (present.length === 0) return {};
  if (present.length === 1) return schemaOf(present[0]!, expanding);
  const nonNull = present.filter((codec) => !(codec instanceof t.NullType));
  const enumerated = nonNull.length > 1 ? enumSchema(nonNull) : undefined;
  if (enumerated === undefined) return { anyOf: present.map((codec) => schemaOf(codec, expanding)) };
  return nonNull.length === present.length ? enumerated : { anyOf: [enumerated, { type: 'null' }] };
}

/** One `enum` reads better to a model than an `anyOf` of `const`s; undefined unless every codec is a literal. */
function enumSchema(codecs: readonly Codec[]): JsonSchema | undefined {
  const values: Array<string | number | boolean> = [];
  for (const codec of codecs) {
    if (codec instanceof t.LiteralType) values.push(codec.value);
    else if (codec instanceof t.KeyofType) values.push(...Object.keys(codec.keys));
    else return undefined;
  }
  const distinct = unique(values);
  const types = unique(distinct.map(jsonTypeOf));
  return types.length === 1 ? { type: types[0]!, enum: distinct } : { enum: distinct };
}

/**
 * An `allOf` of object schemas that close themselves would reject each other's keys, so object
 * members are merged into one schema; anything else stays an `allOf`.
 */
function intersectionSchema(types: readonly Codec[], expanding: Expanding): JsonSchema {
  const parts = types.map((codec) => schemaOf(codec, expanding));
  const shapes = parts.map(asObjectShape);
  if (!shapes.every((shape) => shape !== undefined)) return { allOf: parts };
  return renderShape(mergeShapes(shapes));
}

function mergeShapes(shapes: readonly ObjectShape[]): ObjectShape {
  const properties = new Map<string, JsonSchema>();
  for (const [key, schema] of shapes.flatMap((shape) => shape.properties)) {
    const earlier = properties.get(key);
    const same = earlier === undefined || JSON.stringify(earlier) === JSON.stringify(schema);
    properties.set(key, same ? schema : { allOf: [earlier, schema] });
  }
  return {
    properties: [...properties],
    required: unique(shapes.flatMap((shape) => shape.required)),
    additionalProperties: shapes.some((shape) => shape.additionalProperties),
  };
}

/** A recursive codec is expanded once; its references to itself inside that expansion give `{}`. */
function recursiveSchema(codec: Codec, definition: Codec, expanding: Expanding): JsonSchema {
  if (expanding.has(codec)) return {};
  return schemaOf(definition, new Set([...expanding, codec]));
}

function asObjectShape(schema: JsonSchema): ObjectShape | undefined {
  if (schema['type'] !== 'object' || !Object.keys(schema).every((key) => OBJECT_SHAPE_KEYS.has(key))) return undefined;
  const { properties = {}, required = [], additionalProperties = true } = schema;
  if (!isJsonObject(properties) || !isStringArray(required) || typeof additionalProperties !== 'boolean') return undefined;
  const entries = Object.entries(properties);
  if (!entries.every((entry): entry is [string, JsonSchema] => isJsonObject(entry[1]))) return undefined;
  return { properties: entries, required, additionalProperties };
}

function renderShape(shape: ObjectShape): JsonSchema {
  const properties = Object.fromEntries(shape.properties);
  return shape.required.length === 0
    ? { type: 'object', properties, additionalProperties: shape.additionalProperties }
    : { type: 'object', properties, required: shape.required, additionalProperties: shape.additionalProperties };
}

function isJsonObject(value: JsonValue): value is JsonSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isStringArray(value: JsonValue): value is readonly string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

function unique<T>(values: readonly T[]): T[] {
  return [...new Set(values)];
}
