// toErrorInfo (lib/errors.ts) is total: whatever was thrown, it gives a name and a message and
// never throws itself, and it keeps an error's status, code and attempts when they are plain.
import { expect } from 'chai';
import fc from 'fast-check';
import { BudgetExceededError, ConfigError, ProviderError, RateLimitedError } from '../lib/index.js';
import { ProviderHttpError } from '../lib/providers.js';
import { toErrorInfo } from '../lib/errorInfo.js';
import { seed } from './reliability/seed.js';

// A Proxy of `target` whose listed traps throw (each naming itself).
function hostile(target: object, traps: readonly string[]): object {
  const handler: ProxyHandler<object> = {};
  for (const trap of traps) {
    (handler as Record<string, unknown>)[trap] = () => {
      throw new Error(`${trap} trap`);
    };
  }
  return new Proxy(target, handler);
}

const trapNames = ['get', 'getPrototypeOf', 'ownKeys', 'getOwnPropertyDescriptor', 'has'] as const;

describe('toErrorInfo', () => {
  it('never throws, and always gives a string name and message, for anything thrown (property)', () => {
    const target = fc.oneof(
      fc.anything({ withBigInt: true, withDate: true, withMap: true, withSet: true, withNullPrototype: true, withBoxedValues: true }).filter((v) => v !== null && typeof v === 'object'),
      fc.string().map((m) => new Error(m)),
      fc.record({ message: fc.anything(), name: fc.anything(), status: fc.anything(), code: fc.anything(), attempts: fc.anything() }),
    ) as fc.Arbitrary<object>;
    // Recipes rather than values: fast-check reads what it generates, and a hostile value would throw at it.
    const thrown = fc.oneof(
      fc.anything({ withBigInt: true, withDate: true, withMap: true, withSet: true }).map((value) => () => value),
      fc.tuple(target, fc.subarray([...trapNames])).map(([t, traps]) => () => hostile(t, traps)),
      fc.tuple(fc.string(), fc.constantFrom('message', 'name', 'status', 'code')).map(([m, key]) => () =>
        Object.defineProperty(new Error(m), key, {
          get: () => {
            throw hostile({}, trapNames);
          },
        }),
      ),
    );
    fc.assert(
      fc.property(thrown, (make) => {
        const value: unknown = make();
        const info = toErrorInfo(value);
        expect(info.name).to.be.a('string').and.not.equal('');
        expect(info.message).to.be.a('string');
        expect(() => JSON.stringify(info)).to.not.throw();
      }),
      { numRuns: 500, seed },
    );
  });

  const cases: Array<[string, unknown, object]> = [
    ['an Error', new TypeError('bad'), { name: 'TypeError', message: 'bad' }],
    ['an Error with an empty name', Object.assign(new Error('x'), { name: '' }), { name: 'Error', message: 'x' }],
    ['an Error whose message is not a string', Object.assign(new Error(), { message: { why: 1 } }), { name: 'Error', message: '{"why":1}' }],
    ['an Error whose message getter throws', Object.defineProperty(new Error('x'), 'message', { get: () => { throw new Error('nope'); } }), { name: 'Error', message: "the error's message cannot be read (nope)" }],
    ['a revoked Proxy', (() => { const r = Proxy.revocable({}, {}); r.revoke(); return r.proxy; })(), { name: 'Error', message: "a value was thrown that cannot be read as an error (Cannot perform 'getPrototypeOf' on a proxy that has been revoked)" }],
    ['a Proxy whose every trap throws', hostile({}, trapNames), { name: 'Error', message: 'a value was thrown that cannot be read as an error (getPrototypeOf trap)' }],
    ['an object whose JSON cannot be made', { message: 5, big: 1n }, { name: 'Error', message: 'a non-Error value was thrown: [object Object]' }],
  ];
  for (const [title, value, info] of cases) {
    it(`reads ${title}`, () => {
      expect(toErrorInfo(value)).to.deep.equal(info);
    });
  }

  it("keeps status, code and attempts when they are the error's own plain data, and nothing else", () => {
    const http = new ProviderHttpError('vendor', 429, 'rate_limit_error', 'slow down', 3);
    expect(toErrorInfo(http)).to.deep.equal({ name: 'ProviderHttpError', message: 'vendor replied 429 rate_limit_error: slow down (after 3 attempts)', status: 429, code: 'rate_limit_error', attempts: 3 });
    expect(toErrorInfo(Object.assign(new Error('conn'), { code: 'ECONNRESET' }))).to.deep.equal({ name: 'Error', message: 'conn', code: 'ECONNRESET' });
    // Not plain: a string status, a NaN count, an object code, an inherited getter (a DOMException's legacy code).
    expect(toErrorInfo(Object.assign(new Error('odd'), { status: '429', attempts: NaN, code: { id: 1 } }))).to.deep.equal({ name: 'Error', message: 'odd' });
    expect(toErrorInfo(new DOMException('stopped', 'AbortError'))).to.deep.equal({ name: 'AbortError', message: 'stopped' });
  });

  it("ProviderError carries its cause's facts as fields", () => {
    const error = new ProviderError(2, 'overloaded', { status: 529, code: 'overloaded_error', attempts: 3 });
    expect(error).to.include({ turn: 2, status: 529, code: 'overloaded_error', attempts: 3 });
    expect(toErrorInfo(error)).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 2: overloaded', status: 529, code: 'overloaded_error', attempts: 3 });
    expect(toErrorInfo(new ProviderError(1, 'no facts'))).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 1: no facts' });
  });
});

describe('RateLimitedError and BudgetExceededError', () => {
  it('a RateLimitedError keeps how long the partner asked for, and refuses a figure that is not one', () => {
    const error = new RateLimitedError('partner answered 429', 2.5);
    expect(error.name).to.equal('RateLimitedError');
    expect(error.retryAfterSeconds).to.equal(2.5);
    expect(toErrorInfo(error)).to.include({ name: 'RateLimitedError', message: 'partner answered 429' });
    expect(() => new RateLimitedError('x', -1)).to.throw(ConfigError, /retryAfterSeconds must be a finite number of seconds/);
    expect(() => new RateLimitedError('x', Number.NaN)).to.throw(ConfigError, /retryAfterSeconds/);
  });

  it('a BudgetExceededError says how much was needed, how much is left and until when', () => {
    const until = Date.UTC(2026, 11, 4, 12, 0, 0);
    const error = new BudgetExceededError('acme', 'tokens', 1200, 300, until);
    expect(error.name).to.equal('BudgetExceededError');
    expect(error.message).to.equal("the tenant's budget is spent until 2026-12-04T12:00:00.000Z: acme needs 1200 tokens and has 300 left in its window");
    expect(error).to.include({ tenant: 'acme', measure: 'tokens', needed: 1200, left: 300, until });
  });
});
