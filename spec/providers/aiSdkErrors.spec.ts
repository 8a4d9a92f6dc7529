// A failing AI SDK model keeps its facts on the run's error, as the fetch adapters' errors do:
// the SDK's own APICallError (of `@ai-sdk/provider` 3 and 4), thrown by doStream or doGenerate
// or sent as an error part, gives RUN_FAILED.error and RunResult.error its status, the vendor's
// code, isRetryable and the Retry-After it was sent; a vendor's error object sent mid-stream
// gives its code. Each major's mock model.
import { expect } from 'chai';
import { APICallError as APICallErrorV3 } from '@ai-sdk/provider';
import { APICallError as APICallErrorV4 } from '@ai-sdk/provider-v4';
import { MockLanguageModelV3 } from 'ai/test';
import { MockLanguageModelV4 } from 'ai7/test';
import { Agent, AgentRunner, ToolRegistry, type RunResult } from '../../lib/index.js';
import { ProviderHttpError } from '../../lib/providers.js';
import { aiSdkProvider, fromAiSdkError, type AiSdkLanguageModel } from '../../lib/providers/aiSdkProvider.js';

const planner = new Agent({ name: 'planner', instructions: '', model: 'm' });

type ApiCallErrorClass = typeof APICallErrorV3 | typeof APICallErrorV4;
const majors: ReadonlyArray<readonly [string, ApiCallErrorClass, (options: Record<string, unknown>) => AiSdkLanguageModel]> = [
  ['ai 6', APICallErrorV3, (options) => new MockLanguageModelV3({ provider: 'openai.chat', modelId: 'gpt-4.1-mini', ...options })],
  ['ai 7', APICallErrorV4, (options) => new MockLanguageModelV4({ provider: 'openai.chat', modelId: 'gpt-4.1-mini', ...options })],
];

/** A 429 as the SDK's OpenAI model reports it: the body parsed into `data`, the headers kept. */
const rateLimited = (APICallError: ApiCallErrorClass, headers: Record<string, string> = { 'retry-after': '2' }) =>
  new APICallError({
    message: 'Rate limit reached for gpt-4.1-mini',
    url: 'https://api.openai.com/v1/chat/completions',
    requestBodyValues: {},
    statusCode: 429,
    responseHeaders: headers,
    responseBody: '{"error":{"message":"Rate limit reached for gpt-4.1-mini","type":"requests","code":"rate_limit_exceeded"}}',
    data: { error: { message: 'Rate limit reached for gpt-4.1-mini', type: 'requests', code: 'rate_limit_exceeded' } },
  });

const run = (model: AiSdkLanguageModel, stream = true): Promise<RunResult> => new AgentRunner({ provider: aiSdkProvider(model, { stream }), tools: new ToolRegistry() }).run(planner, 'go');

const failingStream = (error: unknown) => ({
  stream: new ReadableStream({
    start(controller) {
      controller.enqueue({ type: 'stream-start', warnings: [] });
      controller.enqueue({ type: 'error', error });
      controller.close();
    },
  }),
});

for (const [title, APICallError, mock] of majors) {
  describe(`aiSdkProvider keeps an APICallError's facts on the run's error (${title})`, () => {
    const expected = {
      name: 'ProviderError',
      message: 'model provider failed on turn 1: AI SDK model openai.chat/gpt-4.1-mini replied 429 requests: Rate limit reached for gpt-4.1-mini',
      status: 429,
      code: 'requests',
      attempts: 1,
      isRetryable: true,
      retryAfterSeconds: 2,
    };

    it('thrown by doStream', async () => {
      const result = await run(mock({ doStream: async () => Promise.reject(rateLimited(APICallError)) }));
      expect(result.error).to.deep.equal(expected);
      expect(result.events.at(-1)).to.deep.equal({ type: 'RUN_FAILED', error: expected });
    });

    it('thrown by doGenerate', async () => {
      const result = await run(mock({ doGenerate: async () => Promise.reject(rateLimited(APICallError)) }), false);
      expect(result.error).to.deep.equal(expected);
    });

    it('sent as an error part mid-stream', async () => {
      const result = await run(mock({ doStream: [failingStream(rateLimited(APICallError))] }));
      expect(result.error).to.deep.equal(expected);
    });

    it('says a 400 is not worth repeating, and leaves out a Retry-After that was not sent', async () => {
      const badRequest = new APICallError({ message: 'Invalid schema for function', url: 'u', requestBodyValues: {}, statusCode: 400, responseHeaders: {}, data: { type: 'error', error: { type: 'invalid_request_error', message: 'Invalid schema for function' } } });
      const result = await run(mock({ doStream: async () => Promise.reject(badRequest) }));
      expect(result.error).to.deep.include({ status: 400, code: 'invalid_request_error', isRetryable: false, attempts: 1 });
      expect(result.error).not.to.have.property('retryAfterSeconds');
    });

    it('reads a Retry-After in ms, or as an HTTP date, and no status when the vendor could not be reached', () => {
      const ms = fromAiSdkError(rateLimited(APICallError, { 'retry-after-ms': '1500' }), 'm') as ProviderHttpError;
      expect(ms).to.be.instanceOf(ProviderHttpError);
      expect(ms.retryAfterSeconds).to.equal(1.5);
      const now = Date.parse('2026-01-01T00:00:00Z');
      const dated = fromAiSdkError(rateLimited(APICallError, { 'retry-after': 'Thu, 01 Jan 2026 00:00:30 GMT' }), 'm', () => now) as ProviderHttpError;
      expect(dated.retryAfterSeconds).to.equal(30);
      const unreachable = new APICallError({ message: 'Cannot connect to API: connect ECONNREFUSED', url: 'u', requestBodyValues: {}, isRetryable: true });
      const error = fromAiSdkError(unreachable, 'm') as ProviderHttpError;
      expect(error).to.include({ status: undefined, isRetryable: true, retryAfterSeconds: undefined, attempts: 1 });
      expect(error.message).to.equal('m could not be reached: Cannot connect to API: connect ECONNREFUSED');
      expect((error as { cause?: unknown }).cause).to.equal(unreachable);
    });

    it('gives a vendor’s error object sent mid-stream its code, and passes any other failure on as it is', async () => {
      const overloaded = await run(mock({ doStream: [failingStream({ type: 'overloaded_error', message: 'Overloaded' })] }));
      expect(overloaded.error).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 1: AI SDK model openai.chat/gpt-4.1-mini failed mid-stream: overloaded_error: Overloaded', code: 'overloaded_error' });
      const plain = await run(mock({ doStream: async () => Promise.reject(new TypeError('bad prompt')) }));
      expect(plain.error).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 1: bad prompt' });
    });
  });
}
