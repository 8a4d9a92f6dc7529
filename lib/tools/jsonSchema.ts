// Derives the JSON Schema a model provider is shown for a tool's arguments from the tool's
// io-ts codec, so the codec that checks the model's arguments is also the one place that
// describes them, and the two cannot drift apart.
import * as t from 'io-ts';

// A codec's kind, by io-ts's own `_tag` rather than `instanceof`: a codec made with another copy
// of io-ts (an app's, beside the library's) is still recognised, and the model still sees its fields.
function isTag<C>(codec: unknown, tag: string): codec is C {
  return (codec as { readonly _tag?: unknown })._tag === tag;
}

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
  if (isTag<t.StringType>(codec, 'StringType')) return { type: 'string' };
  if (isTag<t.NumberType>(codec, 'NumberType')) return { type: 'number' };
  if (isTag<t.BooleanType>(codec, 'BooleanType')) return { type: 'boolean' };
  if (isTag<t.NullType>(codec, 'NullType')) return { type: 'null' };
  if (isTag<t.LiteralType<string | number | boolean>>(codec, 'LiteralType')) return literalSchema(codec.value);
  if (isTag<t.KeyofType<Record<string, unknown>>>(codec, 'KeyofType')) return { type: 'string', enum: Object.keys(codec.keys) };
  if (isTag<t.AnyArrayType>(codec, 'AnyArrayType')) return { type: 'array' };
  if (isTag<t.AnyDictionaryType>(codec, 'AnyDictionaryType') || isTag<t.ObjectType>(codec, 'ObjectType')) return { type: 'object' };
  if (isTag<t.InterfaceType<t.Props>>(codec, 'InterfaceType')) return propsSchema(codec.props, true, expanding);
  if (isTag<t.PartialType<t.Props>>(codec, 'PartialType')) return propsSchema(codec.props, false, expanding);
  if (isTag<t.StrictType<t.Props>>(codec, 'StrictType')) return closed(propsSchema(codec.props, true, expanding));
  if (isTag<t.ExactType<t.Mixed>>(codec, 'ExactType')) return closed(schemaOf(codec.type, expanding));
  if (isTag<t.ArrayType<t.Mixed>>(codec, 'ArrayType') || isTag<t.ReadonlyArrayType<t.Mixed>>(codec, 'ReadonlyArrayType')) {
    return { type: 'array', items: schemaOf(codec.type, expanding) };
  }
  if (isTag<t.TupleType<[t.Mixed, ...t.Mixed[]]>>(codec, 'TupleType')) return tupleSchema(codec.types, expanding);
  if (isTag<t.DictionaryType<t.Mixed, t.Mixed>>(codec, 'DictionaryType')) return recordSchema(codec.domain, codec.codomain, expanding);
  if (isTag<t.UnionType<[t.Mixed, t.Mixed, ...t.Mixed[]]>>(codec, 'UnionType')) return unionSchema(codec.types, expanding);
  if (isTag<t.IntersectionType<[t.Mixed, t.Mixed, ...t.Mixed[]]>>(codec, 'IntersectionType')) return intersectionSchema(codec.types, expanding);
  if (isTag<t.RefinementType<t.Mixed>>(codec, 'RefinementType') || isTag<t.ReadonlyType<t.Mixed>>(codec, 'ReadonlyType')) return schemaOf(codec.type, expanding);
  if (isTag<t.RecursiveType<t.Mixed>>(codec, 'RecursiveType')) return recursiveSchema(codec, codec.type, expanding);
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
  if (isTag<t.LiteralType<string | number | boolean>>(domain, 'LiteralType')) return typeof domain.value === 'string' ? [domain.value] : undefined;
  if (isTag<t.KeyofType<Record<string, unknown>>>(domain, 'KeyofType')) return Object.keys(domain.keys);
  if (!(isTag<t.UnionType<[t.Mixed, t.Mixed, ...t.Mixed[]]>>(domain, 'UnionType'))) return undefined;
  const parts = (domain.types as readonly Codec[]).map(domainKeys);
  return parts.every((part) => part !== undefined) ? unique(parts.flat()) : undefined;
}

function unionSchema(types: readonly Codec[], expanding: Expanding): JsonSchema {
  const present = types.filter((codec) => !(isTag<t.UndefinedType>(codec, 'UndefinedType') || isTag<t.VoidType>(codec, 'VoidType')));
  if (present.length === 0) return {};
  if (present.length === 1) return schemaOf(present[0]!, expanding);
  const nonNull = present.filter((codec) => !(isTag<t.NullType>(codec, 'NullType')));
  const enumerated = nonNull.length > 1 ? enumSchema(nonNull) : undefined;
  if (enumerated === undefined) return { anyOf: present.map((codec) => schemaOf(codec, expanding)) };
  return nonNull.length === present.length ? enumerated : { anyOf: [enumerated, { type: 'null' }] };
}

/** One `enum` reads better to a model than an `anyOf` of `const`s; undefined unless every codec is a literal. */
function enumSchema(codecs: readonly Codec[]): JsonSchema | undefined {
  const values: Array<string | number | boolean> = [];
  for (const codec of codecs) {
    if (isTag<t.LiteralType<string | number | boolean>>(codec, 'LiteralType')) values.push(codec.value);
    else if (isTag<t.KeyofType<Record<string, unknown>>>(codec, 'KeyofType')) values.push(...Object.keys(codec.keys));
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
