// A ModelProvider over the OpenAI Chat Completions wire (`POST {baseURL}/chat/completions`),
// so any compatible server works: tools go out as `tools`, several `tool_calls` come back in
// one reply, and tool results go back as `tool` messages in call order. Plain `fetch`, no SDK.
import { isLeft } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { ConfigError } from '../errors.js';
import { describeFailures, describeValue, refuseUnknownFields } from '../config/index.js';
import type { Message, ModelProvider, ModelRequest, ModelResponse, ToolCall } from '../runner/index.js';
import { ProviderReplyError } from './errors.js';
import { checkTimeoutSeconds, DEFAULT_TIMEOUT_SECONDS, postJson, providerLabel, retryPolicy, type RetryOptions, type RetryPolicy } from './http.js';
import { resolveKey } from './keys.js';

export interface OpenAIChatOptions {
  /** The API key, sent as `Authorization: Bearer`. Default `process.env.OPENAI_API_KEY`; optional for a server other than api.openai.com. */
  readonly apiKey?: string;
  /** Default `process.env.OPENAI_BASE_URL`, else `https://api.openai.com/v1`. `/chat/completions` is appended. */
  readonly baseURL?: string;
  /** Extra request headers (`OpenAI-Organization`, a gateway's own header). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Extra body fields sent with every request (`temperature`, `max_completion_tokens`, `parallel_tool_calls`). */
  readonly body?: Readonly<Record<string, unknown>>;
  readonly retry?: RetryOptions;
  /**
   * How long one request may take before it is aborted, the whole reply included, in seconds;
   * each retry gets its own. Default 600; `false` for no limit. Bound the whole run with
   * `DeadlineConfig.runSeconds`.
   */
  readonly timeoutSeconds?: number | false;
  /** Default the global `fetch`. */
  readonly fetch?: typeof fetch;
}

const OPENAI_URL = 'https://api.openai.com/v1';
const fields = ['apiKey', 'baseURL', 'headers', 'body', 'retry', 'timeoutSeconds', 'fetch'];

const WireToolCall = t.type({
  id: t.string,
  function: t.type({ name: t.string, arguments: t.string }),
});

const WireMessage = t.partial({
  content: t.union([t.string, t.null]),
  refusal: t.union([t.string, t.null]),
  tool_calls: t.union([t.array(WireToolCall), t.null]),
});

/** The part of a chat completion this adapter reads. */
export const ChatCompletionCodec = t.type({
  choices: t.array(t.type({ message: WireMessage })),
});

/** One message as the Chat Completions wire spells it. */
export type ChatMessage =
  | { readonly role: 'system' | 'user'; readonly content: string }
  | {
      readonly role: 'assistant';
      readonly content: string | null;
      readonly tool_calls?: ReadonlyArray<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
    }
  | { readonly role: 'tool'; readonly tool_call_id: string; readonly content: string };

/** The request body for a ModelRequest: instructions as the system message, then the conversation in order. */
export function toChatCompletionRequest(request: ModelRequest, extra: Readonly<Record<string, unknown>> = {}): Record<string, unknown> {
  const messages: ChatMessage[] = [];
  if (request.instructions !== '') messages.push({ role: 'system', content: request.instructions });
  for (const message of request.messages) messages.push(toChatMessage(message));
  return {
    ...extra,
    model: request.model,
    messages,
    ...(request.tools.length > 0
      ? { tools: request.tools.map((tool) => ({ type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.parameters } })) }
      : {}),
  };
}

function toChatMessage(message: Message): ChatMessage {
  switch (message.role) {
    case 'user':
      return { role: 'user', content: message.content };
    case 'tool':
      // The wire has no error flag: the content already says `Name: message` for a failed call.
      return { role: 'tool', tool_call_id: message.toolCallId ?? '', content: message.content };
    case 'assistant': {
      const calls = message.toolCalls ?? [];
      if (calls.length === 0) return { role: 'assistant', content: message.content };
      return {
        role: 'assistant',
        content: message.content === '' ? null : message.content,
        tool_calls: calls.map((call) => ({
          id: call.id,
          type: 'function' as const,
          function: { name: call.name, arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments) },
        })),
      };
    }
  }
}

