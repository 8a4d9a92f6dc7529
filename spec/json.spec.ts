// The one JSON form (lib/json.ts): what each value JSON cannot carry as it is becomes, that
// JSON.stringify writes the form exactly, and where and why a value that has none fails.
import { expect } from 'chai';
import fc from 'fast-check';
import { JsonFormError } from '../lib/index.js';
import { jsonForm, jsonText } from '../lib/json.js';
import { seed } from './reliability/seed.js';

function failure(value: unknown): JsonFormError {
  try {
    jsonForm(value);
  } catch (error) {
    expect(error).to.be.instanceOf(JsonFormError);
    return error as JsonFormError;
  }
  throw new Error('expected a JsonFormError');
}

describe('jsonForm', () => {
  const cases: Array<[string, unknown, unknown]> = [
    ['a string is itself', 'text', 'text'],
    ['a finite number is itself', -0.5, -0.5],
    ['NaN is null', NaN, null],
    ['Infinity is null', Infinity, null],
    ['undefined is null', undefined, null],
    ['a BigInt is its digits', -(2n ** 64n), '-18446744073709551616'],
    ['a Date is its ISO text', new Date(Date.UTC(2026, 4, 1, 12)), '2026-05-01T12:00:00.000Z'],
    ['an invalid Date is null', new Date('never'), null],
    ['a Map is its [key, value] pairs, keys converted too', new Map<unknown, unknown>([[{ id: 1 }, 'a'], [2n, undefined]]), [[{ id: 1 }, 'a'], ['2', null]]],
    ['a Set is its values', new Set([1, 'two', 3n]), [1, 'two', '3']],
    ['boxed primitives are the primitives', [Object('s'), Object(1), Object(false), Object(4n)], ['s', 1, false, '4']],
    ['undefined, functions and symbols drop their key', { a: undefined, b: () => 1, c: Symbol('c'), d: 1 }, { d: 1 }],
    ['... and are null in an array, as are holes', [undefined, () => 1, Symbol('c'), , 5], [null, null, null, null, 5]],
    ['toJSON is honoured, with its key', { when: { toJSON: (key: string) => `at ${key}` } }, { when: 'at when' }],
    ['a toJSON answering undefined at the top is null', { toJSON: () => undefined }, null],
    ['a class instance is its own enumerable fields', new (class Point { constructor(readonly x = 1, readonly y = 2) {} })(), { x: 1, y: 2 }],
    ['symbol keys are left out', { [Symbol('hidden')]: 1, shown: 2 }, { shown: 2 }],
  ];
  for (const [title, value, form] of cases) {
    it(title, () => {
      expect(jsonForm(value)).to.deep.equal(form);
    });
  }

  it('keeps a __proto__ key a key, and pollutes nothing', () => {
    const form = jsonForm(JSON.parse('{"__proto__":{"polluted":true},"a":1}')) as Record<string, unknown>;
    expect(Object.keys(form)).to.deep.equal(['__proto__', 'a']);
    expect(Object.getPrototypeOf(form)).to.equal(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
  });

  it('makes a deeply frozen copy, reading each getter once', () => {
    let reads = 0;
    const value = { items: [{ get n(): number { return ++reads; } }] };
    const form = jsonForm(value) as { items: Array<{ n: number }> };
    expect(form).to.deep.equal({ items: [{ n: 1 }] });
    expect(form).to.not.equal(value);
    expect(Object.isFrozen(form) && Object.isFrozen(form.items) && Object.isFrozen(form.items[0])).to.equal(true);
    JSON.stringify(form);
    expect(reads).to.equal(1);
  });

  const failures: Array<[string, () => unknown, string, string]> = [
    ['a cycle', () => {
      const loop: Record<string, unknown> = { list: [{}] };
      (loop.list as Array<Record<string, unknown>>)[0]!.back = loop;
      return loop;
    }, 'list.0.back', 'a circular reference'],
    ['a Map holding itself', () => {
      const map = new Map<string, unknown>();
      map.set('me', map);
      return map;
    }, '0.1', 'a circular reference'],
    ['a getter that throws', () => ({ a: { get b(): number { throw new Error('no b'); } } }), 'a.b', 'no b'],
    ['a toJSON that throws', () => ({ toJSON: () => { throw new Error('no json'); } }), '', 'no json'],
    ['a Proxy whose get trap throws', () => ({ p: new Proxy({}, { get: () => { throw new Error('trap'); } }) }), 'p', 'trap'],
    ['a function as the whole value', () => () => 1, '', 'a function is not JSON'],
    ['a symbol as the whole value', () => Symbol('s'), '', 'a symbol is not JSON'],
  ];
  for (const [title, make, path, reason] of failures) {
    it(`refuses ${title} with a JsonFormError naming where (${path === '' ? 'the whole value' : path}) and why`, () => {
      const error = failure(make());
      expect(error).to.include({ path, reason, message: path === '' ? reason : `${path}: ${reason}` });
    });
  }

  it('refuses nesting deeper than 1000 levels, with the path shortened in the message', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 1000; i++) deep = [deep];
    expect(jsonText(deep)).to.have.length(2001);
    const error = failure([deep]);
    expect(error.reason).to.equal('nested more than 1000 levels deep');
    expect(error.path.split('.')).to.have.length(1000);
    expect(error.message.length).to.be.below(160);
  });

  it('gives JSON.stringify a value it writes exactly and never throws on (property)', () => {
    fc.assert(
      fc.property(fc.anything({ withBigInt: true, withDate: true, withMap: true, withSet: true, withNullPrototype: true, withBoxedValues: true, withSparseArray: true, withTypedArray: true }), (value) => {
        const form = jsonForm(value);
        const text = JSON.stringify(form);
        expect(JSON.parse(text)).to.deep.equal(form);
        expect(jsonText(value)).to.equal(text);
      }),
      { numRuns: 300, seed },
    );
  });
});
