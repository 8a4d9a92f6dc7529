// The bad input catalogue: provider replies, configs, tool bodies and hostile keys. Each
// case gets a clear error on its own call (or a ConfigError at construction), and no
// other call's result is lost. docs/reliability.md lists the same cases.
import { expect } from 'chai';
import * as t from 'io-ts';
import { from, interval, map, take, finalize, type Observable } from 'rxjs';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  ConfigError,
  DeadlineConfig,
  ScriptedProvider,
  ToolRegistry,
  WorkerPool,
  type ModelProvider,
  type ModelResponse,
  type RunEvent,
  type RunResult,
  type ToolBody,
} from '../../lib/index.js';

const agent = new Agent({ name: 'a', instructions: '', model: 'm' });

/** One turn with `calls` (plus a sibling `ok` call), then a final answer; the outcome events by call id. */
async function turn(tools: ToolRegistry, calls: ModelResponse['toolCalls'], provider?: ModelProvider): Promise<{ result: RunResult; by: Map<string, RunEvent> }> {
  const sibling = { id: 'sibling', name: 'ok', arguments: '{}' };
  const registry = tools.has('ok') ? tools : tools.register({ name: 'ok' }, () => 'sibling result');
  const result = await new AgentRunner({ provider: provider ?? new ScriptedProvider([{ toolCalls: [...calls!, sibling] }, { text: 'done' }]), tools: registry }).run(agent, 'go');
  const by = new Map<string, RunEvent>();
  for (const e of result.events) if ('callId' in e) by.set(e.callId, e);
  return { result, by };
}

function errorOf(event: RunEvent | undefined): { name: string; message: string } {
  expect(event?.type, JSON.stringify(event)).to.equal('TOOL_ERROR');
  return (event as Extract<RunEvent, { type: 'TOOL_ERROR' }>).error;
}

function expectSiblingKept(by: Map<string, RunEvent>): void {
  expect(by.get('sibling')).to.deep.include({ type: 'TOOL_RESULT', result: 'sibling result' });
}

