// The wire mappings on their own, both ways: a ModelRequest as each wire spells it (roles,
// call order, the error flag, object arguments), and each wire's reply as a ModelResponse
// (several calls in order, text beside calls, blocks this library does not read).
import { expect } from 'chai';
import { fromChatCompletion, fromMessagesReply, ProviderReplyError, toChatCompletionRequest, toMessagesRequest } from '../../lib/providers.js';
import type { ModelRequest } from '../../lib/index.js';
import { fixture } from './wireServer.js';

/** A second-turn request: the user, one assistant turn of two calls, their two results (the second failed). */
const secondTurn: ModelRequest = {
  agent: 'planner',
  model: 'm',
  instructions: 'Be brief.',
  messages: [
    { role: 'user', content: 'Lisbon and Porto?' },
    {
      role: 'assistant',
      content: '',
      toolCalls: [
        { id: 'a', name: 'lookup', arguments: { city: 'Lisbon' } },
        { id: 'b', name: 'lookup', arguments: '{"city":"Porto"}' },
      ],
    },
    { role: 'tool', toolCallId: 'a', content: '{"from":122}' },
    { role: 'tool', toolCallId: 'b', content: 'ToolTimedOutError: lookup timed out', isError: true },
  ],
  tools: [{ name: 'lookup', description: 'Prices', parameters: { type: 'object' } }],
};

describe('toChatCompletionRequest', () => {
  it('sends the instructions as a system message, calls as tool_calls with JSON text, results as tool messages in order', () => {
    expect(toChatCompletionRequest(secondTurn, { temperature: 0 })).to.deep.equal({
      temperature: 0,
      model: 'm',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Lisbon and Porto?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'a', type: 'function', function: { name: 'lookup', arguments: '{"city":"Lisbon"}' } },
            { id: 'b', type: 'function', function: { name: 'lookup', arguments: '{"city":"Porto"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'a', content: '{"from":122}' },
        { role: 'tool', tool_call_id: 'b', content: 'ToolTimedOutError: lookup timed out' },
      ],
      tools: [{ type: 'function', function: { name: 'lookup', description: 'Prices', parameters: { type: 'object' } } }],
    });
  });

  it('sends no tools field when the agent has no tools', () => {
    expect(toChatCompletionRequest({ ...secondTurn, tools: [] })).not.to.have.property('tools');
  });
});

describe('toMessagesRequest', () => {
  it('sends the instructions as system, calls as tool_use blocks, and the results as tool_result blocks of one user message, in order', () => {
    expect(toMessagesRequest(secondTurn, 1024)).to.deep.equal({
      model: 'm',
      max_tokens: 1024,
      system: 'Be brief.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Lisbon and Porto?' }] },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'a', name: 'lookup', input: { city: 'Lisbon' } },
            { type: 'tool_use', id: 'b', name: 'lookup', input: { city: 'Porto' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'a', content: '{"from":122}' },
            { type: 'tool_result', tool_use_id: 'b', content: 'ToolTimedOutError: lookup timed out', is_error: true },
          ],
        },
      ],
      tools: [{ name: 'lookup', description: 'Prices', input_schema: { type: 'object' } }],
    });
  });

  it('shows arguments that were not a JSON object as an empty input (the call was refused before dispatch)', () => {
    const body = toMessagesRequest(
      { ...secondTurn, messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'Trying.', toolCalls: [{ id: 'a', name: 'lookup', arguments: '{not json' }] }] },
      10,
    ) as { messages: Array<{ content: unknown[] }> };
    expect(body.messages[1]!.content).to.deep.equal([
      { type: 'text', text: 'Trying.' },
      { type: 'tool_use', id: 'a', name: 'lookup', input: {} },
    ]);
  });
});

