import { expect } from 'chai';
import fc from 'fast-check';
import { burstOf, ConcurrencyConfig, type RateOptions } from '../../lib/config/index.js';
import { configErrorOf } from './configError.js';


describe('ConcurrencyConfig rate lanes (perToolRate, perTenantRate)', () => {
  const invalid: Array<{ title: string; options: unknown; field: string; message: string }> = [
    { title: 'a zero limit', options: { perToolRate: { search: { limit: 0, perSeconds: 1 } } }, field: 'perToolRate.search.limit', message: 'perToolRate.search.limit must be a positive integer, got 0' },
    { title: 'a fractional limit', options: { perTenantRate: { acme: { limit: 2.5, perSeconds: 1 } } }, field: 'perTenantRate.acme.limit', message: 'perTenantRate.acme.limit must be a positive integer, got 2.5' },
    { title: 'a missing perSeconds', options: { perToolRate: { search: { limit: 5 } } }, field: 'perToolRate.search.perSeconds', message: 'perToolRate.search.perSeconds must be a positive finite number of seconds, got undefined' },
    { title: 'a zero perSeconds', options: { perToolRate: { search: { limit: 5, perSeconds: 0 } } }, field: 'perToolRate.search.perSeconds', message: 'perToolRate.search.perSeconds must be a positive finite number of seconds, got 0' },
    { title: 'a zero burst', options: { perToolRate: { search: { limit: 5, perSeconds: 1, burst: 0 } } }, field: 'perToolRate.search.burst', message: 'perToolRate.search.burst must be a positive integer, got 0' },
    { title: 'a rate that is a number', options: { perToolRate: { search: 5 } }, field: 'perToolRate.search', message: 'perToolRate.search must be a rate { limit, perSeconds, burst? }, got 5' },
    { title: 'rates that are not an object', options: { perTenantRate: 'fast' }, field: 'perTenantRate', message: 'perTenantRate must be an object of names to rates { limit, perSeconds, burst? }, got "fast"' },
    { title: 'a misspelt rate field', options: { perToolRate: { search: { limit: 5, perSeconds: 1, brust: 2 } } }, field: 'perToolRate.search.brust', message: 'perToolRate.search has no field brust; its fields are limit, perSeconds, burst' },
  ];
  for (const c of invalid) {
    it(`refuses ${c.title}, naming the field and the value`, () => {
      const error = configErrorOf(() => new ConcurrencyConfig(c.options as never));
      expect(error.message).to.equal(c.message);
      expect(error.field).to.equal(c.field);
    });
  }

  it('keeps valid rates, frozen, and gives them back in toJSON', () => {
    const config = new ConcurrencyConfig({ perToolRate: { search: { limit: 10, perSeconds: 1, burst: 2 } }, perTenantRate: { '*': { limit: 100, perSeconds: 60 } } });
    expect(config.perToolRate).to.deep.equal({ search: { limit: 10, perSeconds: 1, burst: 2 } });
    expect(Object.isFrozen(config.perToolRate.search)).to.equal(true);
    expect(config.toJSON()).to.deep.equal({ perToolRate: { search: { limit: 10, perSeconds: 1, burst: 2 } }, perTenantRate: { '*': { limit: 100, perSeconds: 60 } } });
    expect(new ConcurrencyConfig().perTenantRate).to.deep.equal({});
  });

  it('narrows key by key to the slower steady rate and the smaller burst, keeping keys one side names', () => {
    const runner = new ConcurrencyConfig({ perToolRate: { search: { limit: 10, perSeconds: 1, burst: 10 }, fetch: { limit: 5, perSeconds: 1 } } });
    const narrowed = runner.narrowedTo({ perToolRate: { search: { limit: 30, perSeconds: 60, burst: 20 }, mail: { limit: 1, perSeconds: 1 } } });
    expect(narrowed.perToolRate).to.deep.equal({
      search: { limit: 30, perSeconds: 60, burst: 10 },
      fetch: { limit: 5, perSeconds: 1 },
      mail: { limit: 1, perSeconds: 1 },
    });
  });

  it('is never wider than either side, whichever side narrows (property)', () => {
    const rate = fc.record({ limit: fc.integer({ min: 1, max: 1000 }), perSeconds: fc.integer({ min: 1, max: 3600 }), burst: fc.option(fc.integer({ min: 1, max: 1000 }), { nil: undefined }) });
    const steady = (r: RateOptions): number => r.limit / r.perSeconds;
    fc.assert(
      fc.property(rate, rate, (a, b) => {
        const one = new ConcurrencyConfig({ perTenantRate: { acme: a } });
        const other = new ConcurrencyConfig({ perTenantRate: { acme: b } });
        for (const narrowed of [one.narrowedTo(other), other.narrowedTo(one)]) {
          const r = narrowed.perTenantRate.acme!;
          expect(steady(r)).to.be.at.most(Math.min(steady(a), steady(b)));
          expect(burstOf(r)).to.be.at.most(Math.min(burstOf(a), burstOf(b)));
        }
      }),
    );
  });
});
