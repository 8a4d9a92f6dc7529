// A ModelProvider over the Anthropic Messages wire (`POST {baseURL}/v1/messages`): tools go
// out with `input_schema`, several `tool_use` blocks come back in one reply, and the results
// go back as `tool_result` blocks of one user message, in call order. Plain `fetch`, no SDK.
// By default the reply streams (`stream: true`): each `tool_use` block is handed on as soon as
// it stops, so its call runs while the model writes the next.
import type { EventSourceMessage } from 'eventsource-parser';
import { isLeft } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import type { Observable } from 'rxjs';
import { ConfigError } from '../errors.js';
import { describeFailures, describeValue, refuseUnknownFields } from '../config/index.js';
import type { FinishReason, Message, ModelProvider, ModelRequest, ModelResponse, ModelStreamPart, ToolCall } from '../runner/index.js';
import { ProviderReplyError, ProviderStreamError } from './errors.js';
import { checkTimeoutSeconds, clip, DEFAULT_TIMEOUT_SECONDS, postJson, providerLabel, redact, responseInfo, serverOf, retryPolicy, type RetryOptions, type RetryPolicy } from './http.js';
import { resolveKey } from './keys.js';
import { streamedReply, type EventDecoder } from './streamedReply.js';
import { StartOrder, type CallPart } from './streamedCalls.js';

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
  /**
   * true (the default): ask for a streamed reply (`stream: true`) and answer with its parts, so
   * each call starts as soon as its `tool_use` block is complete; false: one whole reply.
   */
  readonly stream?: boolean;
}

const ANTHROPIC_URL = 'https://api.anthropic.com';
const fields = ['apiKey', 'baseURL', 'maxTokens', 'version', 'headers', 'body', 'retry', 'timeoutSeconds', 'fetch', 'stream'];

const WireUsage = t.partial({ input_tokens: t.number, output_tokens: t.number, cache_creation_input_tokens: t.union([t.number, t.null]), cache_read_input_tokens: t.union([t.number, t.null]) });
type WireUsage = t.TypeOf<typeof WireUsage>;

/** The envelope of a Messages reply: content blocks, each with a type. */
export const MessagesReplyCodec = t.intersection([
  t.type({
    content: t.array(t.intersection([t.type({ type: t.string }), t.UnknownRecord])),
  }),
  t.partial({ stop_reason: t.union([t.string, t.null]), usage: t.union([WireUsage, t.null]) }),
]);

// The wire's stop reasons, as the runner names them.
function finishReasonOf(reason: string): FinishReason {
  switch (reason) {
    case 'end_turn':
    case 'stop_sequence':
      return 'stop';
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool-calls';
    case 'refusal':
      return 'content-filter';
    default:
      return 'other';
  }
}

// Input tokens include those read from and written to the prompt cache, which the wire counts apart.
const inputOf = (usage: WireUsage): number => (usage.input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0);
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
        ...(message.toolCalls ?? []).map((call): AnthropicBlock => ({ type: 'tool_use', id: call.id, name: call.name, input: callInput(call) })),
      ];
  }
}

// tool_use.input must be an object. A call whose arguments were not a JSON object was refused
// before dispatch (its tool_result says so); it is shown with an empty input.
function callInput(call: ToolCall): Readonly<Record<string, unknown>> {
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
  const { usage, stop_reason } = decoded.right;
  const { id, model } = reply as { id?: unknown; model?: unknown };
  return {
    ...responseInfo(id, model),
    ...(texts.length > 0 && (text !== '' || toolCalls.length === 0) ? { text } : {}),
    ...(toolCalls.length > 0 ? { toolCalls } : {}),
    ...(usage != null ? { usage: { inputTokens: inputOf(usage), outputTokens: usage.output_tokens ?? 0 } } : {}),
    ...(typeof stop_reason === 'string' ? { finishReason: finishReasonOf(stop_reason) } : {}),
  };
}

