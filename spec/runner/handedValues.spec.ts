// What a body (or a policy) is handed cannot rewrite history: a body changing its arguments
// leaves MODEL_RESPONSE, the next request, the run's messages and a cassette as the model sent
// them; policies read their own frozen arguments; the run's state is JSON-like data, frozen all
// the way down, and a body that goes on changing a delta it recorded changes nothing.
import { expect } from 'chai';
import * as t from 'io-ts';
import {
  Agent,
  AgentRunner,
  ConfigError,
  ScriptedProvider,
  ToolRegistry,
  type Message,
  type ModelResponse,
  type PolicyCall,
  type RunEvent,
  type RunnerOptions,
  type RunResult,
  type ToolBody,
  type ToolCall,
} from '../../lib/index.js';
import { AnthropicMessagesProvider } from '../../lib/providers.js';
import { CassetteRecorder } from '../../lib/testing.js';
import { fixture, startWireServer, type WireServer } from '../providers/wireServer.js';

const planner = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });

/** Arguments with something to change at every depth. */
const sentArguments = (): Record<string, unknown> => ({ city: 'Lisbon', filters: { stars: [4, 5], pool: true }, rooms: [{ adults: 2 }] });

/** What bodies do to what they are handed. */
const mutations: Array<{ title: string; mutate: (args: any) => void }> = [
  { title: 'sets a top-level key', mutate: (args) => (args.city = 'Atlantis') },
  { title: 'deletes a top-level key', mutate: (args) => delete args.city },
  { title: 'adds a key', mutate: (args) => (args.injected = 'yes') },
  { title: 'changes a nested object', mutate: (args) => (args.filters.pool = false) },
  { title: 'pushes onto a nested array', mutate: (args) => args.filters.stars.push(1) },
  { title: 'changes an object inside an array', mutate: (args) => (args.rooms[0].adults = 9) },
  { title: 'empties a nested array', mutate: (args) => args.rooms.splice(0) },
];

function responseOf(result: RunResult, turn: number): Extract<RunEvent, { type: 'MODEL_RESPONSE' }> {
  const event = result.events.find((e) => e.type === 'MODEL_RESPONSE' && e.turn === turn);
  expect(event, `MODEL_RESPONSE of turn ${turn}`).to.not.equal(undefined);
  return event as Extract<RunEvent, { type: 'MODEL_RESPONSE' }>;
}

/** The calls an assistant message of `messages` carries. */
function assistantCalls(messages: readonly Message[]): readonly ToolCall[] {
  return messages.find((m) => m.role === 'assistant' && m.toolCalls !== undefined)?.toolCalls ?? [];
}

