import { expect } from 'chai';
import { ConcurrencyConfig, DeadlineConfig } from '../../lib/config/index.js';
import { configErrorOf } from './configError.js';


describe('ConcurrencyConfig', () => {
  const invalid: Array<{ title: string; options: unknown; field: string; message: string }> = [
    { title: 'a fractional maxConcurrentTools', options: { maxConcurrentTools: 1.5 }, field: 'maxConcurrentTools', message: 'maxConcurrentTools must be a positive integer, got 1.5' },
    { title: 'a zero maxConcurrentTools', options: { maxConcurrentTools: 0 }, field: 'maxConcurrentTools', message: 'maxConcurrentTools must be a positive integer, got 0' },
    { title: 'a string maxConcurrentTools', options: { maxConcurrentTools: '4' }, field: 'maxConcurrentTools', message: 'maxConcurrentTools must be a positive integer, got "4"' },
    { title: 'NaN maxConcurrentTools', options: { maxConcurrentTools: NaN }, field: 'maxConcurrentTools', message: 'maxConcurrentTools must be a positive integer, got NaN' },
    { title: 'a negative perTenant', options: { perTenant: -2 }, field: 'perTenant', message: 'perTenant must be a positive integer, got -2' },
    { title: 'Infinity as perTenant', options: { perTenant: Infinity }, field: 'perTenant', message: 'perTenant must be a positive integer, got Infinity' },
    { title: 'a zero perTool entry', options: { perTool: { search: 0 } }, field: 'perTool.search', message: 'perTool.search must be a positive integer, got 0' },
    { title: 'a fractional perTool entry', options: { perTool: { search: 4, booking: 0.5 } }, field: 'perTool.booking', message: 'perTool.booking must be a positive integer, got 0.5' },
    { title: 'perTool not an object', options: { perTool: 3 }, field: 'perTool', message: 'perTool must be an object of tool names to positive integers, got 3' },
    { title: 'a zero perToolSeconds entry', options: { perToolSeconds: { search: 0 } }, field: 'perToolSeconds.search', message: 'perToolSeconds.search must be a positive finite number of seconds, got 0' },
    { title: 'an infinite perToolSeconds entry', options: { perToolSeconds: { search: Infinity } }, field: 'perToolSeconds.search', message: 'perToolSeconds.search must be a positive finite number of seconds, got Infinity' },
    { title: 'perToolSeconds not an object', options: { perToolSeconds: 'fast' }, field: 'perToolSeconds', message: 'perToolSeconds must be an object of tool names to positive seconds, got "fast"' },
    { title: 'a misspelt field', options: { maxConcurentTools: 2 }, field: 'maxConcurentTools', message: 'ConcurrencyConfig has no field maxConcurentTools; its fields are maxConcurrentTools, perTool, perTenant, perToolSeconds, abandonAfterSeconds, perToolRate, perTenantRate, retryRateLimited, perToolAdaptive, perTenantBudget' },
    { title: 'options that are not an object', options: 8, field: 'ConcurrencyConfig', message: 'ConcurrencyConfig options must be an object, got 8' },
  ];
  for (const c of invalid) {
    it(`refuses ${c.title}, naming the field and the value`, () => {
      const error = configErrorOf(() => new ConcurrencyConfig(c.options as never));
      expect(error.message).to.equal(c.message);
      expect(error.field).to.equal(c.field);
    });
  }

  it('treats every absent field as unbounded', () => {
    const config = new ConcurrencyConfig();
    expect(config.maxConcurrentTools).to.equal(undefined);
    expect(config.perTenant).to.equal(undefined);
    expect(config.perTool).to.deep.equal({});
    expect(config.perToolSeconds).to.deep.equal({});
  });

  it('keeps valid values and is immutable', () => {
    const config = new ConcurrencyConfig({ maxConcurrentTools: 8, perTool: { search: 4, booking: 1 }, perTenant: 16, perToolSeconds: { search: 2.5 } });
    expect(config.toJSON()).to.deep.equal({ maxConcurrentTools: 8, perTool: { search: 4, booking: 1 }, perTenant: 16, perToolSeconds: { search: 2.5 } });
    expect(Object.isFrozen(config)).to.equal(true);
    expect(Object.isFrozen(config.perTool)).to.equal(true);
  });

  it('does not read inherited keys as limits', () => {
    const config = new ConcurrencyConfig({ perTool: { search: 2 } });
    expect(Object.prototype.hasOwnProperty.call(config.perTool, 'constructor')).to.equal(false);
  });

  describe('narrowedTo', () => {
    const runner = new ConcurrencyConfig({ maxConcurrentTools: 8, perTool: { search: 4, booking: 1 }, perTenant: 16, perToolSeconds: { search: 5 } });

    it('takes the smaller of each field', () => {
      const narrowed = runner.narrowedTo(new ConcurrencyConfig({ maxConcurrentTools: 2, perTenant: 32 }));
      expect(narrowed.maxConcurrentTools).to.equal(2);
      expect(narrowed.perTenant).to.equal(16);
    });

    it('takes the smaller key by key for perTool and perToolSeconds, keeping keys only one side names', () => {
      const narrowed = runner.narrowedTo({ perTool: { search: 6, fetch: 3 }, perToolSeconds: { search: 1, fetch: 9 } });
      expect(narrowed.perTool).to.deep.equal({ search: 4, booking: 1, fetch: 3 });
      expect(narrowed.perToolSeconds).to.deep.equal({ search: 1, fetch: 9 });
    });

    it('is never wider than either side, whichever side narrows', () => {
      const agent = new ConcurrencyConfig({ maxConcurrentTools: 20, perTool: { booking: 5 } });
      for (const narrowed of [runner.narrowedTo(agent), agent.narrowedTo(runner)]) {
        expect(narrowed.maxConcurrentTools).to.equal(8);
        expect(narrowed.perTool.booking).to.equal(1);
      }
    });

    it('validates plain options it is given', () => {
      const error = configErrorOf(() => runner.narrowedTo({ maxConcurrentTools: -1 }));
      expect(error.message).to.equal('maxConcurrentTools must be a positive integer, got -1');
    });

    it('returns the same bounds when given nothing', () => {
      expect(runner.narrowedTo(undefined).toJSON()).to.deep.equal(runner.toJSON());
    });
  });
});

describe('DeadlineConfig', () => {
  const invalid = [
    { options: { toolCallSeconds: 0 }, message: 'toolCallSeconds must be a positive finite number of seconds, got 0' },
    { options: { runSeconds: -1 }, message: 'runSeconds must be a positive finite number of seconds, got -1' },
    { options: { runSeconds: Infinity }, message: 'runSeconds must be a positive finite number of seconds, got Infinity' },
    { options: { toolCallSeconds: '5' }, message: 'toolCallSeconds must be a positive finite number of seconds, got "5"' },
    { options: { runSecs: 5 }, message: 'DeadlineConfig has no field runSecs; its fields are toolCallSeconds, runSeconds' },
  ];
  for (const c of invalid) {
    it(`refuses ${Object.entries(c.options).map(([k, v]) => `${k} = ${String(v)}`).join(", ")}`, () => {
      expect(configErrorOf(() => new DeadlineConfig(c.options as never)).message).to.equal(c.message);
    });
  }

  it('keeps valid seconds, fractions included', () => {
    const deadline = new DeadlineConfig({ toolCallSeconds: 0.5, runSeconds: 30 });
    expect([deadline.toolCallSeconds, deadline.runSeconds]).to.deep.equal([0.5, 30]);
  });
});