/** The part of a streamed event this adapter reads, by its `type`. */
const StreamEventCodec = t.intersection([
  t.type({ type: t.string }),
  t.partial({
    index: t.number,
    message: t.partial({ usage: t.union([WireUsage, t.null]) }),
    content_block: t.intersection([t.type({ type: t.string }), t.UnknownRecord]),
    delta: t.partial({ type: t.string, text: t.string, partial_json: t.string, stop_reason: t.union([t.string, t.null]) }),
    usage: t.union([WireUsage, t.null]),
    error: t.partial({ type: t.string, message: t.string }),
  }),
]);

/**
 * Reads a streamed Messages reply, event by event. Text deltas go on as they come; a `tool_use`
 * block's input arrives as pieces of JSON and its call is handed on when the block stops (its
 * input parsed, as the whole reply gives it; pieces that never form JSON go on as their text,
 * which the runner refuses as that call's error). Calls go on in the order their blocks started
 * (see StartOrder): the wire stops each block before the next starts, and should blocks overlap,
 * one stopped while an earlier one is open waits for it. `message_stop` hands on, in its place, a
 * block that never stopped, then ends the reply with its usage and stop reason. An `error` event,
 * an event of the wrong shape, or a stream that ends before `message_stop` fails the reply.
 */
export class MessagesStreamEvents implements EventDecoder {
  // The tool_use blocks being written, by index: id, name, and the input's JSON so far.
  private readonly blocks = new Map<number, { id: string; name: string; json: string }>();
  // The blocks' calls not handed on yet, by block index, in the order the blocks started.
  private readonly order = new StartOrder<number>();
  private readonly usage = { inputTokens: 0, outputTokens: 0 };
  private stopReason: string | undefined = undefined;
  // Events read, to name a bad one.
  private events = 0;

  constructor(
    private readonly provider: string,
    private readonly secrets: readonly string[] = [],
  ) {}

  event(event: EventSourceMessage, emit: (part: ModelStreamPart) => void): boolean {
    const n = ++this.events;
    let raw: unknown;
    try {
      raw = JSON.parse(event.data);
    } catch {
      throw new ProviderReplyError(this.provider, `stream event ${n} is not JSON: ${clip(redact(event.data, this.secrets))}`);
    }
    const decoded = StreamEventCodec.decode(raw);
    if (isLeft(decoded)) throw new ProviderReplyError(this.provider, describeFailures(decoded.left, `event ${n}`));
    const { type, index, message, content_block, delta, usage, error } = decoded.right;
    switch (type) {
      case 'message_start': {
        const start = message?.usage;
        if (start != null) this.counted(start);
        const { id, model } = (raw as { message?: { id?: unknown; model?: unknown } }).message ?? {};
        const info = responseInfo(id, model);
        if (info !== undefined) emit({ type: 'response', ...info.response });
        return false;
      }
      case 'content_block_start': {
        if (content_block?.type !== 'tool_use') return false;
        const use = ToolUseBlock.decode({ input: {}, ...content_block });
        if (isLeft(use)) throw new ProviderReplyError(this.provider, describeFailures(use.left, `event ${n}.content_block`));
        this.blocks.set(index ?? -1, { id: use.right.id, name: use.right.name, json: '' });
        this.order.started(index ?? -1);
        return false;
      }
      case 'content_block_delta': {
        if (delta?.type === 'text_delta' && typeof delta.text === 'string' && delta.text !== '') emit({ type: 'text-delta', delta: delta.text });
        else if (delta?.type === 'input_json_delta' && typeof delta.partial_json === 'string') {
          const block = this.blocks.get(index ?? -1);
          if (block !== undefined) block.json += delta.partial_json;
        }
        return false;
      }
      case 'content_block_stop': {
        const block = this.blocks.get(index ?? -1);
        if (block === undefined) return false;
        this.blocks.delete(index ?? -1);
        for (const part of this.order.complete(index ?? -1, blockCall(block))) emit(part);
        return false;
      }
      case 'message_delta': {
        if (typeof delta?.stop_reason === 'string') this.stopReason = delta.stop_reason;
        if (usage != null) this.counted(usage);
        return false;
      }
      case 'message_stop':
        for (const part of this.order.ended((at) => blockCall(this.blocks.get(at)!))) emit(part);
        this.blocks.clear();
        emit({ type: 'usage', ...this.usage });
        if (this.stopReason !== undefined) emit({ type: 'finish', finishReason: finishReasonOf(this.stopReason) });
        return true;
      case 'error':
        throw new ProviderStreamError(this.provider, error?.type, clip(redact(error?.message ?? event.data, this.secrets)));
      default:
        // ping, and events this adapter does not read (thinking blocks, citations).
        return false;
    }
  }

