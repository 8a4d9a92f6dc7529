import { expect } from 'chai';
import * as t from 'io-ts';
import { toJsonSchema, type JsonSchema } from '../../lib/tools/jsonSchema.js';

type Case = { readonly title: string; readonly codec: t.Mixed; readonly schema: JsonSchema };

const anyObject: JsonSchema = { type: 'object', additionalProperties: true };

// A custom codec that is none of io-ts's own kinds, so nothing can be said about its shape.
const Opaque = new t.Type<string, string, unknown>(
  'Opaque',
  (u): u is string => typeof u === 'string',
  (u, c) => (typeof u === 'string' ? t.success(u) : t.failure(u, c)),
  t.identity,
);

// A custom codec that decodes a missing value to a default, so its key may be left out.
const WithDefault = new t.Type<number, number, unknown>(
  'WithDefault',
  (u): u is number => typeof u === 'number',
  (u, c) => (u === undefined ? t.success(0) : t.number.validate(u, c)),
  t.identity,
);

interface PositiveBrand {
  readonly Positive: unique symbol;
}
const Positive = t.brand(t.number, (n): n is t.Branded<number, PositiveBrand> => n > 0, 'Positive');

type Tree = { readonly value: number; readonly children: readonly Tree[] };
const Tree: t.Type<Tree> = t.recursion('Tree', (self) => t.type({ value: t.number, children: t.readonlyArray(self) }));

