// Any Vercel AI SDK language model as a ModelProvider, so every provider the AI SDK supports
// (OpenAI, Anthropic, Google, Bedrock, OpenAI-compatible local servers) runs inside the lanes.
// It speaks the AI SDK's model interface directly, of either major: LanguageModelV3 (`ai` 6,
// `@ai-sdk/provider` 3) and LanguageModelV4 (`ai` 7, `@ai-sdk/provider` 4), the version read from
// the model. The conversation goes out as the SDK's prompt, tool specs as JSON Schema from the
// io-ts codecs, and the reply streams back (doStream) as the runner's stream parts, each tool
// call handed on as soon as its input is complete (aiSdkStream.ts). The AI SDK is an optional
// peer dependency: these files import only its types, so nothing of it loads unless a model of
// it is passed in. This file is the `agent-lanes/ai-sdk` entry point: with it, the AI SDK's own
// tools as the runner's (aiSdkTools.ts) and inside the lanes of an AI SDK loop (aiSdkLanes.ts).
import { Observable } from 'rxjs';
import { describeValue, refuseUnknownFields } from '../config/index.js';
import { ConfigError } from '../errors.js';
import type { ModelProvider, ModelRequest, ModelStreamPart } from '../runner/index.js';
import { fromAiSdkError, fromAiSdkStreamError } from './aiSdkErrors.js';
import { fromAiSdkContent, providerNameOf, toAiSdkPrompt, toAiSdkTools, type AiSdkLanguageModel, type AiSdkModel, type AiSdkModelCallOptions, type AiSdkStreamPart } from './aiSdkModel.js';
import { streamReader } from './aiSdkStream.js';

export {
  fromAiSdkContent,
  toAiSdkPrompt,
  toAiSdkTools,
  type AiSdkContentPart,
  type AiSdkFinishReason,
  type AiSdkLanguageModel,
  type AiSdkLanguageModelV4,
  type AiSdkModelCallOptions,
  type AiSdkStreamPart,
  type AiSdkUsage,
} from './aiSdkModel.js';
export { fromAiSdkError } from './aiSdkErrors.js';
export { fromModelMessages, fromUIMessages, UNKNOWN_OUTCOME, type AiSdkPartLike, type FromUIMessagesOptions, type ModelMessageLike, type UIMessageLike } from './aiSdkMessages.js';

/** The call options the adapter sends besides the prompt, the tools and the signal. */
export type AiSdkCallOptions = Omit<AiSdkModelCallOptions, 'prompt' | 'tools' | 'toolChoice' | 'abortSignal'>;

export interface AiSdkProviderOptions {
  /**
   * true (the default): `doStream`, the reply as stream parts, so each call starts as soon as the
   * model has written it; false: `doGenerate`, one whole reply.
   */
  readonly stream?: boolean;
  /** Sent with every call: `maxOutputTokens`, `temperature`, `providerOptions`, `headers`, ... */
  readonly callOptions?: AiSdkCallOptions;
}

const fields = ['stream', 'callOptions'];

/**
 * Any Vercel AI SDK language model as a ModelProvider: a `LanguageModelV3` (what
 * `openai('gpt-4.1')`, `anthropic('claude-sonnet-4-5')` and the other providers of `ai` 6 give)
 * or a `LanguageModelV4` (the same of `ai` 7), told apart by the model's `specificationVersion`.
 * The model object decides which model answers; the agent's `model` is not sent.
 *
 * Streams by default: the reply comes through `doStream`, text deltas go to `activity$`, and
 * each tool call starts inside its lanes as soon as its input is complete: at its
 * `tool-input-end`, or once its streamed input is a whole JSON object, or at its `tool-call`
 * part, whichever comes first (see `streamReader`). An `error` part fails the turn. Tool results
 * go back as tool-result parts in call order.
 *
 * A failure keeps its facts: the SDK's `APICallError` becomes a ProviderHttpError with `status`
 * (its `statusCode`), the vendor's `code`, `isRetryable` and `retryAfterSeconds` (from its
 * response headers), which the run's `RUN_FAILED.error` and `RunResult.error` carry. The adapter
 * does not retry: the SDK's retries live in `generateText` and `streamText`, not in its models.
 *
 * ## Example
 * ```ts
 * import { openai } from '@ai-sdk/openai';
 * const runner = new AgentRunner({ provider: aiSdkProvider(openai('gpt-4.1-mini')), tools });
 * await runner.run(new Agent({ name: 'planner', instructions: 'Plan.', model: 'gpt-4.1-mini' }), 'Four hotels in Lisbon');
 * ```
 */