describe('what a body is handed', () => {
  describe('arguments sent as an object', () => {
    for (const { title, mutate } of mutations) {
      it(`a body that ${title} leaves MODEL_RESPONSE, the next request, the messages and the reply as the model sent them`, async () => {
        const reply: ModelResponse = { toolCalls: [{ id: 'c1', name: 'search', arguments: sentArguments() }] };
        let handed: unknown;
        const tools = new ToolRegistry().register({ name: 'search' }, (args) => {
          mutate(args);
          handed = args;
          return 'ok';
        });
        const provider = new ScriptedProvider([reply, { text: 'done' }]);
        const result = await new AgentRunner({ provider, tools }).run(planner, 'go');
        expect(result.status).to.equal('completed');
        // The body's change happened, on its own copy.
        const changed = sentArguments();
        mutate(changed);
        expect(handed).to.deep.equal(changed);
        expect(responseOf(result, 1).toolCalls[0]!.arguments).to.deep.equal(sentArguments());
        expect(assistantCalls(provider.requests[1]!.messages)[0]!.arguments).to.deep.equal(sentArguments());
        expect(assistantCalls(result.messages)[0]!.arguments).to.deep.equal(sentArguments());
        expect(reply.toolCalls![0]!.arguments, 'the provider’s own reply').to.deep.equal(sentArguments());
      });
    }

    it('a body that changes arguments its codec decoded leaves the transcript as the model sent it', async () => {
      const Args = t.type({ city: t.string, filters: t.type({ stars: t.array(t.number) }) });
      const tools = new ToolRegistry().register({ name: 'search', args: Args }, (args) => {
        args.filters.stars.push(1);
        args.city = 'Atlantis';
        return 'ok';
      });
      const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'search', arguments: { city: 'Lisbon', filters: { stars: [5] } } }] }, { text: 'done' }]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'go');
      expect(responseOf(result, 1).toolCalls[0]!.arguments).to.deep.equal({ city: 'Lisbon', filters: { stars: [5] } });
      expect(assistantCalls(provider.requests[1]!.messages)[0]!.arguments).to.deep.equal({ city: 'Lisbon', filters: { stars: [5] } });
    });

    it('gives each call its own copy, even of one object the reply names twice', async () => {
      const shared = { list: ['a'] };
      const seen: unknown[] = [];
      const tools = new ToolRegistry().register({ name: 'append' }, async (args: any) => {
        args.list.push('x');
        await new Promise((resolve) => setTimeout(resolve, 1));
        seen.push([...args.list]);
        return 'ok';
      });
      const provider = new ScriptedProvider([
        { toolCalls: [{ id: 'c1', name: 'append', arguments: shared }, { id: 'c2', name: 'append', arguments: shared }] },
        { text: 'done' },
      ]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'go');
      expect(result.status).to.equal('completed');
      expect(seen).to.deep.equal([['a', 'x'], ['a', 'x']]);
      expect(shared).to.deep.equal({ list: ['a'] });
    });

    it('copies arguments that are not JSON-like (a Date) apart from the reply too', async () => {
      const when = new Date(Date.UTC(2030, 0, 1));
      let handed: Date | undefined;
      const tools = new ToolRegistry().register({ name: 'book' }, (args: any) => {
        handed = args.when;
        args.when.setUTCFullYear(1999);
        return 'ok';
      });
      const result = await new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'book', arguments: { when } }] }, { text: 'done' }]), tools }).run(planner, 'go');
      expect(result.status).to.equal('completed');
      expect(handed).to.be.instanceOf(Date);
      expect(handed).to.not.equal(when);
      expect(when.getUTCFullYear()).to.equal(2030);
    });

    const uncopyable: Array<{ title: string; args: () => Record<string, unknown>; message: RegExp }> = [
      { title: 'a function', args: () => ({ format: () => 'x' }), message: /^bad arguments for search: arguments cannot be copied for the body \(/ },
      {
        title: 'a getter that throws',
        args: () =>
          Object.defineProperty({}, 'q', {
            enumerable: true,
            get() {
              throw new Error('no reading me');
            },
          }),
        message: /^bad arguments for search: arguments cannot be copied for the body \(no reading me\)$/,
      },
    ];
    for (const { title, args, message } of uncopyable) {
      it(`arguments holding ${title}: ToolArgumentsError on that call alone, never dispatched`, async () => {
        let dispatched = false;
        const tools = new ToolRegistry()
          .register({ name: 'search' }, () => ((dispatched = true), 'ran'))
          .register({ name: 'ok' }, () => 'sibling result');
        const provider = new ScriptedProvider([
          { toolCalls: [{ id: 'c1', name: 'search', arguments: args() }, { id: 'c2', name: 'ok', arguments: {} }] },
          { text: 'done' },
        ]);
        const result = await new AgentRunner({ provider, tools }).run(planner, 'go');
        const outcomes = result.events.filter((e) => e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR');
        expect(outcomes[0]).to.include({ type: 'TOOL_ERROR', callId: 'c1' });
        expect((outcomes[0] as Extract<RunEvent, { type: 'TOOL_ERROR' }>).error.name).to.equal('ToolArgumentsError');
        expect((outcomes[0] as Extract<RunEvent, { type: 'TOOL_ERROR' }>).error.message).to.match(message);
        expect(outcomes[1]).to.deep.include({ type: 'TOOL_RESULT', callId: 'c2', result: 'sibling result' });
        expect(dispatched).to.equal(false);
      });
    }
  });

  describe('a cassette', () => {
    it('records the arguments and the next request as the model sent them, whatever the body did', async () => {
      const tools = new ToolRegistry().register({ name: 'search' }, (args: any) => {
        args.filters.stars.push(1);
        args.city = 'Atlantis';
        return 'ok';
      });
      const recorder = new CassetteRecorder({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'search', arguments: sentArguments() }] }, { text: 'done' }]), tools });
      const { cassette, result } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools }), planner, 'go');
      expect(result.status).to.equal('completed');
      const reply = cassette.turns[0]!.reply as { response: ModelResponse };
      expect(reply.response.toolCalls![0]!.arguments).to.deep.equal(sentArguments());
      expect(assistantCalls(cassette.turns[1]!.request.messages)[0]!.arguments).to.deep.equal(sentArguments());
    });

    it('records a delta as it was recorded, though the body went on changing its object', async () => {
      const tools = new ToolRegistry().register({ name: 'cart' }, (_args, ctx) => {
        const delta = { cart: { items: ['tea'] } };
        ctx.record(delta);
        delta.cart.items.push('cake');
        return 'ok';
      });
      const recorder = new CassetteRecorder({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'cart', arguments: {} }] }, { text: 'done' }]), tools });
      const { cassette, result } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools }), planner, 'go');
      expect(result.state).to.deep.equal({ cart: { items: ['tea'] } });
      expect(cassette.turns[0]!.calls[0]).to.deep.include({ deltas: [{ cart: { items: ['tea'] } }] });
    });
  });

  describe('over the Anthropic wire (object arguments)', () => {
    let server: WireServer | undefined;
    afterEach(async () => {
      await server?.close();
      server = undefined;
    });

    it('shows the model, next turn, the calls it made, not what the bodies did to them', async () => {
      server = await startWireServer([{ body: fixture('anthropic-three-calls') }, { body: fixture('anthropic-final-text') }]);
      const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ city: t.string }) }, (args) => {
        const city = args.city;
        args.city = 'Atlantis';
        return { city };
      });
      const result = await new AgentRunner({ provider: new AnthropicMessagesProvider({ baseURL: server.url, apiKey: 'k' }), tools }).run(planner, 'Hotels?');
      expect(result.status).to.equal('completed');
      const sentBack = server.received[1]!.body.messages
        .flatMap((m: any) => (Array.isArray(m.content) ? m.content : []))
        .filter((b: any) => b.type === 'tool_use')
        .map((b: any) => b.input.city);
      expect(sentBack).to.deep.equal(['Lisbon', 'Atlantis', 'Porto']);
      const results = result.events.filter((e) => e.type === 'TOOL_RESULT').map((e) => (e as Extract<RunEvent, { type: 'TOOL_RESULT' }>).result);
      expect(results).to.deep.equal([{ city: 'Lisbon' }, { city: 'Atlantis' }, { city: 'Porto' }]);
    });
  });

  describe('policies', () => {
    const run = (options: Omit<RunnerOptions, 'provider' | 'tools'>, body: ToolBody, args: string | Record<string, unknown> = sentArguments()) => {
      const tools = new ToolRegistry().register({ name: 'search', needsApproval: true }, body);
      const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'search', arguments: args }] }, { text: 'done' }]);
      return new AgentRunner({ provider, tools, approve: () => true, ...options }).run(planner, 'go');
    };

    for (const sent of ['text', 'object'] as const) {
      const args = () => (sent === 'text' ? JSON.stringify(sentArguments()) : sentArguments());

      it(`see the arguments as the model sent them (${sent}), before and after the body changed its own`, async () => {
        const seen: Record<string, unknown> = {};
        const result = await run(
          {
            hooks: { onToolStart: (call) => void (seen.start = structuredClone(call.args)), onToolEnd: (call) => void (seen.end = structuredClone(call.args)) },
            approve: (call) => ((seen.approve = structuredClone(call.args)), true),
          },
          (a: any) => {
            a.filters.stars.push(1);
            a.city = 'Atlantis';
            return 'ok';
          },
          args(),
        );
        expect(result.status).to.equal('completed');
        expect(seen).to.deep.equal({ start: sentArguments(), approve: sentArguments(), end: sentArguments() });
      });

      it(`cannot change what the body gets (${sent}): their arguments are frozen, and a write is that policy's refusal`, async () => {
        let handed: unknown;
        const frozen: boolean[] = [];
        const body = (a: unknown) => ((handed = a), 'ok');
        const quiet = await run({ hooks: { onToolStart: (call: PolicyCall) => void frozen.push(Object.isFrozen(call.args), Object.isFrozen((call.args as any).filters.stars)) } }, body, args());
        expect(quiet.status).to.equal('completed');
        expect(frozen).to.deep.equal([true, true]);
        expect(handed).to.deep.equal(sentArguments());
        expect(Object.isFrozen(handed), 'the body’s own copy is its to change').to.equal(false);

        handed = undefined;
        const writing = await run({ guardrails: { input: (call) => void ((call.args as any).city = 'Atlantis') } }, body, args());
        const error = writing.events.find((e) => e.type === 'TOOL_ERROR') as Extract<RunEvent, { type: 'TOOL_ERROR' }> | undefined;
        expect(error?.error.name).to.equal('ToolRejectedError');
        expect(error?.error.message).to.match(/^input guardrail rejected the call: Cannot assign to read only property 'city'/);
        expect(handed, 'the refused call was never dispatched').to.equal(undefined);
        expect(responseOf(writing, 1).toolCalls[0]!.arguments).to.deep.equal(args());
      });
    }

    it('leave alone an object the codec hands to every decode: the body may still change its own', async () => {
      const shared: string[] = [];
      // A codec with a default: one array, handed out whenever the field is missing.
      const Tags = new t.Type<string[], string[], unknown>('Tags', (u): u is string[] => Array.isArray(u), (u, c) => (u === undefined ? t.success(shared) : t.array(t.string).validate(u, c)), (a) => a);
      const tools = new ToolRegistry().register({ name: 'tag', args: t.type({ tags: Tags }) }, ({ tags }) => (tags.push('x'), tags.length));
      const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'tag', arguments: {} }] }, { text: 'done' }]);
      let shown: unknown;
      const result = await new AgentRunner({ provider, tools, hooks: { onToolStart: (call) => void (shown = call.args) } }).run(planner, 'go');
      expect(result.events.find((e) => e.type === 'TOOL_RESULT')).to.deep.include({ result: 1 });
      expect(Object.isFrozen(shared)).to.equal(false);
      expect(shown).to.deep.equal({ tags: [] });
      expect(Object.isFrozen((shown as { tags: string[] }).tags)).to.equal(true);
    });

    it('show a call refused before decoding what the model sent, frozen apart from the reply', async () => {
      const reply: ModelResponse = { toolCalls: [{ id: 'c1', name: 'serch', arguments: sentArguments() }] };
      let seen: unknown;
      const result = await new AgentRunner({
        provider: new ScriptedProvider([reply, { text: 'done' }]),
        tools: new ToolRegistry().register({ name: 'search' }, () => 'ok'),
        hooks: { onToolEnd: (call) => void (seen = call.args) },
      }).run(planner, 'go');
      expect(result.status).to.equal('completed');
      expect(seen).to.deep.equal(sentArguments());
      expect(seen).to.not.equal(reply.toolCalls![0]!.arguments);
      expect(Object.isFrozen(seen)).to.equal(true);
    });
  });

  describe('the run’s state', () => {
    class Hotel {
      constructor(readonly name: string) {}
    }
    const refusedStates: Array<{ title: string; state: () => Record<string, unknown>; field: string; found: string }> = [
      { title: 'a Map', state: () => ({ cart: { byId: new Map([['a', 1]]) } }), field: 'state.cart.byId', found: 'a Map' },
      { title: 'a Set', state: () => ({ tags: new Set(['x']) }), field: 'state.tags', found: 'a Set' },
      { title: 'a Date in an array', state: () => ({ stays: [{ from: new Date(0) }] }), field: 'state.stays.0.from', found: 'a Date' },
      { title: 'a typed array', state: () => ({ bytes: new Uint8Array(2) }), field: 'state.bytes', found: 'a Uint8Array' },
      { title: 'a class instance', state: () => ({ hotel: new Hotel('Ritz') }), field: 'state.hotel', found: 'a Hotel' },
      { title: 'a BigInt', state: () => ({ total: 10n }), field: 'state.total', found: 'a bigint' },
      { title: 'a function', state: () => ({ format: () => 'x' }), field: 'state.format', found: 'a function' },
      {
        title: 'a cycle',
        state: () => {
          const a: Record<string, unknown> = { b: {} };
          (a.b as Record<string, unknown>).back = a;
          return { a };
        },
        field: 'state.a.b.back',
        found: 'circular (it contains itself)',
      },
    ];
    for (const { title, state, field, found } of refusedStates) {
      it(`a starting state holding ${title}: ConfigError naming its path, from run$ and run`, async () => {
        const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: new ToolRegistry() });
        const message = `state must hold JSON-like data (plain objects, arrays, strings, numbers, booleans, null and undefined): ${field} is ${found}`;
        expect(() => runner.run$(planner, 'go', { state: state() })).to.throw(ConfigError, message).with.property('field', field);
        const rejected = await runner.run(planner, 'go', { state: state() }).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(rejected).to.be.instanceOf(ConfigError).and.to.include({ field, message });
      });
    }

    it('a delta holding a Set: the recording call fails naming the path; siblings and the state are untouched', async () => {
      const tools = new ToolRegistry()
        .register({ name: 'tag' }, (_args, ctx) => {
          ctx.record({ tags: { chosen: new Set(['sea']) } });
          return 'tagged';
        })
        .register({ name: 'note' }, (_args, ctx) => {
          ctx.record({ note: 'kept' });
          return 'noted';
        });
      const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'tag', arguments: {} }, { id: 'c2', name: 'note', arguments: {} }] }, { text: 'done' }]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'go', { state: { city: 'Lisbon' } });
      const error = result.events.find((e) => e.type === 'TOOL_ERROR') as Extract<RunEvent, { type: 'TOOL_ERROR' }>;
      expect(error).to.deep.include({ callId: 'c1' });
      expect(error.error).to.deep.equal({
        name: 'TypeError',
        message: 'record(delta) takes JSON-like data (plain objects, arrays, strings, numbers, booleans, null and undefined): delta.tags.chosen is a Set',
      });
      expect(result.events.find((e) => e.type === 'TOOL_RESULT')).to.deep.include({ callId: 'c2', result: 'noted' });
      expect(result.state).to.deep.equal({ city: 'Lisbon', note: 'kept' });
    });

    const writes: Array<{ title: string; write: (state: any) => unknown }> = [
      { title: 'pushes onto a nested array', write: (state) => state.cart.items.push('x') },
      { title: 'sorts a nested array in place', write: (state) => state.cart.items.sort() },
      { title: 'sets a key of a nested object', write: (state) => (state.cart.owner.name = 'eve') },
      { title: 'deletes a nested key', write: (state) => delete state.cart.owner },
      { title: 'changes an object inside an array', write: (state) => (state.stays[0].nights = 9) },
      { title: 'sets a top-level key', write: (state) => (state.city = 'Atlantis') },
    ];
    for (const { title, write } of writes) {
      it(`a body that ${title} of ctx.state gets a TypeError; its sibling's view and the run's state are unchanged`, async () => {
        const start = { city: 'Lisbon', cart: { items: ['tea', 'cake'], owner: { name: 'ana' } }, stays: [{ nights: 2 }] };
        let attempt: unknown;
        let siblingSaw: unknown;
        const tools = new ToolRegistry()
          .register({ name: 'sneak' }, (_args, ctx) => {
            try {
              write(ctx.state);
            } catch (error) {
              attempt = error;
            }
            return 'tried';
          })
          .register({ name: 'read' }, async (_args, ctx) => {
            await new Promise((resolve) => setTimeout(resolve, 1));
            siblingSaw = structuredClone(ctx.state);
            return 'read';
          });
        const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'sneak', arguments: {} }, { id: 'c2', name: 'read', arguments: {} }] }, { text: 'done' }]);
        const result = await new AgentRunner({ provider, tools }).run(planner, 'go', { state: start });
        expect(attempt).to.be.instanceOf(TypeError);
        expect(siblingSaw).to.deep.equal(start);
        expect(result.state).to.deep.equal(start);
        expect(start.cart.items, 'the caller’s object').to.deep.equal(['tea', 'cake']);
      });
    }

    it('keeps no part of the caller’s object or of a delta: later changes to either change nothing', async () => {
      const start = { cart: { items: ['tea'] } };
      const seen: unknown[] = [];
      let recorded: { picks: string[] } | undefined;
      const tools = new ToolRegistry().register({ name: 'pick' }, (_args, ctx) => {
        seen.push(structuredClone(ctx.state));
        if (recorded === undefined) {
          recorded = { picks: ['sea view'] };
          ctx.record({ choice: recorded });
        }
        return 'ok';
      });
      const call = { toolCalls: [{ id: 'c1', name: 'pick', arguments: {} }] };
      const provider = new ScriptedProvider([
        call,
        () => {
          start.cart.items.push('changed by the caller');
          recorded!.picks.push('changed by the body');
          return call;
        },
        { text: 'done' },
      ]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'go', { state: start });
      expect(seen).to.deep.equal([{ cart: { items: ['tea'] } }, { cart: { items: ['tea'] }, choice: { picks: ['sea view'] } }]);
      expect(result.state).to.deep.equal({ cart: { items: ['tea'] }, choice: { picks: ['sea view'] } });
    });

    it('hands back a final state frozen all the way down', async () => {
      const tools = new ToolRegistry().register({ name: 'pick' }, (_args, ctx) => {
        ctx.record({ choice: { picks: ['sea view'] } });
        return 'ok';
      });
      const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'pick', arguments: {} }] }, { text: 'done' }]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'go', { state: { rooms: [{ adults: 2 }] } });
      const state = result.state as any;
      expect([state, state.choice, state.choice.picks, state.rooms, state.rooms[0]].every((part) => Object.isFrozen(part))).to.equal(true);
    });
  });
});
