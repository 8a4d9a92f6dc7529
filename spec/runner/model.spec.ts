// decodeModelResponse checks the common reply by hand and leaves the rest to its codec: the two
// must agree on every reply, and a refusal must read as the codec words it.
import { expect } from 'chai';
import fc from 'fast-check';
import { isLeft, isRight } from 'fp-ts/lib/Either.js';
import { describeFailures } from '../../lib/config/index.js';
import { decodeModelResponse, ModelResponseCodec } from '../../lib/runner/index.js';
import { seed } from '../reliability/seed.js';

// Replies shaped like a provider's, right and wrong in every field, beside anything at all.
const call = fc.record({ id: fc.oneof(fc.string(), fc.integer()), name: fc.oneof(fc.string(), fc.constant(undefined)), arguments: fc.oneof(fc.string(), fc.object(), fc.constant(undefined), fc.integer()) }, { requiredKeys: [] });
const reply = fc.oneof(
  fc.record({ text: fc.oneof(fc.string(), fc.integer()), toolCalls: fc.oneof(fc.array(call, { maxLength: 3 }), fc.string()), finishReason: fc.oneof(fc.constant('stop'), fc.constant('nope')) }, { requiredKeys: [] }),
  fc.record({ text: fc.oneof(fc.string(), fc.constant(null), fc.constant(undefined), fc.integer()), toolCalls: fc.oneof(fc.array(call, { maxLength: 3 }), fc.constant(null), fc.constant(undefined), fc.string(), fc.object()) }, { requiredKeys: [] }),
  fc.anything(),
);

// What the codec is not asked about: a reply must be an object of the contract's keys that says something.
const replyKeys = new Set(['text', 'toolCalls', 'usage', 'finishReason']);
function isReplyShaped(raw: unknown): boolean {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return false;
  for (const key in raw) if (!replyKeys.has(key)) return false;
  const { text, toolCalls, finishReason } = raw as Record<string, unknown>;
  return text != null || toolCalls != null || finishReason != null;
}

describe('decodeModelResponse', () => {
  it('accepts exactly the replies its codec accepts among those shaped as a reply, reads the same text and calls, and words a refusal as the codec does', () => {
    fc.assert(
      fc.property(reply, (raw) => {
        const decoded = decodeModelResponse(raw);
        if (!isReplyShaped(raw)) {
          expect(isLeft(decoded), 'a reply that is not shaped as one is refused').to.equal(true);
          return;
        }
        const codec = ModelResponseCodec.decode(raw);
        expect(isRight(decoded)).to.equal(isRight(codec));
        if (isLeft(decoded) && isLeft(codec)) expect(decoded.left).to.equal(describeFailures(codec.left, 'response'));
        if (isRight(decoded) && isRight(codec)) {
          const { text, toolCalls } = codec.right;
          expect(decoded.right.response.text).to.equal(typeof text === 'string' ? text : undefined);
          expect(decoded.right.response.toolCalls?.length ?? 0).to.equal(toolCalls?.length ?? 0);
        }
      }),
      { numRuns: 500, seed },
    );
  });

  it('reports a reply without malformed calls with an empty map that cannot be filled', () => {
    const decoded = decodeModelResponse({ toolCalls: [{ id: 'a', name: 'search', arguments: '{}' }] });
    if (!isRight(decoded)) throw new Error('expected the reply to decode');
    expect(decoded.right.malformed.size).to.equal(0);
    expect(() => (decoded.right.malformed as Map<number, string>).set(0, 'x')).to.throw(TypeError, /read-only/);
  });
});

describe('a reply in another shape than the contract', () => {
  const refusals: ReadonlyArray<{ readonly title: string; readonly raw: unknown; readonly says: RegExp }> = [
    { title: 'null', raw: null, says: /^response: expected an object with text, toolCalls, usage, finishReason or response, got null$/ },
    { title: 'a string', raw: 'hi', says: /^response: expected an object with text, toolCalls, usage, finishReason or response, got "hi"$/ },
    { title: 'an array', raw: [{ text: 'hi' }], says: /^response: expected an object .*, got \[\{"text":"hi"\}\]$/ },
    { title: 'a number', raw: 42, says: /got 42$/ },
    { title: 'another wire\'s text ({ content })', raw: { content: 'hi' }, says: /^response\.content: not a key of a reply \(expected text, toolCalls, usage, finishReason or response\), got \{"content":"hi"\}$/ },
    { title: 'another wire\'s calls beside a text ({ text, tool_calls })', raw: { text: '', tool_calls: [] }, says: /^response\.tool_calls: not a key of a reply/ },
    { title: 'a misspelt key ({ toolcalls })', raw: { toolcalls: [] }, says: /^response\.toolcalls: not a key/ },
    { title: 'an empty object', raw: {}, says: /^response: expected text or toolCalls \(or a finishReason saying why there are neither\), got \{\}$/ },
    { title: 'a reply with usage alone', raw: { usage: { inputTokens: 1, outputTokens: 0 } }, says: /^response: expected text or toolCalls/ },
    { title: 'a reply whose text and calls are null', raw: { text: null, toolCalls: null }, says: /^response: expected text or toolCalls/ },
  ];
  for (const c of refusals) {
    it(`refuses ${c.title}, saying what came and what was expected`, () => {
      const decoded = decodeModelResponse(c.raw);
      if (!isLeft(decoded)) throw new Error('expected a refusal');
      expect(decoded.left).to.match(c.says);
    });
  }

  const answers: ReadonlyArray<{ readonly title: string; readonly raw: unknown; readonly text: string | undefined; readonly calls: number }> = [
    { title: 'an empty text', raw: { text: '' }, text: '', calls: 0 },
    { title: 'calls alone', raw: { toolCalls: [{ id: 'a', name: 'search', arguments: '{}' }] }, text: undefined, calls: 1 },
    { title: 'an empty call list', raw: { toolCalls: [] }, text: undefined, calls: 0 },
    { title: 'nothing but a finish reason saying why', raw: { finishReason: 'content-filter', usage: { inputTokens: 3, outputTokens: 0 } }, text: undefined, calls: 0 },
    { title: 'an object without a prototype', raw: Object.assign(Object.create(null) as object, { text: 'hi' }), text: 'hi', calls: 0 },
  ];
  for (const c of answers) {
    it(`takes ${c.title} as an answer`, () => {
      const decoded = decodeModelResponse(c.raw);
      if (!isRight(decoded)) throw new Error(`expected an answer, got ${decoded.left}`);
      expect(decoded.right.response.text).to.equal(c.text);
      expect(decoded.right.response.toolCalls?.length ?? 0).to.equal(c.calls);
    });
  }
});
