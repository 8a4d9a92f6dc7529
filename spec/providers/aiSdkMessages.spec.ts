// The AI SDK's conversations read into the library's: UIMessage[] (useChat) and ModelMessage[]
// (streamText), typed with the ai package's own types. The two readers agree with each other
// through the ai package's convertToModelMessages, a run takes what they give, and what they
// cannot send is refused naming the place.
import { expect } from 'chai';
import { convertToModelMessages, type ModelMessage, type UIMessage } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import type { LanguageModelV3CallOptions } from '@ai-sdk/provider';
import { Agent, AgentRunner, ConfigError, ScriptedProvider, ToolRegistry, type Message } from '../../lib/index.js';
import { aiSdkProvider, fromModelMessages, fromUIMessages, UNKNOWN_OUTCOME } from '../../lib/providers/aiSdkProvider.js';

/** A chat as useChat holds it: a question answered with two lookups (one failed) and a text, then the next question. */
const chat: UIMessage[] = [
  { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Hotels in Lisbon and Atlantis?' }] },
  {
    id: 'a1',
    role: 'assistant',
    parts: [
      { type: 'step-start' },
      { type: 'reasoning', text: 'two lookups at once' },
      { type: 'tool-lookup', toolCallId: 'c1', state: 'output-available', input: { city: 'Lisbon' }, output: { city: 'Lisbon', from: 122 } },
      { type: 'dynamic-tool', toolName: 'lookup', toolCallId: 'c2', state: 'output-error', input: { city: 'Atlantis' }, errorText: 'Error: no partner covers Atlantis' },
      { type: 'step-start' },
      { type: 'text', text: 'Lisbon from 122.' },
      { type: 'data-progress', data: { done: true } },
    ],
  },
  { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'And Porto?' }] },
];

const expected: Message[] = [
  { role: 'user', content: 'Hotels in Lisbon and Atlantis?' },
  {
    role: 'assistant',
    content: '',
    toolCalls: [
      { id: 'c1', name: 'lookup', arguments: { city: 'Lisbon' } },
      { id: 'c2', name: 'lookup', arguments: { city: 'Atlantis' } },
    ],
  },
  { role: 'tool', toolCallId: 'c1', content: '{"city":"Lisbon","from":122}' },
  { role: 'tool', toolCallId: 'c2', content: 'Error: no partner covers Atlantis', isError: true },
  { role: 'assistant', content: 'Lisbon from 122.' },
  { role: 'user', content: 'And Porto?' },
];