describe('fromChatCompletion', () => {
  it('reads several tool calls in order, with their arguments as JSON text, the usage and the finish reason', () => {
    expect(fromChatCompletion(fixture('openai-three-calls'), 'w')).to.deep.equal({
      toolCalls: [
        { id: 'call_lis1x2ZCI4Wq', name: 'lookup', arguments: '{"city":"Lisbon"}' },
        { id: 'call_atl8cQ0bWtE3', name: 'lookup', arguments: '{"city":"Atlantis"}' },
        { id: 'call_por5nT7qYs9M', name: 'lookup', arguments: '{"city":"Porto"}' },
      ],
      usage: { inputTokens: 82, outputTokens: 64 },
      finishReason: 'tool-calls',
      response: { id: 'chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG', model: 'gpt-4.1-mini-2025-04-14' },
    });
  });

  it('reads a final answer as text', () => {
    expect(fromChatCompletion(fixture('openai-final-text'), 'w')).to.deep.equal({
      text: 'Lisbon from 122, Porto from 115; no partner covers Atlantis.',
      usage: { inputTokens: 171, outputTokens: 19 },
      finishReason: 'stop',
      response: { id: 'chatcmpl-B9MHEm1BqlXvRkPcQ1o2ZkdM1ZQfN', model: 'gpt-4.1-mini-2025-04-14' },
    });
  });

  it('maps the finish reasons it knows, and any other as other', () => {
    const reason = (finish_reason: string) => fromChatCompletion({ choices: [{ message: { content: 'x' }, finish_reason }] }, 'w').finishReason;
    expect(['stop', 'length', 'tool_calls', 'content_filter', 'something_new'].map(reason)).to.deep.equal(['stop', 'length', 'tool-calls', 'content-filter', 'other']);
  });

  it('refuses a reply with no choices, saying so', () => {
    expect(() => fromChatCompletion({ choices: [] }, 'w')).to.throw(ProviderReplyError, 'reply.choices: expected at least one choice, got []');
  });

  it('refuses a reply without choices, naming the path', () => {
    expect(() => fromChatCompletion({ error: null }, 'w')).to.throw(ProviderReplyError, 'reply.choices: expected Array<');
  });
});

describe('fromMessagesReply', () => {
  it('reads text and several tool_use blocks, in order, arguments as objects, the usage and the stop reason', () => {
    expect(fromMessagesReply(fixture('anthropic-three-calls'), 'w')).to.deep.equal({
      text: "I'll look up all three cities at once.",
      toolCalls: [
        { id: 'toolu_01LisbonA8bPq3kLsM9vWx', name: 'lookup', arguments: { city: 'Lisbon' } },
        { id: 'toolu_01AtlantisT4cRz8mNvQ2y', name: 'lookup', arguments: { city: 'Atlantis' } },
        { id: 'toolu_01PortoK7dWs2xJbE5tHn', name: 'lookup', arguments: { city: 'Porto' } },
      ],
      usage: { inputTokens: 412, outputTokens: 137 },
      finishReason: 'tool-calls',
      response: { id: 'msg_01Aq9w938a90dw8q2YQJ3Rxs', model: 'claude-sonnet-4-5-20250929' },
    });
  });

  it('counts the tokens read from and written to the prompt cache as input, and maps the stop reasons', () => {
    const reply = (stop_reason: string) => ({ content: [], stop_reason, usage: { input_tokens: 10, cache_creation_input_tokens: 100, cache_read_input_tokens: 1000, output_tokens: 5 } });
    expect(fromMessagesReply(reply('end_turn'), 'w')).to.deep.equal({ usage: { inputTokens: 1110, outputTokens: 5 }, finishReason: 'stop' });
    expect(['end_turn', 'stop_sequence', 'max_tokens', 'tool_use', 'refusal', 'pause_turn'].map((r) => fromMessagesReply(reply(r), 'w').finishReason)).to.deep.equal([
      'stop',
      'stop',
      'length',
      'tool-calls',
      'content-filter',
      'other',
    ]);
  });

  it('skips blocks it does not read (thinking) and joins the text blocks', () => {
    const reply = { content: [{ type: 'thinking', thinking: 'hmm', signature: 'x' }, { type: 'text', text: 'Lis' }, { type: 'text', text: 'bon' }] };
    expect(fromMessagesReply(reply, 'w')).to.deep.equal({ text: 'Lisbon' });
  });

  it('names every malformed block by its path', () => {
    const reply = { content: [{ type: 'text', text: 5 }, { type: 'tool_use', id: 'x', name: 'lookup', input: 'Lisbon' }] };
    expect(() => fromMessagesReply(reply, 'w')).to.throw(
      ProviderReplyError,
      'reply.content.0.text: expected string, got 5; reply.content.1.input: expected UnknownRecord, got "Lisbon"',
    );
  });
});
