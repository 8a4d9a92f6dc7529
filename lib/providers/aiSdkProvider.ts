// Any Vercel AI SDK language model as a ModelProvider, so every provider the AI SDK supports
// (OpenAI, Anthropic, Google, Bedrock, OpenAI-compatible local servers) runs inside the lanes.
// It speaks the AI SDK's model interface (LanguageModelV3, `@ai-sdk/provider` 3, as in `ai` 6)
// directly: the conversation goes out as the SDK's prompt, tool specs as JSON Schema from the
// io-ts codecs, and the reply streams back (doStream) as the runner's stream parts, each tool
// call handed on as soon as the model completes it. The AI SDK is an optional peer dependency:
// this file imports only its types, so nothing of it loads unless a model of it is passed in.
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3Content,
  LanguageModelV3FinishReason,
  LanguageModelV3FunctionTool,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3ToolCallPart,
  LanguageModelV3ToolResultPart,
  LanguageModelV3Usage,
} from '@ai-sdk/provider';
import { Observable } from 'rxjs';
import { describeValue, refuseUnknownFields } from '../config/index.js';
import { ConfigError } from '../errors.js';
import type { FinishReason, ModelProvider, ModelRequest, ModelResponse, ModelStreamPart, ToolCall, Usage } from '../runner/index.js';

/** The call options the adapter sends besides the prompt, the tools and the signal. */
export type AiSdkCallOptions = Omit<LanguageModelV3CallOptions, 'prompt' | 'tools' | 'toolChoice' | 'abortSignal'>;

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

// The SDK's unified finish reasons are the runner's; a model of another version may send a
// bare string (`unknown` among them), read as its nearest.
function finishReasonOf(reason: LanguageModelV3FinishReason | string | undefined): FinishReason | undefined {
  const unified = typeof reason === 'string' ? reason : reason?.unified;
  switch (unified) {
    case undefined:
      return undefined;
    case 'stop':
    case 'length':
    case 'content-filter':
    case 'tool-calls':
    case 'error':
      return unified;
    default:
      return 'other';
  }
}

// The SDK's usage, when the model reported any.
function usageOf(usage: LanguageModelV3Usage | undefined): Usage | undefined {
  const input = usage?.inputTokens?.total;
  const output = usage?.outputTokens?.total;
  if (input === undefined && output === undefined) return undefined;
  return { inputTokens: input ?? 0, outputTokens: output ?? 0 };
}