/** Cases whose codec is shown as the value of an optional property `v`. */
const valueCases: readonly Case[] = [
  { title: 't.string', codec: t.string, schema: { type: 'string' } },
  { title: 't.number', codec: t.number, schema: { type: 'number' } },
  { title: 't.boolean', codec: t.boolean, schema: { type: 'boolean' } },
  { title: 't.null', codec: t.null, schema: { type: 'null' } },
  { title: 't.undefined', codec: t.undefined, schema: {} },
  { title: 't.void', codec: t.void, schema: {} },
  { title: 't.unknown', codec: t.unknown, schema: {} },
  { title: 't.any', codec: t.any, schema: {} },
  { title: 't.Function', codec: t.Function, schema: {} },
  { title: 'an opaque custom codec', codec: Opaque, schema: {} },
  { title: 't.UnknownArray', codec: t.UnknownArray, schema: { type: 'array' } },
  { title: 't.UnknownRecord', codec: t.UnknownRecord, schema: { type: 'object' } },
  { title: 't.object', codec: t.object, schema: { type: 'object' } },
  { title: 'a string literal', codec: t.literal('on'), schema: { type: 'string', const: 'on' } },
  { title: 'a number literal', codec: t.literal(3), schema: { type: 'number', const: 3 } },
  { title: 'a boolean literal', codec: t.literal(true), schema: { type: 'boolean', const: true } },
  { title: 't.keyof', codec: t.keyof({ a: null, b: null }), schema: { type: 'string', enum: ['a', 'b'] } },
  {
    title: 'a union of string literals',
    codec: t.union([t.literal('asc'), t.literal('desc')]),
    schema: { type: 'string', enum: ['asc', 'desc'] },
  },
  {
    title: 'a union of literals of mixed types',
    codec: t.union([t.literal('auto'), t.literal(1), t.literal(false)]),
    schema: { enum: ['auto', 1, false] },
  },
  {
    title: 'a nullable codec',
    codec: t.union([t.string, t.null]),
    schema: { anyOf: [{ type: 'string' }, { type: 'null' }] },
  },
  {
    title: 'a nullable union of literals',
    codec: t.union([t.literal('a'), t.literal('b'), t.null]),
    schema: { anyOf: [{ type: 'string', enum: ['a', 'b'] }, { type: 'null' }] },
  },
  {
    title: 'a union of other codecs',
    codec: t.union([t.string, t.number, t.type({ x: t.number })]),
    schema: {
      anyOf: [
        { type: 'string' },
        { type: 'number' },
        { type: 'object', properties: { x: { type: 'number' } }, required: ['x'], additionalProperties: true },
      ],
    },
  },
  { title: 'a union with t.undefined, without it', codec: t.union([t.number, t.undefined]), schema: { type: 'number' } },
  { title: 't.array', codec: t.array(t.string), schema: { type: 'array', items: { type: 'string' } } },
  {
    title: 't.readonlyArray',
    codec: t.readonlyArray(t.number),
    schema: { type: 'array', items: { type: 'number' } },
  },
  { title: 't.readonly, as its inner codec', codec: t.readonly(t.array(t.boolean)), schema: { type: 'array', items: { type: 'boolean' } } },
  {
    title: 't.tuple',
    codec: t.tuple([t.string, t.number]),
    schema: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }], minItems: 2, maxItems: 2 },
  },
  {
    title: 't.record over t.string',
    codec: t.record(t.string, t.number),
    schema: { type: 'object', additionalProperties: { type: 'number' } },
  },
  {
    title: 't.record over t.keyof',
    codec: t.record(t.keyof({ x: null, y: null }), t.number),
    schema: {
      type: 'object',
      properties: { x: { type: 'number' }, y: { type: 'number' } },
      required: ['x', 'y'],
      additionalProperties: false,
    },
  },
  {
    title: 't.record over a union of literals',
    codec: t.record(t.union([t.literal('a'), t.literal('b')]), t.string),
    schema: {
      type: 'object',
      properties: { a: { type: 'string' }, b: { type: 'string' } },
      required: ['a', 'b'],
      additionalProperties: false,
    },
  },
  {
    title: 't.record over a finite domain whose values may be absent',
    codec: t.record(t.keyof({ x: null }), t.union([t.number, t.undefined])),
    schema: { type: 'object', properties: { x: { type: 'number' } }, additionalProperties: false },
  },
  { title: 't.Int', codec: t.Int, schema: { type: 'integer' } },
  { title: 'an array of t.Int', codec: t.array(t.Int), schema: { type: 'array', items: { type: 'integer' } } },
  { title: 'a brand, as its underlying type', codec: Positive, schema: { type: 'number' } },
  {
    title: 'a refinement, as its underlying type',
    codec: t.refinement(t.string, (s) => s.length > 0, 'NonEmpty'),
    schema: { type: 'string' },
  },
  {
    title: 'an intersection of non-objects, as allOf',
    codec: t.intersection([t.string, Opaque]),
    schema: { allOf: [{ type: 'string' }, {}] },
  },
  {
    title: 'an intersection with a non-object member, as allOf',
    codec: t.intersection([t.type({ a: t.string }), t.record(t.string, t.string)]),
    schema: {
      allOf: [
        { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: true },
        { type: 'object', additionalProperties: { type: 'string' } },
      ],
    },
  },
  {
    title: 'a recursive codec, expanded once',
    codec: Tree,
    schema: {
      type: 'object',
      properties: { value: { type: 'number' }, children: { type: 'array', items: {} } },
      required: ['value', 'children'],
      additionalProperties: true,
    },
  },
];