export function aiSdkProvider(model: AiSdkLanguageModel, options: AiSdkProviderOptions = {}): ModelProvider {
  if (model === null || typeof model !== 'object' || typeof model.doStream !== 'function' || typeof model.doGenerate !== 'function') {
    throw new ConfigError('model', `aiSdkProvider: model must be an AI SDK language model object (with doStream and doGenerate), got ${typeof model === 'string' ? `the string ${describeValue(model)}: pass the provider's model, e.g. openai('gpt-4.1-mini')` : describeValue(model)}`);
  }
  const version: unknown = model.specificationVersion;
  if (version !== 'v3' && version !== 'v4') {
    throw new ConfigError(
      'model',
      `aiSdkProvider: model must implement the AI SDK's LanguageModelV3 (ai 6, @ai-sdk/provider 3) or LanguageModelV4 (ai 7, @ai-sdk/provider 4), got specificationVersion ${describeValue(version)}`,
    );
  }
  if (options === null || typeof options !== 'object') throw new ConfigError('aiSdkProvider', `aiSdkProvider options must be an object, got ${describeValue(options)}`);
  refuseUnknownFields(options, fields, 'aiSdkProvider', { noun: 'option' });
  const { stream = true, callOptions = {} } = options;
  if (typeof stream !== 'boolean') throw new ConfigError('stream', `stream must be true or false, got ${describeValue(stream)}`);
  if (callOptions === null || typeof callOptions !== 'object') throw new ConfigError('callOptions', `callOptions must be an object, got ${describeValue(callOptions)}`);
  // Both majors are called the same way: the fields read differ in nothing the adapter uses.
  const sdk = model as AiSdkModel;
  // How errors name the model: `AI SDK model openai.chat/gpt-4.1-mini`.
  const label = `AI SDK model ${String(sdk.provider)}/${String(sdk.modelId)}`;
  // What tracing names the provider (gen_ai.provider.name), from the model's provider package.
  const providerName = providerNameOf(sdk.provider);
  const named = providerName === undefined ? {} : { providerName };

  const callFor = (request: ModelRequest, abortSignal: AbortSignal): AiSdkModelCallOptions => {
    const tools = toAiSdkTools(request);
    return { ...callOptions, prompt: toAiSdkPrompt(request), ...(tools.length > 0 ? { tools, toolChoice: { type: 'auto' } } : {}), abortSignal };
  };

  if (!stream) {
    return {
      ...named,
      respond: async (request, signal) => {
        let result: Awaited<ReturnType<AiSdkModel['doGenerate']>>;
        try {
          result = await sdk.doGenerate(callFor(request, signal));
        } catch (error) {
          throw fromAiSdkError(error, label);
        }
        return fromAiSdkContent(result.content, result.finishReason, result.usage, result.response);
      },
    };
  }

  return {
    ...named,
    respond: (request, signal) =>
      new Observable<ModelStreamPart>((subscriber) => {
        // The call's own controller: aborted by the request's signal, or by unsubscribing.
        const controller = new AbortController();
        const onAbort = (): void => controller.abort(signal.reason);
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
        // Set once the stream ended, one way or another: unsubscribing then aborts nothing.
        let ended = false;
        let reader: ReadableStreamDefaultReader<AiSdkStreamPart> | undefined;
        const partsOf = streamReader();
        const read = async (): Promise<void> => {
          const { stream: parts } = await sdk.doStream(callFor(request, controller.signal));
          // The run left before the stream came (a model that does not heed the abort): nobody
          // will read it, so it is cancelled, and the request under it let go, unread.
          if (subscriber.closed) {
            parts.cancel(controller.signal.reason).catch(() => undefined);
            return;
          }
          reader = parts.getReader();
          for (;;) {
            const { done, value } = await reader.read();
            if (done || subscriber.closed) return;
            const out = partsOf(value);
            if (out !== undefined) for (const part of out) subscriber.next(part);
          }
        };
        read().then(
          () => {
            ended = true;
            subscriber.complete();
          },
          (error: unknown) => {
            ended = true;
            reader?.cancel().catch(() => undefined);
            subscriber.error(fromAiSdkStreamError(error, label));
          },
        );
        return () => {
          signal.removeEventListener('abort', onAbort);
          if (ended) return;
          controller.abort(new Error('the reply was left'));
          reader?.cancel().catch(() => undefined);
        };
      }),
  };
}
export { aiSdkTools, registerAiSdkTools, type AiSdkDescriptionOptions, type AiSdkModelMessage, type AiSdkTool, type AiSdkToolCallOptions, type AiSdkToolEntry, type AiSdkToolsExtras } from './aiSdkTools.js';
export { laneContextOf, withLanes, type AiSdkLanesTool, type WithLanesOptions } from './aiSdkLanes.js';
