// The OpenAI and Anthropic stream decoders, event by event: when each call of a streamed reply is
// handed on and in what order, for calls whose JSON never closes, pieces that go back to an
// earlier call, an index given to a second call, and blocks that overlap or never stop. Each line
// of a reading is what one event handed on ('-' for nothing).
import { expect } from 'chai';
import type { ModelStreamPart } from '../../lib/index.js';
import { MessagesStreamEvents } from '../../lib/providers/AnthropicMessagesProvider.js';
import { ChatCompletionChunks } from '../../lib/providers/OpenAIChatProvider.js';

type Decoder = { event(event: { data: string; event?: string }, emit: (part: ModelStreamPart) => void): boolean };

/** What each event hands on: the calls as `id args`, joined with ` | `; '-' for none. Other parts are left out. */
function read(decoder: Decoder, events: ReadonlyArray<{ data: string; event?: string }>): string[] {
  return events.map((event) => {
    const calls: string[] = [];
    decoder.event(event, (part) => {
      if (part.type === 'tool-call') calls.push(`${part.id} ${typeof part.arguments === 'string' ? part.arguments : JSON.stringify(part.arguments)}`);
    });
    return calls.length === 0 ? '-' : calls.join(' | ');
  });
}

describe('ChatCompletionChunks: the order a streamed chat completion’s calls go on in', () => {
  const chunk = (delta: object, finish: string | null = null): { data: string } => ({ data: JSON.stringify({ id: 'c', model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] }) });
  const opens = (index: number, id: string, args = ''): { data: string } => chunk({ tool_calls: [{ index, id, type: 'function', function: { name: 'lookup', arguments: args } }] });
  const piece = (index: number, args: string): { data: string } => chunk({ tool_calls: [{ index, function: { arguments: args } }] });
  const finish = chunk({}, 'tool_calls');
  const decoder = (): ChatCompletionChunks => new ChatCompletionChunks('openai');

  it('hands each call on at the piece that closes its object, not when the next call starts', () => {
    expect(read(decoder(), [opens(0, 'g1'), piece(0, '{"q":'), piece(0, '1}'), opens(1, 'g2', '{"q":2}'), finish])).to.deep.equal(['-', '-', 'g1 {"q":1}', 'g2 {"q":2}', '-']);
  });

  it('keeps the place of a call whose arguments never parse: the calls after it wait, and all go on at the finish in call order', () => {
    expect(read(decoder(), [opens(0, 'g1', '{"q":1}'), opens(1, 'g2', '{"q":'), opens(2, 'g3', '{"q":3}'), opens(3, 'g4', '{"q":4}'), finish])).to.deep.equal([
      'g1 {"q":1}',
      '-',
      '-',
      '-',
      'g2 {"q": | g3 {"q":3} | g4 {"q":4}',
    ]);
  });

  it('joins pieces that go back to an earlier index to that call: each call once, with all its pieces', () => {
    const events = [opens(0, 'g1', '{"q":'), opens(1, 'g2', '{"q":'), piece(0, '1}'), opens(2, 'g3', '{"q":3}'), piece(1, '2}'), finish];
    expect(read(decoder(), events)).to.deep.equal(['-', '-', 'g1 {"q":1}', '-', 'g2 {"q":2} | g3 {"q":3}', '-']);
  });

  it('reads a new id at an index in use as the next call (a server giving every call index 0), the one there over', () => {
    const events = [opens(0, 'g1', '{"q":'), opens(0, 'g2', '{"q":2}'), opens(0, 'g3', '{"q":'), piece(0, '3}'), finish];
    expect(read(decoder(), events)).to.deep.equal(['-', 'g1 {"q": | g2 {"q":2}', '-', 'g3 {"q":3}', '-']);
  });

  it('does not read a piece for a call whose object already closed', () => {
    expect(read(decoder(), [opens(0, 'g1', '{"q":1}'), piece(0, '}'), opens(1, 'g2', '{"q":2}'), finish])).to.deep.equal(['g1 {"q":1}', '-', 'g2 {"q":2}', '-']);
  });

  it('hands on a call with no arguments at the finish, in its place', () => {
    expect(read(decoder(), [opens(0, 'g1'), opens(1, 'g2', '{"q":2}'), finish])).to.deep.equal(['-', '-', 'g1  | g2 {"q":2}']);
  });
});

describe('MessagesStreamEvents: the order a streamed Messages reply’s calls go on in', () => {
  const event = (type: string, data: object): { event: string; data: string } => ({ event: type, data: JSON.stringify({ type, ...data }) });
  const start = (index: number, id: string) => event('content_block_start', { index, content_block: { type: 'tool_use', id, name: 'lookup', input: {} } });
  const delta = (index: number, json: string) => event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: json } });
  const stop = (index: number) => event('content_block_stop', { index });
  const messageStop = event('message_stop', {});
  const decoder = (): MessagesStreamEvents => new MessagesStreamEvents('anthropic');

  it('hands a block whose input never forms JSON on at its stop, in its place, as the text written', () => {
    const events = [start(0, 'g1'), delta(0, '{"q":1}'), stop(0), start(1, 'g2'), delta(1, '{"q":'), stop(1), start(2, 'g3'), delta(2, '{"q":3}'), stop(2), messageStop];
    expect(read(decoder(), events)).to.deep.equal(['-', '-', 'g1 {"q":1}', '-', '-', 'g2 {"q":', '-', '-', 'g3 {"q":3}', '-']);
  });

  it('holds a block that stopped while an earlier one is open: overlapping blocks go on in the order they started', () => {
    const events = [start(0, 'g1'), start(1, 'g2'), delta(1, '{"q":2}'), stop(1), delta(0, '{"q":'), stop(0), messageStop];
    expect(read(decoder(), events)).to.deep.equal(['-', '-', '-', '-', '-', 'g1 {"q": | g2 {"q":2}', '-']);
  });

  it('hands on at message_stop, in its place, a block that never stopped, with what was written of it', () => {
    const events = [start(0, 'g1'), delta(0, '{"q":1}'), stop(0), start(1, 'g2'), delta(1, '{"q":'), start(2, 'g3'), delta(2, '{"q":3}'), stop(2), messageStop];
    expect(read(decoder(), events)).to.deep.equal(['-', '-', 'g1 {"q":1}', '-', '-', '-', '-', '-', 'g2 {"q": | g3 {"q":3}']);
  });
});