/** Cases whose codec is the whole of a tool's arguments. */
const topLevelCases: ReadonlyArray<{ readonly title: string; readonly codec: t.Mixed | undefined; readonly schema: JsonSchema }> = [
  { title: 'no codec, as any object', codec: undefined, schema: anyObject },
  { title: 'an opaque codec, as any object', codec: Opaque, schema: anyObject },
  { title: 'a non-object codec, as any object', codec: t.string, schema: anyObject },
  { title: 'a union of objects, as any object', codec: t.union([t.type({ a: t.string }), t.type({ b: t.string })]), schema: anyObject },
  { title: 'a nullable object, as any object', codec: t.union([t.type({ a: t.string }), t.null]), schema: anyObject },
  { title: 't.UnknownRecord', codec: t.UnknownRecord, schema: { type: 'object' } },
  {
    title: 't.type, every key required',
    codec: t.type({ path: t.string, line: t.number }),
    schema: {
      type: 'object',
      properties: { path: { type: 'string' }, line: { type: 'number' } },
      required: ['path', 'line'],
      additionalProperties: true,
    },
  },
  {
    title: 't.type, optional through a union with t.undefined',
    codec: t.type({ path: t.string, line: t.union([t.number, t.undefined]), note: t.union([t.string, t.null, t.undefined]) }),
    schema: {
      type: 'object',
      properties: {
        path: { type: 'string' },
        line: { type: 'number' },
        note: { anyOf: [{ type: 'string' }, { type: 'null' }] },
      },
      required: ['path'],
      additionalProperties: true,
    },
  },
  {
    title: 't.type, optional where the codec decodes a missing value',
    codec: t.type({ anything: t.unknown, count: WithDefault, name: t.string }),
    schema: {
      type: 'object',
      properties: { anything: {}, count: {}, name: { type: 'string' } },
      required: ['name'],
      additionalProperties: true,
    },
  },
  {
    title: 't.partial, no key required',
    codec: t.partial({ limit: t.number, cursor: t.string }),
    schema: { type: 'object', properties: { limit: { type: 'number' }, cursor: { type: 'string' } }, additionalProperties: true },
  },
  {
    title: 't.exact, closed',
    codec: t.exact(t.type({ id: t.string })),
    schema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false },
  },
  {
    title: 't.strict, closed',
    codec: t.strict({ id: t.string }),
    schema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false },
  },
  {
    title: 't.exact of a partial, closed',
    codec: t.exact(t.partial({ id: t.string })),
    schema: { type: 'object', properties: { id: { type: 'string' } }, additionalProperties: false },
  },
  {
    title: 't.intersection of t.type and t.partial, merged',
    codec: t.intersection([t.type({ query: t.string }), t.partial({ limit: t.number })]),
    schema: {
      type: 'object',
      properties: { query: { type: 'string' }, limit: { type: 'number' } },
      required: ['query'],
      additionalProperties: true,
    },
  },
  {
    title: 't.intersection of exact members, merged and closed',
    codec: t.intersection([t.exact(t.type({ query: t.string })), t.exact(t.partial({ limit: t.number }))]),
    schema: {
      type: 'object',
      properties: { query: { type: 'string' }, limit: { type: 'number' } },
      required: ['query'],
      additionalProperties: false,
    },
  },
  {
    title: 't.intersection with one exact member, merged and open',
    codec: t.intersection([t.exact(t.type({ query: t.string })), t.partial({ limit: t.number })]),
    schema: {
      type: 'object',
      properties: { query: { type: 'string' }, limit: { type: 'number' } },
      required: ['query'],
      additionalProperties: true,
    },
  },
  {
    title: 't.exact of an intersection, merged and closed',
    codec: t.exact(t.intersection([t.type({ a: t.string }), t.partial({ b: t.number })])),
    schema: {
      type: 'object',
      properties: { a: { type: 'string' }, b: { type: 'number' } },
      required: ['a'],
      additionalProperties: false,
    },
  },
  {
    title: 't.intersection naming one key twice, merged with allOf for it',
    codec: t.intersection([t.type({ a: t.string }), t.partial({ a: t.literal('x'), b: t.string })]),
    schema: {
      type: 'object',
      properties: { a: { allOf: [{ type: 'string' }, { type: 'string', const: 'x' }] }, b: { type: 'string' } },
      required: ['a'],
      additionalProperties: true,
    },
  },
  {
    title: 'nested objects',
    codec: t.type({ range: t.type({ start: t.Int, end: t.partial({ line: t.Int }) }), tags: t.array(t.type({ name: t.string })) }),
    schema: {
      type: 'object',
      properties: {
        range: {
          type: 'object',
          properties: {
            start: { type: 'integer' },
            end: { type: 'object', properties: { line: { type: 'integer' } }, additionalProperties: true },
          },
          required: ['start', 'end'],
          additionalProperties: true,
        },
        tags: {
          type: 'array',
          items: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'], additionalProperties: true },
        },
      },
      required: ['range', 'tags'],
      additionalProperties: true,
    },
  },
  {
    title: 't.record over t.string',
    codec: t.record(t.string, t.boolean),
    schema: { type: 'object', additionalProperties: { type: 'boolean' } },
  },
  {
    title: 't.readonly of t.type, as its inner codec',
    codec: t.readonly(t.type({ a: t.string })),
    schema: { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: true },
  },
  {
    title: 'a refinement of t.type, as its inner codec',
    codec: t.refinement(t.type({ a: t.number }), (o) => o.a > 0, 'PositiveA'),
    schema: { type: 'object', properties: { a: { type: 'number' } }, required: ['a'], additionalProperties: true },
  },
  {
    title: 'a recursive codec, expanded once',
    codec: Tree,
    schema: {
      type: 'object',
      properties: { value: { type: 'number' }, children: { type: 'array', items: {} } },
      required: ['value', 'children'],
      additionalProperties: true,
    },
  },
];