// A call's arguments as the SDK's prompt holds them: a value. JSON text is parsed; a call whose
// arguments were not a JSON object was refused before dispatch (its result says so) and is
// shown with an empty input, which every provider's wire accepts.
function inputOf(call: ToolCall): unknown {
  if (typeof call.arguments !== 'string') return call.arguments;
  try {
    const parsed: unknown = JSON.parse(call.arguments);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/**
 * The conversation as the SDK's prompt: the instructions as the system message, then the
 * messages in order; an assistant message's calls as tool-call parts, and the tool messages
 * after it as one tool message of tool-result parts, in call order (each named after the call
 * it answers: the n-th tool message after an assistant message answers its n-th call).
 */
export function toAiSdkPrompt(request: ModelRequest): LanguageModelV3Prompt {
  const prompt: LanguageModelV3Message[] = [];
  if (request.instructions !== '') prompt.push({ role: 'system', content: request.instructions });
  // The last assistant message's calls, and how many of them have had their tool message.
  let calls: readonly ToolCall[] = [];
  let answered = 0;
  let results: LanguageModelV3ToolResultPart[] | undefined;
  for (const message of request.messages) {
    if (message.role !== 'tool') results = undefined;
    switch (message.role) {
      case 'user':
        prompt.push({ role: 'user', content: [{ type: 'text', text: message.content }] });
        break;
      case 'assistant': {
        calls = message.toolCalls ?? [];
        answered = 0;
        const parts: Array<{ type: 'text'; text: string } | LanguageModelV3ToolCallPart> = [];
        if (message.content !== '') parts.push({ type: 'text', text: message.content });
        for (const call of calls) parts.push({ type: 'tool-call', toolCallId: call.id, toolName: call.name, input: inputOf(call) });
        prompt.push({ role: 'assistant', content: parts });
        break;
      }
      case 'tool': {
        const call = calls[answered++];
        const toolName = call?.id === message.toolCallId ? call.name : (calls.find((c) => c.id === message.toolCallId)?.name ?? '');
        const part: LanguageModelV3ToolResultPart = {
          type: 'tool-result',
          toolCallId: message.toolCallId ?? '',
          toolName,
          // The content is what the runner's own wires send: the result's JSON (a string as
          // itself), or the failure's text; sent as text, every provider passes it on unchanged.
          output: message.isError === true ? { type: 'error-text', value: message.content } : { type: 'text', value: message.content },
        };
        if (results === undefined) {
          results = [part];
          prompt.push({ role: 'tool', content: results });
        } else results.push(part);
        break;
      }
    }
  }
  return prompt;
}

/** The tools as the SDK's function tools: their parameters are the JSON Schema derived from each tool's io-ts codec. */
export function toAiSdkTools(request: ModelRequest): LanguageModelV3FunctionTool[] {
  return request.tools.map((tool) => ({
    type: 'function',
    name: tool.name,
    ...(tool.description !== undefined ? { description: tool.description } : {}),
    inputSchema: tool.parameters as LanguageModelV3FunctionTool['inputSchema'],
  }));
}

/**
 * A whole reply (`doGenerate`'s content) as a ModelResponse: text parts joined, the calls in
 * order with their JSON input as arguments. Calls the provider ran itself (`providerExecuted`),
 * their results, reasoning, files and sources are not the runner's to run, and are left out.
 */
export function fromAiSdkContent(content: readonly LanguageModelV3Content[], finishReason?: LanguageModelV3FinishReason, usage?: LanguageModelV3Usage): ModelResponse {
  const texts: string[] = [];
  const toolCalls: ToolCall[] = [];
  for (const part of content) {
    if (part.type === 'text') texts.push(part.text);
    else if (part.type === 'tool-call' && part.providerExecuted !== true) toolCalls.push({ id: part.toolCallId, name: part.toolName, arguments: part.input });
  }
  const text = texts.join('');
  const counted = usageOf(usage);
  const reason = finishReasonOf(finishReason);
  return {
    ...(texts.length > 0 && (text !== '' || toolCalls.length === 0) ? { text } : {}),
    ...(toolCalls.length > 0 ? { toolCalls } : {}),
    ...(counted !== undefined ? { usage: counted } : {}),
    ...(reason !== undefined ? { finishReason: reason } : {}),
  };
}

/**
 * One of the SDK's stream parts as the runner's, or undefined for a part the runner does not
 * read (the start and end of text, tool input as it is written: the complete call follows).
 * An `error` part is thrown.
 */
function partOf(part: LanguageModelV3StreamPart): ModelStreamPart[] | undefined {
  switch (part.type) {
    case 'text-delta':
      return part.delta === '' ? undefined : [{ type: 'text-delta', delta: part.delta }];
    case 'tool-call':
      return part.providerExecuted === true ? undefined : [{ type: 'tool-call', id: part.toolCallId, name: part.toolName, arguments: part.input }];
    case 'finish': {
      const usage = usageOf(part.usage);
      const reason = finishReasonOf(part.finishReason);
      return [...(usage !== undefined ? [{ type: 'usage' as const, ...usage }] : []), ...(reason !== undefined ? [{ type: 'finish' as const, finishReason: reason }] : [])];
    }
    case 'error':
      throw part.error;
    default:
      return undefined;
  }
}

/**
 * Any Vercel AI SDK language model (`LanguageModelV3`, what `openai('gpt-4.1')`,
 * `anthropic('claude-sonnet-4-5')` and the other AI SDK providers of `ai` 6 give) as a
 * ModelProvider. The model object decides which model answers; the agent's `model` is not sent.
 *
 * Streams by default: the reply comes through `doStream`, text deltas go to `activity$`, and
 * each tool call starts inside its lanes as soon as its `tool-call` part arrives. An `error`
 * part fails the turn. Tool results go back as tool-result parts in call order.
 *
 * ## Example
 * ```ts
 * import { openai } from '@ai-sdk/openai';
 * const runner = new AgentRunner({ provider: aiSdkProvider(openai('gpt-4.1-mini')), tools });
 * await runner.run(new Agent({ name: 'planner', instructions: 'Plan.', model: 'gpt-4.1-mini' }), 'Four hotels in Lisbon');
 * ```
 */
export function aiSdkProvider(model: LanguageModelV3, options: AiSdkProviderOptions = {}): ModelProvider {
  if (model === null || typeof model !== 'object' || typeof model.doStream !== 'function' || typeof model.doGenerate !== 'function') {
    throw new ConfigError('model', `aiSdkProvider: model must be an AI SDK language model object (with doStream and doGenerate), got ${typeof model === 'string' ? `the string ${describeValue(model)}: pass the provider's model, e.g. openai('gpt-4.1-mini')` : describeValue(model)}`);
  }
  if (model.specificationVersion !== 'v3') {
    throw new ConfigError('model', `aiSdkProvider: model must implement the AI SDK's LanguageModelV3 (ai 6, @ai-sdk/provider 3), got specificationVersion ${describeValue(model.specificationVersion)}`);
  }
  if (options === null || typeof options !== 'object') throw new ConfigError('aiSdkProvider', `aiSdkProvider options must be an object, got ${describeValue(options)}`);
  refuseUnknownFields(options, fields, 'aiSdkProvider', { noun: 'option' });
  const { stream = true, callOptions = {} } = options;
  if (typeof stream !== 'boolean') throw new ConfigError('stream', `stream must be true or false, got ${describeValue(stream)}`);
  if (callOptions === null || typeof callOptions !== 'object') throw new ConfigError('callOptions', `callOptions must be an object, got ${describeValue(callOptions)}`);

  const callFor = (request: ModelRequest, abortSignal: AbortSignal): LanguageModelV3CallOptions => {
    const tools = toAiSdkTools(request);
    return { ...callOptions, prompt: toAiSdkPrompt(request), ...(tools.length > 0 ? { tools, toolChoice: { type: 'auto' } } : {}), abortSignal };
  };

  if (!stream) {
    return {
      respond: async (request, signal) => {
        const result = await model.doGenerate(callFor(request, signal));
        return fromAiSdkContent(result.content, result.finishReason, result.usage);
      },
    };
  }

  return {
    respond: (request, signal) =>
      new Observable<ModelStreamPart>((subscriber) => {
        // The call's own controller: aborted by the request's signal, or by unsubscribing.
        const controller = new AbortController();
        const onAbort = (): void => controller.abort(signal.reason);
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
        // Set once the stream ended, one way or another: unsubscribing then aborts nothing.
        let ended = false;
        let reader: ReadableStreamDefaultReader<LanguageModelV3StreamPart> | undefined;
        const read = async (): Promise<void> => {
          const { stream: parts } = await model.doStream(callFor(request, controller.signal));
          reader = parts.getReader();
          for (;;) {
            const { done, value } = await reader.read();
            if (done || subscriber.closed) return;
            const out = partOf(value);
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
            subscriber.error(error);
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
export { aiSdkTools, registerAiSdkTools, type AiSdkModelMessage, type AiSdkTool, type AiSdkToolCallOptions, type AiSdkToolEntry, type AiSdkToolsExtras } from './aiSdkTools.js';
