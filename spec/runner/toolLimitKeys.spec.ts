// perTool and perToolSeconds keys must name a tool: a misspelt key would leave the real tool
// unbounded and without its ceiling. The runner's are checked against its registry when it is
// made; an agent's against the tools it may call when a run of it starts.
import { expect } from 'chai';
import { Agent, AgentRunner, ConcurrencyConfig, ConfigError, ScriptedProvider, ToolRegistry, type ConcurrencyOptions, type RunResult } from '../../lib/index.js';

const tools = (): ToolRegistry =>
  new ToolRegistry()
    .register({ name: 'search' }, () => 'hits')
    .register({ name: 'booking' }, () => 'booked');

const oneCall = (): ScriptedProvider => new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'search', arguments: {} }] }, { text: 'done' }]);

function thrown(make: () => unknown): unknown {
  try {
    make();
  } catch (error) {
    return error;
  }
  expect.fail('expected a ConfigError');
}

describe('perTool and perToolSeconds keys', () => {
  describe('on the runner, checked when it is made', () => {
    const cases: Array<{ title: string; concurrency: ConcurrencyOptions; field: string; key: string }> = [
      { title: 'a perTool key', concurrency: { perTool: { serch: 2 } }, field: 'perTool', key: 'serch' },
      { title: 'a perToolSeconds key', concurrency: { perToolSeconds: { search: 5, boking: 10 } }, field: 'perToolSeconds', key: 'boking' },
    ];
    for (const { title, concurrency, field, key } of cases) {
      for (const given of ['options', 'a ConcurrencyConfig'] as const) {
        it(`refuses ${title} that names no registered tool (given as ${given}), naming the key and the tools`, () => {
          const error = thrown(() => new AgentRunner({ provider: oneCall(), tools: tools(), concurrency: given === 'options' ? concurrency : new ConcurrencyConfig(concurrency) }));
          expect(error).to.be.instanceOf(ConfigError);
          expect(error).to.include({
            field: `concurrency.${field}.${key}`,
            message: `concurrency.${field} names "${key}", which is not a registered tool; registered tools: search, booking (register the tools before making the runner)`,
          });
        });
      }
    }

    it('refuses a key for a tool not registered yet, saying to register tools first', () => {
      const registry = new ToolRegistry();
      expect(() => new AgentRunner({ provider: oneCall(), tools: registry, concurrency: { perTool: { search: 1 } } })).to.throw(
        ConfigError,
        'concurrency.perTool names "search", which is not a registered tool; registered tools: (none) (register the tools before making the runner)',
      );
    });

    it('refuses a key named like an Object method (constructor): it is no tool', () => {
      expect(() => new AgentRunner({ provider: oneCall(), tools: tools(), concurrency: JSON.parse('{"perTool":{"constructor":1}}') as ConcurrencyOptions }))
        .to.throw(ConfigError)
        .with.property('field', 'concurrency.perTool.constructor');
    });

    it('accepts keys that name registered tools, and runs under them', async () => {
      const runner = new AgentRunner({ provider: oneCall(), tools: tools(), concurrency: { perTool: { search: 2, booking: 1 }, perToolSeconds: { search: 5 } } });
      expect(runner.concurrency.perTool).to.deep.equal({ search: 2, booking: 1 });
      expect((await runner.run(new Agent({ name: 'a', instructions: '', model: 'm' }), 'go')).status).to.equal('completed');
    });
  });

  describe('on an agent, checked when a run of it starts', () => {
    const refusal = async (agent: Agent, registry = tools()): Promise<{ sync: unknown; async: unknown }> => {
      const runner = new AgentRunner({ provider: oneCall(), tools: registry });
      const sync = thrown(() => runner.run$(agent, 'go'));
      const async = await runner.run(agent, 'go').then(
        (result: RunResult) => result,
        (error: unknown) => error,
      );
      return { sync, async };
    };

    it('refuses a perTool key the agent may not call, from run$ (thrown) and run (rejected), naming the agent, the key and its tools', async () => {
      const agent = new Agent({ name: 'planner', instructions: '', model: 'm', concurrency: { perTool: { serch: 1 } } });
      const { sync, async } = await refusal(agent);
      for (const error of [sync, async]) {
        expect(error).to.be.instanceOf(ConfigError);
        expect(error).to.include({
          field: 'concurrency.perTool.serch',
          message: 'agent planner\'s concurrency.perTool names "serch", which is not a tool the agent may call; its tools: search, booking',
        });
      }
    });

    it('checks against the agent’s own tools when it lists them', async () => {
      const agent = new Agent({ name: 'reader', instructions: '', model: 'm', tools: ['search'], concurrency: { perToolSeconds: { booking: 3 } } });
      const { sync, async } = await refusal(agent);
      for (const error of [sync, async]) {
        expect(error).to.be.instanceOf(ConfigError);
        expect(error).to.include({
          field: 'concurrency.perToolSeconds.booking',
          message: 'agent reader\'s concurrency.perToolSeconds names "booking", which is not a tool the agent may call; its tools: search',
        });
      }
    });

    it('refuses a nested run of such an agent: the body’s runAgent rejects with the ConfigError', async () => {
      const typo = new Agent({ name: 'helper', instructions: '', model: 'm', concurrency: { perTool: { serch: 1 } } });
      let nested: unknown;
      const registry = new ToolRegistry().register({ name: 'search' }, () => 'hits').register({ name: 'delegate' }, async (_args, ctx) => {
        nested = await ctx.runAgent(typo, 'help').then(
          () => 'ran',
          (error: unknown) => error,
        );
        return 'delegated';
      });
      const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'delegate', arguments: {} }] }, { text: 'done' }]);
      const result = await new AgentRunner({ provider, tools: registry }).run(new Agent({ name: 'lead', instructions: '', model: 'm' }), 'go');
      expect(result.status).to.equal('completed');
      expect(nested).to.be.instanceOf(ConfigError).and.to.have.property('field', 'concurrency.perTool.serch');
    });

    it('accepts keys the agent may call, and a tool registered after the runner was made', async () => {
      const registry = tools();
      const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'one' }, { text: 'two' }]), tools: registry });
      const agent = new Agent({ name: 'planner', instructions: '', model: 'm', concurrency: { perTool: { search: 1, summarise: 1 }, perToolSeconds: { booking: 2 } } });
      expect(() => runner.run$(agent, 'go'), 'summarise is not registered yet').to.throw(ConfigError, /names "summarise"/);
      registry.register({ name: 'summarise' }, () => 'short');
      expect((await runner.run(agent, 'go')).status).to.equal('completed');
      expect((await runner.run(agent, 'again')).status).to.equal('completed');
    });
  });
});
