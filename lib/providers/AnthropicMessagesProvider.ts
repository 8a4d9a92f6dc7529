// A ModelProvider over the Anthropic Messages wire (`POST {baseURL}/v1/messages`): tools go
// out with `input_schema`, several `tool_use` blocks come back in one reply, and the results
// go back as `tool_result` blocks of one user message, in call order. Plain `fetch`, no SDK.
import { isLeft } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { ConfigError } from '../errors.js';
import { describeFailures, describeValue, refuseUnknownFields } from '../config/index.js';
import type { Message, ModelProvider, ModelRequest, ModelResponse, ToolCall } from '../runner/index.js';
import { ProviderReplyError } from './errors.js';
import { checkTimeoutSeconds, DEFAULT_TIMEOUT_SECONDS, postJson, providerLabel, retryPolicy, type RetryOptions, type RetryPolicy } from './http.js';
import { resolveKey } from './keys.js';

export interface AnthropicMessagesOptions {
  /** The API key, sent as `x-api-key`. Default `process.env.ANTHROPIC_API_KEY`; optional for a server other than api.anthropic.com. */
  readonly apiKey?: string;
  /** Default `process.env.ANTHROPIC_BASE_URL`, else `https://api.anthropic.com`. `/v1/messages` is appended. */
  readonly baseURL?: string;
  /** `max_tokens` of every request (the wire requires one). Default 4096. */
  readonly maxTokens?: number;
  /** The `anthropic-version` header. Default `2023-06-01`. */
  readonly version?: string;
  /** Extra request headers (`anthropic-beta`, a gateway's own header). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Extra body fields sent with every request (`temperature`, `tool_choice`, `metadata`). */
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

const ANTHROPIC_URL = 'https://api.anthropic.com';
const fields = ['apiKey', 'baseURL', 'maxTokens', 'version', 'headers', 'body', 'retry', 'timeoutSeconds', 'fetch'];

/** The envelope of a Messages reply: content blocks, each with a type. */
export const MessagesReplyCodec = t.type({
  content: t.array(t.intersection([t.type({ type: t.string }), t.UnknownRecord])),
});
const TextBlock = t.type({ text: t.string });
const ToolUseBlock = t.type({ id: t.string, name: t.string, input: t.UnknownRecord });

/** One content block as the Messages wire spells it (the ones this adapter sends). */
export type AnthropicBlock =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'tool_use'; readonly id: string; readonly name: string; readonly input: Readonly<Record<string, unknown>> }
  | { readonly type: 'tool_result'; readonly tool_use_id: string; readonly content: string; readonly is_error?: true };

export interface AnthropicMessage {
  readonly role: 'user' | 'assistant';
  readonly content: AnthropicBlock[];
}

/**
 * The request body for a ModelRequest: instructions as `system`; tool messages become
 * `tool_result` blocks of a user message, in call order; consecutive messages of one role are
 * joined, since the wire alternates user and assistant.
 */
export function toMessagesRequest(request: ModelRequest, maxTokens: number, extra: Readonly<Record<string, unknown>> = {}): Record<string, unknown> {
  const messages: AnthropicMessage[] = [];
  for (const message of request.messages) {
    const role = message.role === 'assistant' ? 'assistant' : 'user';
    const blocks = toBlocks(message);
    if (blocks.length === 0) continue;
    const last = messages[messages.length - 1];
    if (last !== undefined && last.role === role) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  }
  return {
    ...extra,
    model: request.model,
    max_tokens: maxTokens,
    ...(request.instructions !== '' ? { system: request.instructions } : {}),
    messages,
    ...(request.tools.length > 0
      ? { tools: request.tools.map((tool) => ({ name: tool.name, description: tool.description, input_schema: tool.parameters })) }
      : {}),
  };
}

function toBlocks(message: Message): AnthropicBlock[] {
  switch (message.role) {
    case 'user':
      return message.content === '' ? [] : [{ type: 'text', text: message.content }];
    case 'tool':
      return [{ type: 'tool_result', tool_use_id: message.toolCallId ?? '', content: message.content, ...(message.isError ? { is_error: true as const } : {}) }];
    case 'assistant':
      // The wire refuses an empty text block, so a call-only turn is tool_use blocks alone.
      return [
        ...(message.content === '' ? [] : [{ type: 'text' as const, text: message.content }]),
        ...(message.toolCalls ?? []).map((call): AnthropicBlock => ({ type: 'tool_use', id: call.id, name: call.name, input: inputOf(call) })),
      ];
  }
}

