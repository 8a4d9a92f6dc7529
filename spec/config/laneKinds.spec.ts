import { expect } from 'chai';
import { ConcurrencyConfig } from '../../lib/config/index.js';
import { configErrorOf } from './configError.js';

describe('ConcurrencyConfig adaptive and budget lanes', () => {
  const invalid: Array<{ title: string; options: unknown; field: string; message: string }> = [
    { title: 'a zero min', options: { perToolAdaptive: { search: { min: 0, max: 4 } } }, field: 'perToolAdaptive.search.min', message: 'perToolAdaptive.search.min must be a positive integer, got 0' },
    { title: 'a missing max', options: { perToolAdaptive: { search: { min: 1 } } }, field: 'perToolAdaptive.search.max', message: 'perToolAdaptive.search.max must be a positive integer, got undefined' },
    { title: 'max below min', options: { perToolAdaptive: { search: { min: 4, max: 2 } } }, field: 'perToolAdaptive.search.max', message: 'perToolAdaptive.search.max must be at least its min (4), got 2' },
    { title: 'initial outside min..max', options: { perToolAdaptive: { search: { min: 2, max: 4, initial: 5 } } }, field: 'perToolAdaptive.search.initial', message: 'perToolAdaptive.search.initial must be within min..max (2..4), got 5' },
    { title: 'a misspelt bound', options: { perToolAdaptive: { search: { min: 1, max: 4, inital: 2 } } }, field: 'perToolAdaptive.search.inital', message: 'perToolAdaptive.search has no field inital; its fields are min, max, initial, pace' },
    { title: 'a pace that is not true or false', options: { perToolAdaptive: { search: { min: 1, max: 4, pace: 'yes' } } }, field: 'perToolAdaptive.search.pace', message: 'perToolAdaptive.search.pace must be boolean, got "yes"' },
    { title: 'a budget without a window', options: { perTenantBudget: { tokens: 100 } }, field: 'perTenantBudget.perSeconds', message: 'perTenantBudget.perSeconds must be a positive finite number of seconds, got undefined' },
    { title: 'a budget of neither tokens nor cost', options: { perTenantBudget: { perSeconds: 60 } }, field: 'perTenantBudget', message: 'perTenantBudget must bound tokens, cost or both, got neither' },
    { title: 'fractional tokens', options: { perTenantBudget: { tokens: 1.5, perSeconds: 60 } }, field: 'perTenantBudget.tokens', message: 'perTenantBudget.tokens must be a positive integer, got 1.5' },
    { title: 'a negative cost', options: { perTenantBudget: { cost: -1, perSeconds: 60 } }, field: 'perTenantBudget.cost', message: 'perTenantBudget.cost must be a positive finite number, got -1' },
    { title: 'a misspelt budget field', options: { perTenantBudget: { token: 5, cost: 1, perSeconds: 60 } }, field: 'perTenantBudget.token', message: 'perTenantBudget has no field token; its fields are tokens, cost, perSeconds, turnTokens' },
    { title: 'turnTokens without tokens', options: { perTenantBudget: { cost: 5, turnTokens: 10, perSeconds: 60 } }, field: 'perTenantBudget.turnTokens', message: 'perTenantBudget.turnTokens reserves part of the token budget for each turn: it needs tokens, at least as many; got turnTokens 10 and tokens undefined' },
    { title: 'turnTokens above tokens', options: { perTenantBudget: { tokens: 50, turnTokens: 80, perSeconds: 60 } }, field: 'perTenantBudget.turnTokens', message: 'perTenantBudget.turnTokens reserves part of the token budget for each turn: it needs tokens, at least as many; got turnTokens 80 and tokens 50' },
  ];
  for (const c of invalid) {
    it(`refuses ${c.title}, naming the field`, () => {
      const error = configErrorOf(() => new ConcurrencyConfig(c.options as never));
      expect(error.field).to.equal(c.field);
      expect(error.message).to.equal(c.message);
    });
  }

  it('keeps valid fields, frozen, and gives them back in toJSON', () => {
    const config = new ConcurrencyConfig({ perToolAdaptive: { search: { min: 1, max: 8, initial: 4 } }, perTenantBudget: { tokens: 1000, cost: 2.5, perSeconds: 60 } });
    expect(config.perToolAdaptive).to.deep.equal({ search: { min: 1, max: 8, initial: 4 } });
    expect(Object.isFrozen(config.perToolAdaptive.search)).to.equal(true);
    expect(config.toJSON()).to.deep.equal({ perToolAdaptive: { search: { min: 1, max: 8, initial: 4 } }, perTenantBudget: { tokens: 1000, cost: 2.5, perSeconds: 60 } });
  });

  it('keeps pace: true (and leaves out pace: false), frozen, in toJSON', () => {
    const config = new ConcurrencyConfig({ perToolAdaptive: { search: { min: 1, max: 8, pace: true }, fetch: { min: 1, max: 2, pace: false } } });
    expect(config.perToolAdaptive).to.deep.equal({ search: { min: 1, max: 8, pace: true }, fetch: { min: 1, max: 2 } });
    expect(config.toJSON()).to.deep.equal({ perToolAdaptive: { search: { min: 1, max: 8, pace: true }, fetch: { min: 1, max: 2 } } });
  });

  it("keeps the runner's pace when an agent narrows, and leaves out an agent's own (the shared lane learns it)", () => {
    const runner = new ConcurrencyConfig({ perToolAdaptive: { search: { min: 1, max: 8, pace: true }, fetch: { min: 1, max: 4 } } });
    const narrowed = runner.narrowedTo({ perToolAdaptive: { search: { min: 1, max: 4 }, fetch: { min: 1, max: 2, pace: true }, mail: { min: 1, max: 2, pace: true } } });
    expect(narrowed.perToolAdaptive).to.deep.equal({ search: { min: 1, max: 4, initial: 4, pace: true }, fetch: { min: 1, max: 2, initial: 2 }, mail: { min: 1, max: 2 } });
  });

  it('lets an agent narrow adaptive bounds and never widen them', () => {
    const runner = new ConcurrencyConfig({ perToolAdaptive: { search: { min: 2, max: 8 }, fetch: { min: 1, max: 4 } } });
    const narrowed = runner.narrowedTo({ perToolAdaptive: { search: { min: 3, max: 16, initial: 3 } } });
    expect(narrowed.perToolAdaptive).to.deep.equal({ search: { min: 2, max: 8, initial: 3 }, fetch: { min: 1, max: 4 } });
    const wider = runner.narrowedTo({ perToolAdaptive: { search: { min: 1, max: 2 } } });
    expect(wider.perToolAdaptive.search).to.deep.equal({ min: 1, max: 2, initial: 2 });
  });

  it('narrows a budget to the smaller amounts over the longer window', () => {
    const runner = new ConcurrencyConfig({ perTenantBudget: { tokens: 1000, perSeconds: 60 } });
    const narrowed = runner.narrowedTo({ perTenantBudget: { tokens: 2000, cost: 5, perSeconds: 30 } });
    expect(narrowed.perTenantBudget).to.deep.equal({ tokens: 1000, cost: 5, perSeconds: 60 });
  });
});