describe('bad input catalogue', () => {
  describe('provider replies', () => {
    const search = () => new ToolRegistry().register({ name: 'search', args: t.type({ q: t.string }) }, ({ q }) => `hits for ${q}`);

    it('an unknown tool: UnknownToolError listing the known tools', async () => {
      const { by } = await turn(search(), [{ id: 'c1', name: 'serch', arguments: '{"q":"x"}' }]);
      expect(errorOf(by.get('c1'))).to.deep.equal({ name: 'UnknownToolError', message: 'unknown tool "serch"; known tools: search, ok' });
      expectSiblingKept(by);
    });

    it('a duplicate call id: the second call fails, the first runs', async () => {
      const { result } = await turn(search(), [{ id: 'c1', name: 'search', arguments: '{"q":"a"}' }, { id: 'c1', name: 'search', arguments: '{"q":"b"}' }]);
      const outcomes = result.events.filter((e) => e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR');
      expect(outcomes[0]).to.deep.include({ type: 'TOOL_RESULT', result: 'hits for a' });
      expect(errorOf(outcomes[1]).name).to.equal('DuplicateCallIdError');
    });

    it('arguments that are not JSON: ToolArgumentsError', async () => {
      const { by } = await turn(search(), [{ id: 'c1', name: 'search', arguments: '{"q": "unterminated' }]);
      expect(errorOf(by.get('c1')).message).to.match(/^bad arguments for search: arguments are not valid JSON/);
      expectSiblingKept(by);
    });

    it('a call missing its id: MalformedToolCallError under a stand-in id', async () => {
      const { by } = await turn(search(), [{ name: 'search', arguments: '{"q":"x"}' } as never]);
      expect(errorOf(by.get('malformed-1'))).to.deep.equal({
        name: 'MalformedToolCallError',
        message: "the model's call #1 is malformed and was not dispatched: toolCalls.0.id: expected string, got undefined",
      });
      expectSiblingKept(by);
    });

    it('a call missing its arguments: read as no arguments', async () => {
      const tools = new ToolRegistry().register({ name: 'ping' }, (args) => args);
      const { by } = await turn(tools, [{ id: 'c1', name: 'ping' } as never]);
      expect(by.get('c1')).to.deep.include({ type: 'TOOL_RESULT', result: {} });
    });

    it('very large arguments (2 MB): decoded and run; a codec failure quotes the value briefly', async () => {
      const big = 'x'.repeat(2 * 1024 * 1024);
      const tools = new ToolRegistry().register({ name: 'echo', args: t.type({ text: t.string }) }, ({ text }) => text.length);
      const { by } = await turn(tools, [
        { id: 'c1', name: 'echo', arguments: JSON.stringify({ text: big }) },
        { id: 'c2', name: 'echo', arguments: { text: { nested: big } } },
      ]);
      expect(by.get('c1')).to.deep.include({ type: 'TOOL_RESULT', result: big.length });
      const { message } = errorOf(by.get('c2'));
      expect(message.length).to.be.below(200);
      expect(message).to.match(/^bad arguments for echo: args\.text: expected string, got \{"nested":"xxx/);
    });

    it('a reply that is not an object: RUN_FAILED with a ProviderError naming the turn', async () => {
      const provider: ModelProvider = { respond: async () => 'I am a teapot' as unknown as ModelResponse };
      const { result } = await turn(search(), [], provider);
      expect(result.status).to.equal('failed');
      expect(result.error!.name).to.equal('ProviderError');
      expect(result.error!.message).to.match(/^model provider failed on turn 1: the reply does not decode: /);
    });
  });

  describe('configs', () => {
    const provider = new ScriptedProvider([]);
    const tools = new ToolRegistry();
    const cases: Array<[string, () => unknown, RegExp]> = [
      ['ConcurrencyConfig with a negative limit', () => new ConcurrencyConfig({ perTenant: -1 }), /^perTenant must be a positive integer, got -1$/],
      ['ConcurrencyConfig with NaN seconds', () => new ConcurrencyConfig({ perToolSeconds: { x: NaN } }), /^perToolSeconds\.x must be a positive finite number of seconds, got NaN$/],
      ['DeadlineConfig with a string', () => new DeadlineConfig({ runSeconds: '10' as never }), /^runSeconds must be a positive finite number of seconds, got "10"$/],
      ['an Agent with an unknown onToolError', () => new Agent({ name: 'a', instructions: '', model: 'm', onToolError: 'RETRY' as never }), /^Agent onToolError must be SURFACE_TO_MODEL or FAIL_RUN, got "RETRY"$/],
      ['an Agent with tools that are not names', () => new Agent({ name: 'a', instructions: '', model: 'm', tools: [1] as never }), /^Agent tools must be an array of tool names, got \[1\]$/],
      ['an AgentRunner with a negative loopStallMs', () => new AgentRunner({ provider, tools, loopStallMs: -5 }), /^loopStallMs must be a positive number of milliseconds or false, got -5$/],
      ['an AgentRunner with a hooks string', () => new AgentRunner({ provider, tools, hooks: 'log' as never }), /^hooks must be an object, got "log"$/],
      ['an AgentRunner with a non-function approve', () => new AgentRunner({ provider, tools, approve: true as never }), /^approve must be a function, got true$/],
      ['a tool with a 65-character name', () => new ToolRegistry().register({ name: 'x'.repeat(65) }, () => 1), /^name must be 1 to 64 letters/],
      ['a WorkerPool with fractional threads', () => new WorkerPool({ threads: 1.5, queue: 1 }), /^threads must be an integer from 1 up, got 1\.5$/],
    ];
    for (const [title, make, message] of cases) {
      it(`${title}: ConfigError`, () => {
        expect(make).to.throw(ConfigError, message);
      });
    }
  });

  describe('tool bodies', () => {
    const thrown: Array<[string, unknown, string]> = [
      ['a string', 'plain words', 'plain words'],
      ['a number', 42, 'a non-Error value was thrown: 42'],
      ['undefined', undefined, 'a non-Error value was thrown: undefined'],
      ['null', null, 'a non-Error value was thrown: null'],
      ['an object with a message', { code: 7, message: 'quota' }, 'quota'],
      ['a plain object', { code: 7 }, 'a non-Error value was thrown: {"code":7}'],
      ['a BigInt', 10n, 'a non-Error value was thrown: 10n'],
      ['a Symbol', Symbol('odd'), 'a non-Error value was thrown: Symbol(odd)'],
    ];
    for (const [title, value, message] of thrown) {
      it(`throwing ${title}: a TOOL_ERROR with a readable message, the sibling kept`, async () => {
        const tools = new ToolRegistry().register({ name: 'bad' }, () => {
          throw value;
        });
        const { by } = await turn(tools, [{ id: 'c1', name: 'bad', arguments: '{}' }]);
        expect(errorOf(by.get('c1')).message).to.equal(message);
        expectSiblingKept(by);
      });
    }

    it('returning undefined: a null result, in the transcript as for the model', async () => {
      const tools = new ToolRegistry().register({ name: 'quiet' }, () => undefined);
      const { result, by } = await turn(tools, [{ id: 'c1', name: 'quiet', arguments: '{}' }]);
      expect(by.get('c1')).to.deep.include({ type: 'TOOL_RESULT', result: null });
      expect(result.messages.find((m) => m.toolCallId === 'c1')!.content).to.equal('null');
    });

    const unserialisable: Array<[string, () => unknown, RegExp]> = [
      ['a circular object', () => {
        const loop: Record<string, unknown> = { name: 'loop' };
        loop.self = loop;
        return loop;
      }, /^the result of bad cannot be sent to the model as JSON \(.*circular/i],
      ['a function', () => () => 1, /^the result of bad cannot be sent to the model as JSON \(a function is not JSON\)$/],
    ];
    for (const [title, make, message] of unserialisable) {
      it(`returning ${title}: ToolResultError on its own call`, async () => {
        const tools = new ToolRegistry().register({ name: 'bad' }, make);
        const { by } = await turn(tools, [{ id: 'c1', name: 'bad', arguments: '{}' }]);
        const error = errorOf(by.get('c1'));
        expect(error.name).to.equal('ToolResultError');
        expect(error.message).to.match(message);
        expectSiblingKept(by);
      });
    }

    it('returning a result whose toJSON throws: ToolResultError with its message, and toJSON asked once', async () => {
      let asked = 0;
      const tools = new ToolRegistry().register({ name: 'bad' }, () => ({
        toJSON() {
          asked++;
          // Fails the first time only: a second walk of the result would hide the failure.
          if (asked === 1) throw new Error('not today');
          return { fine: true };
        },
      }));
      const { by } = await turn(tools, [{ id: 'c1', name: 'bad', arguments: '{}' }]);
      const error = errorOf(by.get('c1'));
      expect(error.name).to.equal('ToolResultError');
      expect(error.message).to.equal('the result of bad cannot be sent to the model as JSON (not today)');
      expect(asked).to.equal(1);
      expectSiblingKept(by);
    });

    it('returning a BigInt inside the result: sent as a string', async () => {
      const tools = new ToolRegistry().register({ name: 'count' }, () => ({ total: 2n ** 70n }));
      const { result } = await turn(tools, [{ id: 'c1', name: 'count', arguments: '{}' }]);
      expect(result.messages.find((m) => m.toolCallId === 'c1')!.content).to.equal('{"total":"1180591620717411303424"}');
    });

    it('an Observable emitting many values: the first is the result, and the rest are not waited for', async () => {
      let unsubscribed = false;
      const body: ToolBody = (): Observable<number> => interval(1).pipe(map((n) => n + 100), take(50), finalize(() => (unsubscribed = true)));
      const tools = new ToolRegistry().register({ name: 'chatty' }, body);
      const { by } = await turn(tools, [{ id: 'c1', name: 'chatty', arguments: '{}' }]);
      expect(by.get('c1')).to.deep.include({ type: 'TOOL_RESULT', result: 100 });
      expect(unsubscribed).to.equal(true);
    });

    it('an Observable that completes empty: the result is undefined, which goes on as null', async () => {
      const tools = new ToolRegistry().register({ name: 'empty' }, () => from([]));
      const { by } = await turn(tools, [{ id: 'c1', name: 'empty', arguments: '{}' }]);
      expect(by.get('c1')).to.deep.include({ type: 'TOOL_RESULT', result: null });
    });
  });

  describe('state that is not plain data', () => {
    it('a starting state holding a function: ConfigError naming its path', () => {
      const runner = new AgentRunner({ provider: new ScriptedProvider([]), tools: new ToolRegistry() });
      expect(() => runner.run$(agent, 'go', { state: { format: () => 'x' } }))
        .to.throw(ConfigError, /^state must hold JSON-like data \(plain objects, arrays, strings, numbers, booleans, null and undefined\): state\.format is a function$/)
        .with.property('field', 'state.format');
    });

    it('a conversation with a tool result answering no call: ConfigError naming the message, nothing asked of the model', () => {
      const provider = new ScriptedProvider([]);
      const runner = new AgentRunner({ provider, tools: new ToolRegistry() });
      expect(() => runner.run$(agent, [{ role: 'tool', toolCallId: 'c9', content: '{}' }, { role: 'user', content: 'go' }]))
        .to.throw(ConfigError, 'input[0].toolCallId: expected the id of a call an earlier assistant message asked for, got "c9"')
        .with.property('field', 'input[0].toolCallId');
      expect(provider.requests).to.deep.equal([]);
    });

    it('a delta holding a function: the recording call fails, its siblings and the state are untouched', async () => {
      const tools = new ToolRegistry().register({ name: 'write' }, (_args, ctx) => {
        ctx.record({ format: () => 'x' });
        return 'written';
      });
      const { result, by } = await turn(tools, [{ id: 'c1', name: 'write', arguments: '{}' }]);
      expect(errorOf(by.get('c1')).message).to.equal('record(delta) takes JSON-like data (plain objects, arrays, strings, numbers, booleans, null and undefined): delta.format is a function');
      expectSiblingKept(by);
      expect(result.state).to.deep.equal({});
    });

    it('a tool cannot change the snapshot it reads, nor the caller\'s object', async () => {
      const start = { cart: { items: ['tea'] } };
      let attempt: unknown;
      const tools = new ToolRegistry().register({ name: 'sneak' }, (_args, ctx) => {
        try {
          (ctx.state.cart as { items: string[] }).items.push('x');
        } catch (error) {
          attempt = error;
        }
        return 'tried';
      });
      const result = await new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'sneak', arguments: '{}' }] }, { text: 'done' }]), tools }).run(agent, 'go', { state: start });
      expect(attempt).to.be.instanceOf(TypeError);
      expect(start.cart.items).to.deep.equal(['tea']);
      expect(result.state).to.deep.equal({ cart: { items: ['tea'] } });
    });
  });

  describe('hostile keys', () => {
    afterEach(() => {
      // A failure here would leak into every later spec: clean up before asserting anything else.
      for (const key of ['polluted', 'viaConstructor', 'viaDelta']) delete (Object.prototype as Record<string, unknown>)[key];
    });

    it('__proto__ and constructor keys in arguments reach the body as plain data and pollute nothing', async () => {
      let seen: Record<string, unknown> | undefined;
      const tools = new ToolRegistry()
        .register({ name: 'raw' }, (args) => ((seen = args as Record<string, unknown>), 'ok'))
        .register({ name: 'typed', args: t.type({ q: t.string }) }, ({ q }) => q);
      const hostile = '{"q":"x","__proto__":{"polluted":true},"constructor":{"prototype":{"viaConstructor":true}}}';
      const { by } = await turn(tools, [{ id: 'c1', name: 'raw', arguments: hostile }, { id: 'c2', name: 'typed', arguments: hostile }]);
      expect(by.get('c1')).to.deep.include({ type: 'TOOL_RESULT', result: 'ok' });
      expect(by.get('c2')).to.deep.include({ type: 'TOOL_RESULT', result: 'x' });
      expect(Object.prototype.hasOwnProperty.call(seen, '__proto__')).to.equal(true);
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
      expect(({} as Record<string, unknown>).viaConstructor).to.equal(undefined);
    });

    it('__proto__ keys in deltas and in the starting state land as plain keys of the run\'s state', async () => {
      const tools = new ToolRegistry().register({ name: 'write' }, (_args, ctx) => {
        ctx.record(JSON.parse('{"__proto__":{"viaDelta":true},"ok":1}') as Record<string, unknown>);
        return 'written';
      });
      const start = JSON.parse('{"__proto__":{"polluted":true},"city":"Lisbon"}') as Record<string, unknown>;
      const result = await new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'write', arguments: '{}' }] }, { text: 'done' }]), tools }).run(agent, 'go', { state: start });
      expect(Object.keys(result.state).sort()).to.deep.equal(['__proto__', 'city', 'ok']);
      expect(Object.getPrototypeOf(result.state)).to.equal(Object.prototype);
      expect(({} as Record<string, unknown>).viaDelta).to.equal(undefined);
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
    });
  });
});