// tool_use.input must be an object. A call whose arguments were not a JSON object was refused
// before dispatch (its tool_result says so); it is shown with an empty input.
function inputOf(call: ToolCall): Readonly<Record<string, unknown>> {
  if (typeof call.arguments !== 'string') return call.arguments;
  try {
    const parsed: unknown = JSON.parse(call.arguments);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * Reads a Messages reply into a ModelResponse: text blocks joined, `tool_use` blocks as calls in
 * order, other blocks (thinking, server tools) skipped. A reply of the wrong shape is a
 * ProviderReplyError naming the path (`reply.content.1.id: expected string, got undefined`).
 */
export function fromMessagesReply(reply: unknown, provider: string): ModelResponse {
  const decoded = MessagesReplyCodec.decode(reply);
  if (isLeft(decoded)) throw new ProviderReplyError(provider, describeFailures(decoded.left, 'reply'));
  const texts: string[] = [];
  const toolCalls: ToolCall[] = [];
  const problems: string[] = [];
  decoded.right.content.forEach((block, index) => {
    const path = `reply.content.${index}`;
    if (block.type === 'text') {
      const text = TextBlock.decode(block);
      if (isLeft(text)) problems.push(describeFailures(text.left, path));
      else texts.push(text.right.text);
    } else if (block.type === 'tool_use') {
      const use = ToolUseBlock.decode(block);
      if (isLeft(use)) problems.push(describeFailures(use.left, path));
      else toolCalls.push({ id: use.right.id, name: use.right.name, arguments: use.right.input });
    }
  });
  if (problems.length > 0) throw new ProviderReplyError(provider, problems.join('; '));
  const text = texts.join('');
  return {
    ...(texts.length > 0 && (text !== '' || toolCalls.length === 0) ? { text } : {}),
    ...(toolCalls.length > 0 ? { toolCalls } : {}),
  };
}

/**
 * A model behind the Anthropic Messages API (or a server that speaks it).
 *
 * Several `tool_use` blocks in one reply become one batch; the results go back as
 * `tool_result` blocks in call order, failed calls with `is_error`. 429, 5xx and 529 are
 * retried (see RetryOptions); the key never appears in an error.
 *
 * ## Example
 * ```ts
 * const provider = new AnthropicMessagesProvider({ maxTokens: 2048 });   // ANTHROPIC_API_KEY
 * const runner = new AgentRunner({ provider, tools });
 * await runner.run(new Agent({ name: 'planner', instructions: 'Plan.', model: 'claude-sonnet-4-5' }), 'Four hotels in Lisbon');
 * ```
 */
export class AnthropicMessagesProvider implements ModelProvider {
  /** The wire and host, as errors name it. */
  readonly label: string;
  readonly url: string;
  readonly maxTokens: number;
  // A private field: kept out of `util.inspect`, `JSON.stringify` and any error.
  readonly #apiKey: string | undefined;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #body: Readonly<Record<string, unknown>>;
  readonly #retry: RetryPolicy;
  readonly #timeoutSeconds: number | false;
  readonly #fetch: typeof fetch | undefined;

  constructor(options: AnthropicMessagesOptions = {}) {
    if (options === null || typeof options !== 'object') throw new ConfigError('AnthropicMessagesProvider', `options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, fields, 'AnthropicMessagesProvider', { noun: 'option' });
    const { maxTokens = 4096, version = '2023-06-01' } = options;
    if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new ConfigError('maxTokens', `maxTokens must be a positive integer, got ${describeValue(maxTokens)}`);
    const baseURL = (options.baseURL ?? process.env['ANTHROPIC_BASE_URL'] ?? ANTHROPIC_URL).replace(/\/+$/, '');
    this.url = `${baseURL}/v1/messages`;
    this.label = providerLabel('Anthropic Messages', this.url);
    this.maxTokens = maxTokens;
    this.#apiKey = resolveKey(options.apiKey, 'ANTHROPIC_API_KEY', baseURL === ANTHROPIC_URL, 'AnthropicMessagesProvider');
    this.#headers = { 'anthropic-version': version, ...options.headers };
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
      headers: { ...this.#headers, ...(key === undefined ? {} : { 'x-api-key': key }) },
      body: toMessagesRequest(request, this.maxTokens, this.#body),
      signal,
      retry: this.#retry,
      timeoutSeconds: this.#timeoutSeconds,
      ...(this.#fetch ? { fetch: this.#fetch } : {}),
      secrets: key === undefined ? [] : [key],
    });
    return fromMessagesReply(reply, this.label);
  }
}
