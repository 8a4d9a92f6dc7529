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
  fc.record({ text: fc.oneof(fc.string(), fc.constant(null), fc.constant(undefined), fc.integer()), toolCalls: fc.oneof(fc.array(call, { maxLength: 3 }), fc.constant(null), fc.constant(undefined), fc.string(), fc.object()) }, { requiredKeys: [] }),
  fc.anything(),
);

describe('decodeModelResponse', () => {
  it('accepts exactly the replies its codec accepts, reads the same text and calls, and words a refusal as the codec does', () => {
    fc.assert(
      fc.property(reply, (raw) => {
        const decoded = decodeModelResponse(raw);
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
