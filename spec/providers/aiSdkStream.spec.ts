// How aiSdkProvider reads a streamed reply, part by part: when a call is complete (its
// tool-input-end, its input becoming a whole JSON object, its tool-call part), what a later
// tool-call part for the same call does, the calls it leaves out; and a doStream whose stream
// arrives after the run was left, with each major's mock model.
import { expect } from 'chai';
import * as t from 'io-ts';
import { MockLanguageModelV3 } from 'ai/test';
import { MockLanguageModelV4 } from 'ai7/test';
import { Agent, AgentRunner, ToolRegistry, type ModelRequest, type ModelStreamPart } from '../../lib/index.js';
import { aiSdkProvider, type AiSdkLanguageModel, type AiSdkStreamPart } from '../../lib/providers/aiSdkProvider.js';
import { streamReader } from '../../lib/providers/aiSdkStream.js';
import type { Observable } from 'rxjs';

/** Every part through one reader, each part's output on its own line (`-` for none). */
function read(parts: readonly AiSdkStreamPart[]): string[] {
  const reader = streamReader();
  return parts.map((part) => {
    const out = reader(part);
    return out === undefined || out.length === 0 ? '-' : out.map((p) => (p.type === 'tool-call' ? `call ${p.id} ${p.name} ${String(p.arguments)}` : p.type === 'text-delta' ? `text ${p.delta}` : JSON.stringify(p))).join(' | ');
  });
}

const start = (id: string, extra: Partial<Extract<AiSdkStreamPart, { type: 'tool-input-start' }>> = {}): AiSdkStreamPart => ({ type: 'tool-input-start', id, toolName: 'lookup', ...extra });
const delta = (id: string, text: string): AiSdkStreamPart => ({ type: 'tool-input-delta', id, delta: text });
const end = (id: string): AiSdkStreamPart => ({ type: 'tool-input-end', id });
const call = (id: string, input: string, extra: { providerExecuted?: boolean } = {}): AiSdkStreamPart => ({ type: 'tool-call', toolCallId: id, toolName: 'lookup', input, ...extra });

describe('aiSdkProvider reading a streamed reply', () => {
  it('hands a call on at its tool-input-end, its arguments the deltas since its start; the later tool-call part is not a second call', () => {
    // Input that never parses (the runner refuses it by name): only tool-input-end completes it.
    expect(read([start('a'), delta('a', '{"city": '), delta('a', 'Lisbon}'), end('a'), call('a', '{"city": Lisbon}')])).to.deep.equal(['-', '-', '-', 'call a lookup {"city": Lisbon}', '-']);
    // Well-formed input is complete at the delta that closes it; tool-input-end then adds nothing.
    expect(read([start('a'), delta('a', '{"city":'), delta('a', ' "Lisbon"'), delta('a', '}\n'), end('a'), call('a', '{"city": "Lisbon"}')])).to.deep.equal([
      '-',
      '-',
      '-',
      'call a lookup {"city": "Lisbon"}\n',
      '-',
      '-',
    ]);
  });

  it('hands a call on once its streamed input is a whole JSON object, before its tool-input-end (written only at the stream’s close by some models)', () => {
    const parts = [start('a'), delta('a', '{"'), delta('a', 'city'), delta('a', '":"Lis}'), delta('a', 'bon"}'), start('b'), delta('b', '{"city":"Porto"}'), end('a'), call('a', '{"city":"Lisbon"}'), end('b'), call('b', '{"city":"Porto"}')];
    expect(read(parts)).to.deep.equal(['-', '-', '-', '-', 'call a lookup {"city":"Lis}bon"}', '-', 'call b lookup {"city":"Porto"}', '-', '-', '-', '-']);
  });

  it('keeps call order for a call whose JSON never closes: g3 and g4 wait for g2, which goes on in its place at its tool-input-end', () => {
    const parts = [
      start('g1'), delta('g1', '{"q":1}'),
      start('g2'), delta('g2', '{"q":'),
      start('g3'), delta('g3', '{"q":3}'),
      start('g4'), delta('g4', '{"q":4}'),
      end('g1'), end('g2'), end('g3'), end('g4'),
      { type: 'finish', usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }, finishReason: { unified: 'tool-calls', raw: 'tool_calls' } } as AiSdkStreamPart,
    ];
    const out = read(parts).filter((line) => line !== '-');
    expect(out.slice(0, 2)).to.deep.equal(['call g1 lookup {"q":1}', 'call g2 lookup {"q": | call g3 lookup {"q":3} | call g4 lookup {"q":4}']);
  });

  it('hands on, at the finish and in its place, a call whose input never completed and got no tool-input-end', () => {
    const parts = [start('g1'), delta('g1', '{"q":'), start('g2'), delta('g2', '{"q":2}'), { type: 'finish', usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }, finishReason: { unified: 'tool-calls', raw: 'tool_calls' } } as AiSdkStreamPart];
    const out = read(parts);
    expect(out.slice(0, 4)).to.deep.equal(['-', '-', '-', '-']);
    expect(out[4]!.startsWith('call g1 lookup {"q": | call g2 lookup {"q":2}')).to.equal(true);
  });

  it('keeps the streamed arguments when a later tool-call part for the same call says otherwise: the call started with them', () => {
    expect(read([start('a'), delta('a', '{"city":"Lisbon"}'), call('a', '{"city":"Porto"}'), end('a')])).to.deep.equal(['-', 'call a lookup {"city":"Lisbon"}', '-', '-']);
  });

  it('waits for the tool-call part when the streamed input is empty, raw text (V4 inputEncoding text), or not streamed at all', () => {
    expect(read([start('a'), end('a'), call('a', '{}')])).to.deep.equal(['-', '-', 'call a lookup {}']);
    expect(read([start('a', { inputEncoding: 'text' }), delta('a', '{"raw": 1}'), end('a'), call('a', '"{\\"raw\\": 1}"')])).to.deep.equal(['-', '-', '-', 'call a lookup "{\\"raw\\": 1}"']);
    expect(read([call('a', '{"city":"Porto"}'), call('a', '{"city":"Porto"}')])).to.deep.equal(['call a lookup {"city":"Porto"}', '-']);
  });

  it('does not hand on an input that is not yet whole, or is JSON but not an object', () => {
    expect(read([start('a'), delta('a', '{"a":{"b":1}'), delta('a', '}')])).to.deep.equal(['-', '-', 'call a lookup {"a":{"b":1}}']);
    expect(read([start('a'), delta('a', '[1]'), end('a')])).to.deep.equal(['-', '-', 'call a lookup [1]']);
  });

  it('leaves out a call the provider runs itself, streamed or not', () => {
    expect(read([start('s', { providerExecuted: true }), delta('s', '{}'), end('s'), call('s', '{}', { providerExecuted: true })])).to.deep.equal(['-', '-', '-', '-']);
  });

  it('reads text, usage and finish reasons of either major, V4’s interrupted as other, and throws an error part', () => {
    const usage = { inputTokens: { total: 3 }, outputTokens: { total: 4 } };
    expect(read([{ type: 'text-delta', id: 't', delta: 'hi' }, { type: 'text-delta', id: 't', delta: '' }, { type: 'reasoning-delta' }, { type: 'finish', finishReason: { unified: 'interrupted', raw: undefined }, usage }])).to.deep.equal([
      'text hi',
      '-',
      '-',
      '{"type":"usage","inputTokens":3,"outputTokens":4} | {"type":"finish","finishReason":"other"}',
    ]);
    const boom = new Error('boom');
    expect(() => streamReader()({ type: 'error', error: boom })).to.throw(boom);
  });
});

