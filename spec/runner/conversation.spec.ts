// A conversation as a run's input: the earlier turns (their calls and results) reach the model
// as given, on every wire; the result's messages are the whole conversation, ready to append to;
// bad history is a ConfigError naming the message's index and what was expected there.
import { expect } from 'chai';
import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';
import { Agent, AgentRunner, ConfigError, ScriptedProvider, ToolRegistry, type Message, type ModelProvider, type NestedRunResult } from '../../lib/index.js';
import { AnthropicMessagesProvider, OpenAIChatProvider } from '../../lib/providers.js';
import { decodeConversation } from '../../lib/runner/model/conversation.js';
import { fixture, startWireServer, type WireServer } from '../providers/wireServer.js';

const agent = new Agent({ name: 'desk', instructions: 'Find hotels.', model: 'test-model', tools: ['lookup'] });

const tools = (): ToolRegistry =>
  new ToolRegistry().register({ name: 'lookup', args: t.type({ city: t.string }) }, ({ city }) => ({ city, from: 100 }));

/** Two earlier turns: a question answered with one call and its result, then a plain answer, then the new question. */
const earlier: readonly Message[] = [
  { role: 'user', content: 'Hotels in Lisbon?' },
  { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{"city":"Lisbon"}' }] },
  { role: 'tool', toolCallId: 'c1', content: '{"city":"Lisbon","from":122}' },
  { role: 'assistant', content: 'Lisbon from 122.' },
];
const conversation: readonly Message[] = [...earlier, { role: 'user', content: 'And Porto?' }];

describe('a conversation as input', () => {
  it('reaches the model as given, then the run answers its last user message', async () => {
    const provider = new ScriptedProvider([{ text: 'Porto from 115.' }]);
    const result = await new AgentRunner({ provider, tools: tools() }).run(agent, conversation);
    expect(result.status).to.equal('completed');
    expect(provider.requests[0]!.messages).to.deep.equal(conversation);
    const started = result.events[0];
    expect(started).to.deep.include({ type: 'RUN_STARTED', input: 'And Porto?', history: earlier });
  });

  it('gives back the whole conversation, which the next run takes with the next user message appended', async () => {
    const provider = new ScriptedProvider([
      { toolCalls: [{ id: 'c2', name: 'lookup', arguments: { city: 'Porto' } }] },
      { text: 'Porto from 100.' },
      (request) => ({ text: `you asked ${request.messages.filter((m) => m.role === 'user').length} questions` }),
    ]);
    const runner = new AgentRunner({ provider, tools: tools() });
    const first = await runner.run(agent, conversation);
    expect(first.messages).to.deep.equal([
      ...conversation,
      { role: 'assistant', content: '', toolCalls: [{ id: 'c2', name: 'lookup', arguments: { city: 'Porto' } }] },
      { role: 'tool', toolCallId: 'c2', content: '{"city":"Porto","from":100}' },
      { role: 'assistant', content: 'Porto from 100.' },
    ]);
    const next = [...first.messages, { role: 'user' as const, content: 'How many did I ask?' }];
    const second = await runner.run(agent, next);
    expect(provider.requests[2]!.messages).to.deep.equal(next);
    expect(second.output).to.equal('you asked 3 questions');
  });

  it('is copied when the run is made: changing the array afterwards changes nothing the model sees', async () => {
    const provider = new ScriptedProvider([{ text: 'ok' }]);
    const given: Message[] = conversation.map((m) => ({ ...m }));
    const run$ = new AgentRunner({ provider, tools: tools() }).run$(agent, given);
    given[0] = { role: 'user', content: 'changed' };
    given.push({ role: 'assistant', content: 'added' });
    await new Promise<void>((resolve) => run$.subscribe({ complete: resolve }));
    expect(provider.requests[0]!.messages).to.deep.equal(conversation);
  });

  it('reaches a nested run given one through ctx.runAgent', async () => {
    const helper = new Agent({ name: 'helper', instructions: 'help', model: 'test-model', tools: [] });
    const provider = new ScriptedProvider({
      desk: [{ toolCalls: [{ id: 'd1', name: 'delegate', arguments: {} }] }, { text: 'done' }],
      helper: [{ text: 'helped' }],
    });
    const nested: NestedRunResult[] = [];
    const registry = tools().register({ name: 'delegate' }, async (_args, ctx) => {
      const sub = await ctx.runAgent(helper, conversation);
      nested.push(sub);
      return sub.output;
    });
    const desk = new Agent({ name: 'desk', instructions: 'Find hotels.', model: 'test-model', tools: ['delegate'] });
    const result = await new AgentRunner({ provider, tools: registry }).run(desk, 'go');
    expect(result.status).to.equal('completed');
    expect(nested.map((r) => r.output)).to.deep.equal(['helped']);
    expect(provider.requests.find((r) => r.agent === 'helper')!.messages).to.deep.equal(conversation);
  });

  it('rejects ctx.runAgent given a conversation that could not be sent, failing that call alone', async () => {
    const helper = new Agent({ name: 'helper', instructions: 'help', model: 'test-model', tools: [] });
    const provider = new ScriptedProvider({
      desk: [{ toolCalls: [{ id: 'd1', name: 'delegate', arguments: {} }, { id: 'l1', name: 'lookup', arguments: { city: 'Faro' } }] }, { text: 'done' }],
      helper: [],
    });
    const registry = tools().register({ name: 'delegate' }, (_args, ctx) => ctx.runAgent(helper, [{ role: 'assistant', content: 'hi' }]));
    const desk = new Agent({ name: 'desk', instructions: 'Find hotels.', model: 'test-model', tools: ['delegate', 'lookup'] });
    const result = await new AgentRunner({ provider, tools: registry }).run(desk, 'go');
    expect(result.status).to.equal('completed');
    const outcomes = result.events.filter((e) => e.type === 'TOOL_ERROR' || e.type === 'TOOL_RESULT');
    expect(outcomes.map((e) => (e.type === 'TOOL_ERROR' ? `${e.callId} ${e.error.name}: ${e.error.message}` : `${e.callId} ok`))).to.deep.equal([
      'd1 ConfigError: input[0].role: expected "user": a conversation ends with the user message the run answers, got "assistant"',
      'l1 ok',
    ]);
    expect(provider.requests.filter((r) => r.agent === 'helper')).to.deep.equal([]);
  });

  describe('on the built-in wires, earlier calls and results in their own forms', () => {
    let server: WireServer | undefined;
    afterEach(async () => {
      await server?.close();
      server = undefined;
    });

    const wires: Array<{ title: string; prefix: string; make: (url: string) => ModelProvider; expected: unknown[] }> = [
      {
        title: 'OpenAIChatProvider',
        prefix: 'openai',
        make: (url) => new OpenAIChatProvider({ baseURL: `${url}/v1`, apiKey: 'k', stream: false }),
        expected: [
          { role: 'system', content: 'Find hotels.' },
          { role: 'user', content: 'Hotels in Lisbon?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{"city":"Lisbon"}' } }] },
          { role: 'tool', tool_call_id: 'c1', content: '{"city":"Lisbon","from":122}' },
          { role: 'assistant', content: 'Lisbon from 122.' },
          { role: 'user', content: 'And Porto?' },
        ],
      },
      {
        title: 'AnthropicMessagesProvider',
        prefix: 'anthropic',
        make: (url) => new AnthropicMessagesProvider({ baseURL: url, apiKey: 'k', stream: false }),
        expected: [
          { role: 'user', content: [{ type: 'text', text: 'Hotels in Lisbon?' }] },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'c1', name: 'lookup', input: { city: 'Lisbon' } }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'c1', content: '{"city":"Lisbon","from":122}' }] },
          { role: 'assistant', content: [{ type: 'text', text: 'Lisbon from 122.' }] },
          { role: 'user', content: [{ type: 'text', text: 'And Porto?' }] },
        ],
      },
    ];
    for (const wire of wires) {
      it(`${wire.title} sends the history on the first request`, async () => {
        const vendor = (server = await startWireServer([{ body: fixture(`${wire.prefix}-final-text`) }]));
        const result = await new AgentRunner({ provider: wire.make(vendor.url), tools: tools() }).run(agent, conversation);
        expect(result.status).to.equal('completed');
        expect(vendor.received[0]!.body.messages).to.deep.equal(wire.expected);
      });
    }
  });

  describe('bad history', () => {
    const call = (id: string): Message => ({ role: 'assistant', content: '', toolCalls: [{ id, name: 'lookup', arguments: '{}' }] });
    const user: Message = { role: 'user', content: 'go' };
    const cases: Array<{ title: string; input: unknown; field: string; says: string }> = [
      { title: 'an empty conversation', input: [], field: 'input', says: 'expected a conversation: an array of messages ending with the user\'s, got []' },
      { title: 'a tool result with no earlier call', input: [{ role: 'tool', toolCallId: 'c9', content: '{}' }, user], field: 'input[0].toolCallId', says: 'expected the id of a call an earlier assistant message asked for, got "c9"' },
      { title: 'a tool result answering a call of an earlier turn', input: [call('c1'), { role: 'tool', toolCallId: 'c1', content: '1' }, user, { role: 'tool', toolCallId: 'c1', content: '2' }, user], field: 'input[3].toolCallId', says: 'expected the id of a call an earlier assistant message asked for, got "c1"' },
      { title: 'a call answered twice', input: [user, call('c1'), { role: 'tool', toolCallId: 'c1', content: '1' }, { role: 'tool', toolCallId: 'c1', content: '2' }, user], field: 'input[3].toolCallId', says: 'expected the id of a call not answered yet (c1 was answered before), got "c1"' },
      { title: 'an unknown role', input: [user, { role: 'robot', content: 'beep' }, user], field: 'input[1].role', says: 'input[1].role: expected "user" | "assistant" | "tool", got "robot"' },
      { title: 'a system message', input: [{ role: 'system', content: 'be brief' }, user], field: 'input[0].role', says: '(the agent\'s instructions are the system prompt), got "system"' },
      { title: 'missing content', input: [{ role: 'user' }], field: 'input[0].content', says: 'input[0].content: expected string, got undefined' },
      { title: 'a message that is not an object', input: ['hello'], field: 'input[0]', says: 'input[0]: expected a message: an object with a role and content, got "hello"' },
      { title: 'a call without an id', input: [user, { role: 'assistant', content: '', toolCalls: [{ name: 'lookup', arguments: '{}' }] }, user], field: 'input[1].toolCalls[0].id', says: 'expected a non-empty string, got undefined' },
      { title: 'arguments that are not JSON of an object', input: [user, { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'lookup', arguments: '[1' }] }, { role: 'tool', toolCallId: 'c1', content: '' }, user], field: 'input[1].toolCalls[0].arguments', says: 'expected JSON text of an object, got "[1"' },
      { title: 'a call left unanswered before the next message', input: [user, call('c1'), user], field: 'input[2]', says: 'expected a tool message answering call c1 (lookup) of input[1] before the next user message' },
      { title: 'a conversation ending with an answer', input: [user, { role: 'assistant', content: 'hi' }], field: 'input[1].role', says: 'expected "user": a conversation ends with the user message the run answers, got "assistant"' },
      { title: 'a conversation ending with a call', input: [user, call('c1')], field: 'input[2]', says: 'expected a tool message answering call c1 (lookup) of input[1], then the user\'s message' },
      { title: 'calls on a user message', input: [{ role: 'user', content: 'x', toolCalls: [] }], field: 'input[0].toolCalls', says: 'only an assistant asks for calls' },
      { title: 'a toolCallId on a user message', input: [{ role: 'user', content: 'x', toolCallId: 'c1' }], field: 'input[0].toolCallId', says: 'no toolCallId on a user message' },
      { title: 'neither a string nor an array', input: 42, field: 'input', says: 'input must be a string or a conversation (an array of messages), got 42' },
    ];
    for (const c of cases) {
      it(`refuses ${c.title}, naming ${c.field}`, async () => {
        const runner = new AgentRunner({ provider: new ScriptedProvider([]), tools: tools() });
        // run$ throws at once; run rejects with the same error.
        expect(() => runner.run$(agent, c.input as Message[])).to.throw(ConfigError).with.property('field', c.field);
        const error = await runner.run(agent, c.input as Message[]).then(() => undefined, (e: unknown) => e);
        expect(error).to.be.instanceOf(ConfigError);
        expect((error as ConfigError).field).to.equal(c.field);
        expect((error as ConfigError).message).to.contain(c.says);
      });
    }

    describe('an empty input', () => {
      const blank: Array<{ title: string; input: unknown; field: string; says: string }> = [
        { title: 'an empty string', input: '', field: 'input', says: 'input must be the user\'s text, not empty or only whitespace, got ""' },
        { title: 'a string of whitespace', input: ' \n\t ', field: 'input', says: 'not empty or only whitespace, got " \\n\\t "' },
        { title: 'an empty message array', input: [], field: 'input', says: 'expected a conversation: an array of messages ending with the user\'s, got []' },
        { title: 'a conversation whose user message says nothing', input: [{ role: 'user', content: '' }], field: 'input[0].content', says: 'input[0].content: expected the text of the user message the run answers, not empty or only whitespace, got ""' },
        { title: 'a conversation ending with a blank user message', input: [...earlier.slice(0, -1), { role: 'user', content: '   ' }], field: `input[${earlier.length - 1}].content`, says: 'not empty or only whitespace, got "   "' },
      ];
      for (const c of blank) {
        it(`refuses ${c.title}, naming ${c.field}, and asks the model nothing`, async () => {
          const provider = new ScriptedProvider([{ text: 'never' }]);
          const runner = new AgentRunner({ provider, tools: tools() });
          expect(() => runner.run$(agent, c.input as Message[])).to.throw(ConfigError).with.property('field', c.field);
          const error = await runner.run(agent, c.input as Message[]).then(() => undefined, (e: unknown) => e);
          expect(error).to.be.instanceOf(ConfigError);
          expect((error as ConfigError).field).to.equal(c.field);
          expect((error as ConfigError).message).to.contain(c.says);
          expect(provider.requests).to.have.length(0);
        });
      }

      it('refuses a nested run asked with nothing: the calling tool fails alone, the model of the nested agent is not asked', async () => {
        const child = new Agent({ name: 'child', instructions: '', model: 'm' });
        const provider = new ScriptedProvider({ desk: [{ toolCalls: [{ id: 'c1', name: 'delegate', arguments: {} }] }, { text: 'done' }], child: [{ text: 'never' }] });
        const registry = new ToolRegistry().register({ name: 'delegate' }, async (_args, ctx) => (await ctx.runAgent(child, ' ')).output);
        const result = await new AgentRunner({ provider, tools: registry }).run(new Agent({ name: 'desk', instructions: '', model: 'm' }), 'go');
        expect(result.status).to.equal('completed');
        expect(result.events.find((e) => e.type === 'TOOL_ERROR')).to.deep.include({ callId: 'c1', error: { name: 'ConfigError', message: 'input must be the user\'s text, not empty or only whitespace, got " "' } });
        expect(provider.requests.map((r) => r.agent)).to.deep.equal(['desk', 'desk']);
      });

      it('is reported by decodeConversation as a Left too', () => {
        const decoded = decodeConversation([{ role: 'user', content: '' }], 'messages');
        expect(isLeft(decoded) && decoded.left.field).to.equal('messages[0].content');
      });
    });

    it('is reported by decodeConversation as a Left, for an app that checks a request body first', () => {
      const decoded = decodeConversation([{ role: 'tool', toolCallId: 'x', content: '' }], 'messages');
      expect(isLeft(decoded) && decoded.left.field).to.equal('messages[0].toolCallId');
    });
  });
});