function refusal(read: () => unknown): ConfigError {
  try {
    read();
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('the AI SDK conversations as input', () => {
  it('reads UIMessage[] step by step: each step\'s text and calls, then their outcomes', () => {
    expect(fromUIMessages(chat)).to.deep.equal(expected);
  });

  it('reads the ModelMessage[] the ai package makes of the same chat to the same conversation', async () => {
    const model: ModelMessage[] = await convertToModelMessages(chat.map((m) => ({ ...m, parts: m.parts.filter((p) => !p.type.startsWith('data-')) })));
    expect(fromModelMessages(model)).to.deep.equal(expected);
  });

  it('starts a new step at text after a call when a message has no step-start parts', () => {
    const messages: UIMessage[] = [
      { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'go' }] },
      {
        id: 'a1',
        role: 'assistant',
        parts: [
          { type: 'text', text: 'Looking.' },
          { type: 'tool-lookup', toolCallId: 'c1', state: 'output-available', input: { city: 'Faro' }, output: 90 },
          { type: 'text', text: 'Faro from 90.' },
        ],
      },
      { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'thanks' }] },
    ];
    expect(fromUIMessages(messages)).to.deep.equal([
      { role: 'user', content: 'go' },
      { role: 'assistant', content: 'Looking.', toolCalls: [{ id: 'c1', name: 'lookup', arguments: { city: 'Faro' } }] },
      { role: 'tool', toolCallId: 'c1', content: '90' },
      { role: 'assistant', content: 'Faro from 90.' },
      { role: 'user', content: 'thanks' },
    ]);
  });

  it('sends a call cut off before its outcome on as unknown when asked, so a stopped chat can go on', () => {
    const stopped: UIMessage[] = [
      chat[0]!,
      {
        id: 'a1',
        role: 'assistant',
        parts: [
          { type: 'step-start' },
          { type: 'tool-lookup', toolCallId: 'c1', state: 'output-available', input: { city: 'Lisbon' }, output: 122 },
          { type: 'tool-book', toolCallId: 'c2', state: 'input-available', input: { city: 'Lisbon' } },
        ],
      },
      { id: 'u2', role: 'user', parts: [{ type: 'text', text: 'Did it book?' }] },
    ];
    expect(refusal(() => fromUIMessages(stopped)).field).to.equal('messages[1].parts[2].state');
    expect(fromUIMessages(stopped, { incompleteCalls: 'unknown' }).slice(1)).to.deep.equal([
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { id: 'c1', name: 'lookup', arguments: { city: 'Lisbon' } },
          { id: 'c2', name: 'book', arguments: { city: 'Lisbon' } },
        ],
      },
      { role: 'tool', toolCallId: 'c1', content: '122' },
      { role: 'tool', toolCallId: 'c2', content: UNKNOWN_OUTCOME, isError: true },
      { role: 'user', content: 'Did it book?' },
    ]);
    expect(UNKNOWN_OUTCOME).to.contain('The side effect may have landed');
  });

  it('reads every tool result output of a ModelMessage, errors and denials marked', () => {
    const calls = ['t', 'j', 'et', 'ej', 'd', 'c'].map((id) => ({ type: 'tool-call' as const, toolCallId: id, toolName: 'lookup', input: {} }));
    const messages: ModelMessage[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: calls },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 't', toolName: 'lookup', output: { type: 'text', value: 'plain' } },
          { type: 'tool-result', toolCallId: 'j', toolName: 'lookup', output: { type: 'json', value: { a: 1 } } },
          { type: 'tool-result', toolCallId: 'et', toolName: 'lookup', output: { type: 'error-text', value: 'boom' } },
          { type: 'tool-result', toolCallId: 'ej', toolName: 'lookup', output: { type: 'error-json', value: { code: 7 } } },
          { type: 'tool-result', toolCallId: 'd', toolName: 'lookup', output: { type: 'execution-denied', reason: 'not today' } },
          { type: 'tool-result', toolCallId: 'c', toolName: 'lookup', output: { type: 'content', value: [{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }] } },
        ],
      },
      { role: 'user', content: [{ type: 'text', text: 'next' }] },
    ];
    expect(fromModelMessages(messages).slice(2, 8)).to.deep.equal([
      { role: 'tool', toolCallId: 't', content: 'plain' },
      { role: 'tool', toolCallId: 'j', content: '{"a":1}' },
      { role: 'tool', toolCallId: 'et', content: 'boom', isError: true },
      { role: 'tool', toolCallId: 'ej', content: '{"code":7}', isError: true },
      { role: 'tool', toolCallId: 'd', content: 'the call was not approved: not today', isError: true },
      { role: 'tool', toolCallId: 'c', content: 'one\ntwo' },
    ]);
  });

  it('gives a run what reaches the model as the conversation given', async () => {
    const provider = new ScriptedProvider([{ text: 'Porto from 115.' }]);
    const runner = new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'lookup' }, () => null) });
    const result = await runner.run(new Agent({ name: 'desk', instructions: 'Find hotels.', model: 'm' }), fromUIMessages(chat));
    expect(result.status).to.equal('completed');
    expect(provider.requests[0]!.messages).to.deep.equal(expected);
  });

  it('goes back to an AI SDK model through aiSdkProvider as the prompt\'s earlier messages, calls and results in their parts', async () => {
    const model = new MockLanguageModelV3({
      doGenerate: [
        {
          content: [{ type: 'text', text: 'Porto from 115.' }],
          finishReason: { unified: 'stop', raw: 'stop' },
          usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } },
          warnings: [],
        },
      ],
    });
    const history: ModelMessage[] = [
      { role: 'user', content: 'Hotels in Lisbon?' },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: { city: 'Lisbon' } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'lookup', output: { type: 'json', value: { city: 'Lisbon', from: 122 } } }] },
      { role: 'assistant', content: 'Lisbon from 122.' },
      { role: 'user', content: 'And Porto?' },
    ];
    const runner = new AgentRunner({ provider: aiSdkProvider(model, { stream: false }), tools: new ToolRegistry().register({ name: 'lookup' }, () => null) });
    const result = await runner.run(new Agent({ name: 'desk', instructions: 'Find hotels.', model: 'mock' }), fromModelMessages(history));
    expect(result.status).to.equal('completed');
    const [first] = model.doGenerateCalls as [LanguageModelV3CallOptions];
    expect(first.prompt).to.deep.equal([
      { role: 'system', content: 'Find hotels.' },
      { role: 'user', content: [{ type: 'text', text: 'Hotels in Lisbon?' }] },
      { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: { city: 'Lisbon' } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'lookup', output: { type: 'text', value: '{"city":"Lisbon","from":122}' } }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Lisbon from 122.' }] },
      { role: 'user', content: [{ type: 'text', text: 'And Porto?' }] },
    ]);
  });

  describe('refuses, naming the place and what was expected', () => {
    const cases: Array<{ title: string; read: () => unknown; field: string; says: string }> = [
      {
        title: 'a system UI message',
        read: () => fromUIMessages([{ id: 's', role: 'system', parts: [{ type: 'text', text: 'be brief' }] }, ...chat]),
        field: 'messages[0].role',
        says: 'the agent\'s instructions are the system prompt',
      },
      {
        title: 'a file part',
        read: () => fromUIMessages([{ id: 'u', role: 'user', parts: [{ type: 'text', text: 'see' }, { type: 'file', mediaType: 'image/png', url: 'data:,' }] }]),
        field: 'messages[0].parts[1].type',
        says: 'expected "text" (a user message is sent as its text), got "file"',
      },
      {
        title: 'a call still without its outcome',
        read: () => fromUIMessages([chat[0]!, { id: 'a', role: 'assistant', parts: [{ type: 'tool-lookup', toolCallId: 'c1', state: 'input-available', input: {} }] }]),
        field: 'messages[1].parts[0].state',
        says: '(a call in the history needs its outcome; incompleteCalls: \'unknown\' sends it on as unknown), got "input-available"',
      },
      {
        title: 'a UI message without parts',
        read: () => fromUIMessages([{ id: 'u', role: 'user' } as unknown as UIMessage]),
        field: 'messages[0].parts',
        says: 'expected an array of parts, got undefined',
      },
      {
        title: 'a system model message',
        read: () => fromModelMessages([{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }]),
        field: 'messages[0].role',
        says: 'leave system messages out',
      },
      {
        title: 'an image in a user model message',
        read: () => fromModelMessages([{ role: 'user', content: [{ type: 'image', image: new URL('https://example.com/a.png') }] }]),
        field: 'messages[0].content[0].type',
        says: 'got "image"',
      },
      {
        title: 'media in a tool result',
        read: () =>
          fromModelMessages([
            { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c', toolName: 'x', output: { type: 'content', value: [{ type: 'media', data: '', mediaType: 'image/png' }] } }] },
          ]),
        field: 'messages[0].content[0].output.value[0].type',
        says: 'expected "text" (a tool result is sent as text), got "media"',
      },
      {
        title: 'an unknown role',
        read: () => fromModelMessages([{ role: 'robot', content: 'beep' } as unknown as ModelMessage]),
        field: 'messages[0].role',
        says: 'expected "user", "assistant" or "tool", got "robot"',
      },
    ];
    for (const c of cases) {
      it(c.title, () => {
        const error = refusal(c.read);
        expect(error.field).to.equal(c.field);
        expect(error.message).to.contain(c.says);
      });
    }
  });
});

describe('the AI SDK conversation readers\' declarations', () => {
  it('name no ai package, not even for types: their shapes are written out structurally', async () => {
    const { readFile } = await import('node:fs/promises');
    const source = await readFile(new URL('../../lib/providers/aiSdkMessages.ts', import.meta.url), 'utf8');
    const imported = [...source.matchAll(/^import[^;]*?from\s+'([^']+)'/gms)].map((m) => m[1]);
    expect(imported.filter((specifier) => !specifier!.startsWith('.'))).to.deep.equal([]);
  });
});