/** Reads a chat completion into a ModelResponse; a reply of the wrong shape is a ProviderReplyError naming the path. */
export function fromChatCompletion(reply: unknown, provider: string): ModelResponse {
  const decoded = ChatCompletionCodec.decode(reply);
  if (isLeft(decoded)) throw new ProviderReplyError(provider, describeFailures(decoded.left, 'reply'));
  const choice = decoded.right.choices[0];
  if (choice === undefined) throw new ProviderReplyError(provider, 'reply.choices: expected at least one choice, got []');
  const { content, refusal, tool_calls } = choice.message;
  const toolCalls: ToolCall[] = (tool_calls ?? []).map((call) => ({ id: call.id, name: call.function.name, arguments: call.function.arguments }));
  const text = typeof content === 'string' ? content : typeof refusal === 'string' ? refusal : undefined;
  return {
    ...(text !== undefined && (text !== '' || toolCalls.length === 0) ? { text } : {}),
    ...(toolCalls.length > 0 ? { toolCalls } : {}),
  };
}

/**
 * A model behind an OpenAI-compatible Chat Completions endpoint.
 *
 * Several tool calls in one reply become one batch; their results go back as `tool` messages
 * in call order. 429 and 5xx are retried (see RetryOptions); the key never appears in an error.
 *
 * ## Example
 * ```ts
 * const provider = new OpenAIChatProvider();                        // OPENAI_API_KEY, api.openai.com
 * const local = new OpenAIChatProvider({ baseURL: 'http://127.0.0.1:11434/v1' }); // a compatible server
 * const runner = new AgentRunner({ provider, tools });
 * await runner.run(new Agent({ name: 'planner', instructions: 'Plan.', model: 'gpt-4.1-mini' }), 'Four hotels in Lisbon');
 * ```
 */
export class OpenAIChatProvider implements ModelProvider {
  /** The wire and host, as errors name it. */
  readonly label: string;
  readonly url: string;
  // A private field: kept out of `util.inspect`, `JSON.stringify` and any error.
  readonly #apiKey: string | undefined;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #body: Readonly<Record<string, unknown>>;
  readonly #retry: RetryPolicy;
  readonly #timeoutSeconds: number | false;
  readonly #fetch: typeof fetch | undefined;

  constructor(options: OpenAIChatOptions = {}) {
    if (options === null || typeof options !== 'object') throw new ConfigError('OpenAIChatProvider', `options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, fields, 'OpenAIChatProvider', { noun: 'option' });
    const baseURL = (options.baseURL ?? process.env['OPENAI_BASE_URL'] ?? OPENAI_URL).replace(/\/+$/, '');
    this.url = `${baseURL}/chat/completions`;
    this.label = providerLabel('OpenAI Chat Completions', this.url);
    this.#apiKey = resolveKey(options.apiKey, 'OPENAI_API_KEY', baseURL === OPENAI_URL, 'OpenAIChatProvider');
    this.#headers = { ...options.headers };
    this.#body = { ...options.body };
    this.#retry = retryPolicy(options.retry);
    this.#timeoutSeconds = checkTimeoutSeconds(options.timeoutSeconds === undefined ? DEFAULT_TIMEOUT_SECONDS : options.timeoutSeconds);
    this.#fetch = options.fetch;
  }

  async respond(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> {
    const key = this.#apiKey;
    const reply = await postJson({
      provider: this.label,
      url: this.url,
      headers: { ...this.#headers, ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
      body: toChatCompletionRequest(request, this.#body),
      signal,
      retry: this.#retry,
      timeoutSeconds: this.#timeoutSeconds,
      ...(this.#fetch ? { fetch: this.#fetch } : {}),
      secrets: key === undefined ? [] : [key],
    });
    return fromChatCompletion(reply, this.label);
  }
}