const request: ModelRequest = { agent: 'a', model: 'm', instructions: '', messages: [{ role: 'user', content: 'hi' }], tools: [] };

/** A stream that counts its reads and says when it was cancelled; it is read only when asked (no part is pulled ahead). */
function watchedStream(): { stream: ReadableStream<AiSdkStreamPart>; pulls: () => number; cancelled: Promise<unknown> } {
  let pulls = 0;
  let cancelled!: (reason: unknown) => void;
  const stream = new ReadableStream<AiSdkStreamPart>(
    {
      pull: (controller) => {
        pulls++;
        controller.enqueue({ type: 'text-delta', id: 't', delta: 'late' });
      },
      cancel: (reason) => cancelled(reason),
    },
    { highWaterMark: 0 },
  );
  return { stream, pulls: () => pulls, cancelled: new Promise((resolve) => (cancelled = resolve)) };
}

/** A doStream that answers only when told to, ignoring its abort signal, as a slow model may. */
function deferredStream(): { doStream: () => Promise<{ stream: ReadableStream<AiSdkStreamPart> }>; asked: Promise<void>; answer(stream: ReadableStream<AiSdkStreamPart>): void } {
  let answer!: (value: { stream: ReadableStream<AiSdkStreamPart> }) => void;
  let asked!: () => void;
  const askedPromise = new Promise<void>((resolve) => (asked = resolve));
  const reply = new Promise<{ stream: ReadableStream<AiSdkStreamPart> }>((resolve) => (answer = resolve));
  return {
    doStream: () => {
      asked();
      return reply;
    },
    asked: askedPromise,
    answer: (stream) => answer({ stream }),
  };
}

const mocks: ReadonlyArray<readonly [string, (doStream: unknown) => AiSdkLanguageModel]> = [
  ['ai 6, MockLanguageModelV3', (doStream) => new MockLanguageModelV3({ doStream: doStream as never })],
  ['ai 7, MockLanguageModelV4', (doStream) => new MockLanguageModelV4({ doStream: doStream as never })],
];

for (const [title, mock] of mocks) {
  describe(`aiSdkProvider and a stream that arrives after the run was left (${title})`, () => {
    it('cancels the stream, unread, when the reply was unsubscribed before doStream answered', async () => {
      const deferred = deferredStream();
      const reply$ = aiSdkProvider(mock(deferred.doStream)).respond(request, new AbortController().signal) as Observable<ModelStreamPart>;
      const seen: ModelStreamPart[] = [];
      const subscription = reply$.subscribe({ next: (p) => seen.push(p) });
      await deferred.asked;
      subscription.unsubscribe();
      const late = watchedStream();
      deferred.answer(late.stream);
      expect(String(await late.cancelled)).to.include('the reply was left');
      expect(late.pulls()).to.equal(0);
      expect(late.stream.locked).to.equal(false);
      expect(seen).to.deep.equal([]);
    });

    it('cancels the stream, unread, when the run was cancelled while the model was asked', async () => {
      const deferred = deferredStream();
      const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ city: t.string }) }, () => 1);
      const controller = new AbortController();
      const running = new AgentRunner({ provider: aiSdkProvider(mock(deferred.doStream)), tools }).run(new Agent({ name: 'a', instructions: '', model: 'm' }), 'go', { signal: controller.signal });
      await deferred.asked;
      controller.abort('the user left');
      const result = await running;
      expect(result.status).to.equal('cancelled');
      const late = watchedStream();
      deferred.answer(late.stream);
      await late.cancelled;
      expect(late.pulls()).to.equal(0);
    });
  });
}