describe('toJsonSchema', () => {
  describe('a value inside the arguments', () => {
    for (const c of valueCases) {
      it(c.title, () => {
        expect(toJsonSchema(t.partial({ v: c.codec }))).to.deep.equal({
          type: 'object',
          properties: { v: c.schema },
          additionalProperties: true,
        });
      });
    }
  });

  describe('the arguments as a whole', () => {
    for (const c of topLevelCases) {
      it(c.title, () => {
        expect(toJsonSchema(c.codec)).to.deep.equal(c.schema);
      });
    }
  });

  describe('output', () => {
    const Args = t.intersection([
      t.type({ zeta: t.string, alpha: t.union([t.literal('a'), t.literal('b')]), mid: Tree }),
      t.partial({ beta: t.tuple([t.Int, t.union([t.string, t.null])]), gamma: t.record(t.string, t.unknown) }),
    ]);

    it('is the same on every call', () => {
      expect(toJsonSchema(Args)).to.deep.equal(toJsonSchema(Args));
      expect(JSON.stringify(toJsonSchema(Args))).to.equal(JSON.stringify(toJsonSchema(Args)));
    });

    it('round-trips through JSON', () => {
      const schema = toJsonSchema(Args);
      expect(JSON.parse(JSON.stringify(schema))).to.deep.equal(schema);
    });

    it('keeps properties in declaration order', () => {
      expect(Object.keys(toJsonSchema(Args)['properties'] ?? {})).to.deep.equal(['zeta', 'alpha', 'mid', 'beta', 'gamma']);
    });

    it('has no $schema and no description', () => {
      expect(JSON.stringify(toJsonSchema(Args))).not.to.match(/"\$schema"|"description"/);
    });
  });
});

describe('toJsonSchema with codecs from another copy of io-ts', () => {
  // A copy of a codec that shares its fields but not its prototype: what a second io-ts beside
  // the library's (an app's own, a linked clone's) makes. instanceof fails on it; _tag does not.
  const foreign = <C extends object>(codec: C): C => Object.assign(Object.create({}) as object, codec) as C;

  it('still gives the model the fields of a t.type made by another io-ts', () => {
    const codec = foreign(t.type({ city: foreign(t.string), nights: foreign(t.number) }));
    expect(codec instanceof t.InterfaceType).to.equal(false);
    expect(toJsonSchema(codec)).to.deep.include({ type: 'object', required: ['city', 'nights'] });
    expect(toJsonSchema(codec).properties).to.deep.equal({ city: { type: 'string' }, nights: { type: 'number' } });
  });
});