  end(): void {
    throw new ProviderStreamError(this.provider, undefined, 'the stream ended before the reply was complete');
  }

  // Counts as the wire gives them: message_start has the input, message_delta the output so far.
  private counted(usage: WireUsage): void {
    const input = inputOf(usage);
    if (input > 0) this.usage.inputTokens = input;
    if (usage.output_tokens !== undefined) this.usage.outputTokens = usage.output_tokens;
  }
}

const blockCall = (block: { id: string; name: string; json: string }): CallPart => ({ type: 'tool-call', id: block.id, name: block.name, arguments: blockInput(block.json) });

// A tool_use block's input from its pieces: the object they spell (an empty input is `{}`), or,
// when they do not spell one, the text itself, which the runner refuses as that call's error.
function blockInput(json: string): ToolCall['arguments'] {
  if (json.trim() === '') return {};
  try {
    const parsed: unknown = JSON.parse(json);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : json;
  } catch {
    return json;
  }
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
  /** True when replies are asked for streamed. */
  readonly stream: boolean;
  /** For tracing: the GenAI conventions' name of this wire's provider, and the server of {@link url}. */
  readonly providerName = 'anthropic';
  readonly server: { readonly address: string; readonly port: number };

  constructor(options: AnthropicMessagesOptions = {}) {
    if (options === null || typeof options !== 'object') throw new ConfigError('AnthropicMessagesProvider', `options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, fields, 'AnthropicMessagesProvider', { noun: 'option' });
    const { maxTokens = 4096, version = '2023-06-01' } = options;
    if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new ConfigError('maxTokens', `maxTokens must be a positive integer, got ${describeValue(maxTokens)}`);
    const baseURL = (options.baseURL ?? process.env['ANTHROPIC_BASE_URL'] ?? ANTHROPIC_URL).replace(/\/+$/, '');
    this.url = `${baseURL}/v1/messages`;
    this.label = providerLabel('Anthropic Messages', this.url);
    this.server = serverOf(this.url);
    this.maxTokens = maxTokens;
    this.#apiKey = resolveKey(options.apiKey, 'ANTHROPIC_API_KEY', baseURL === ANTHROPIC_URL, 'AnthropicMessagesProvider');
    this.#headers = { 'anthropic-version': version, ...options.headers };
    this.#body = { ...options.body };
    this.#retry = retryPolicy(options.retry);
    this.#timeoutSeconds = checkTimeoutSeconds(options.timeoutSeconds === undefined ? DEFAULT_TIMEOUT_SECONDS : options.timeoutSeconds);
    this.#fetch = options.fetch;
    const { stream = true } = options;
    if (typeof stream !== 'boolean') throw new ConfigError('stream', `stream must be true or false, got ${describeValue(stream)}`);
    this.stream = stream;
  }

  /** The reply: streamed parts by default (see `AnthropicMessagesOptions.stream`), else one whole response. */
  respond(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> | Observable<ModelStreamPart | ModelResponse> {
    const key = this.#apiKey;
    const secrets = key === undefined ? [] : [key];
    let body: Record<string, unknown>;
    try {
      body = toMessagesRequest(request, this.maxTokens, this.#body);
    } catch (error) {
      return Promise.reject(error);
    }
    const post = {
      provider: this.label,
      url: this.url,
      headers: { ...this.#headers, ...(key === undefined ? {} : { 'x-api-key': key }) },
      body: this.stream ? { ...body, stream: true } : body,
      signal,
      retry: this.#retry,
      timeoutSeconds: this.#timeoutSeconds,
      ...(this.#fetch ? { fetch: this.#fetch } : {}),
      secrets,
    };
    if (this.stream) return streamedReply(post, () => new MessagesStreamEvents(this.label, secrets), (reply) => fromMessagesReply(reply, this.label));
    return postJson(post).then((reply) => fromMessagesReply(reply, this.label));
  }
}
