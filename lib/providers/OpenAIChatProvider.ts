// A ModelProvider over the OpenAI Chat Completions wire (`POST {baseURL}/chat/completions`),
// so any compatible server works: tools go out as `tools`, several `tool_calls` come back in
// one reply, and tool results go back as `tool` messages in call order. Plain `fetch`, no SDK.
// By default the reply streams (`stream: true`): each tool call is handed on as soon as its
// arguments close, so it runs while the model writes the rest.
import type { EventSourceMessage } from 'eventsource-parser';
import { isLeft } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import type { Observable } from 'rxjs';
import { ConfigError } from '../errors.js';
import { describeFailures, describeValue, refuseUnknownFields } from '../config/index.js';
import type { FinishReason, Message, ModelProvider, ModelRequest, ModelResponse, ModelStreamPart, ToolCall, Usage } from '../runner/index.js';
import { ProviderReplyError, ProviderStreamError } from './errors.js';
import { checkTimeoutSeconds, clip, DEFAULT_TIMEOUT_SECONDS, postJson, providerLabel, redact, responseInfo, serverOf, retryPolicy, type RetryOptions, type RetryPolicy } from './http.js';
import { resolveKey } from './keys.js';
import { streamedReply, type EventDecoder } from './streamedReply.js';
import { closesObject, StartOrder, type CallPart } from './streamedCalls.js';

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
  /**
   * true (the default): ask for a streamed reply (`stream: true`, usage included) and answer with
   * its parts, so each call starts as soon as the model has finished writing it; false: one
   * whole reply. A server that answers a streamed request with one JSON body is read whole.
   */
  readonly stream?: boolean;
}

const OPENAI_URL = 'https://api.openai.com/v1';
const fields = ['apiKey', 'baseURL', 'headers', 'body', 'retry', 'timeoutSeconds', 'fetch', 'stream'];

const WireToolCall = t.type({
  id: t.string,
  function: t.type({ name: t.string, arguments: t.string }),
});

const WireMessage = t.partial({
  content: t.union([t.string, t.null]),
  refusal: t.union([t.string, t.null]),
  tool_calls: t.union([t.array(WireToolCall), t.null]),
});

const WireUsage = t.type({ prompt_tokens: t.number, completion_tokens: t.number });

/** The part of a chat completion this adapter reads. */
export const ChatCompletionCodec = t.intersection([
  t.type({ choices: t.array(t.intersection([t.type({ message: WireMessage }), t.partial({ finish_reason: t.union([t.string, t.null]) })])) }),
  t.partial({ usage: t.union([WireUsage, t.null]) }),
]);

/** The part of a streamed chunk this adapter reads: each piece of a call carries the call's index. */
const ChunkCodec = t.partial({
  choices: t.array(
    t.partial({
      delta: t.union([
        t.partial({
          content: t.union([t.string, t.null]),
          refusal: t.union([t.string, t.null]),
          tool_calls: t.union([
            t.array(
              t.intersection([
                t.type({ index: t.number }),
                t.partial({ id: t.union([t.string, t.null]), function: t.partial({ name: t.union([t.string, t.null]), arguments: t.union([t.string, t.null]) }) }),
              ]),
            ),
            t.null,
          ]),
        }),
        t.null,
      ]),
      finish_reason: t.union([t.string, t.null]),
    }),
  ),
  usage: t.union([WireUsage, t.null]),
  error: t.unknown,
});

// The wire's finish reasons, as the runner names them.
function finishReasonOf(reason: string): FinishReason {
  switch (reason) {
    case 'stop':
      return 'stop';
    case 'length':
      return 'length';
    case 'tool_calls':
    case 'function_call':
      return 'tool-calls';
    case 'content_filter':
      return 'content-filter';
    default:
      return 'other';
  }
}

const usageOf = (usage: t.TypeOf<typeof WireUsage>): Usage => ({ inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens });

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
  const { usage } = decoded.right;
  const { id, model } = reply as { id?: unknown; model?: unknown };
  return {
    ...(text !== undefined && (text !== '' || toolCalls.length === 0) ? { text } : {}),
    ...(toolCalls.length > 0 ? { toolCalls } : {}),
    ...(usage != null ? { usage: usageOf(usage) } : {}),
    ...(typeof choice.finish_reason === 'string' ? { finishReason: finishReasonOf(choice.finish_reason) } : {}),
    ...responseInfo(id, model),
  };
}

/**
 * Reads a streamed chat completion, chunk by chunk. The pieces of one call's arguments carry the
 * call's index; a piece with an index not seen before starts a call, as does a piece bringing a
 * new id to an index in use (the call there is over). A call is complete when its arguments so
 * far are a whole JSON object (an object cannot go on once closed), and otherwise when the finish
 * reason or the end comes, with what was written of it. Pieces may go back to an earlier index:
 * they join that call, so a server that interleaves its calls' pieces gives each call once. A
 * piece for a call already complete is not read.
 *
 * Calls go on in the order their first pieces came (see StartOrder): a call complete while an
 * earlier one is still open waits for it. So a call whose arguments never parse keeps its place,
 * and the calls after it go on with it at the finish. Text pieces go on as they come; usage comes
 * last (asked for with `stream_options.include_usage`), then `[DONE]`. An error chunk, a chunk
 * that is not JSON or not of the wire's shape, or a stream that ends before any finish reason,
 * fails the reply.
 */
export class ChatCompletionChunks implements EventDecoder {
  // The call at each index of the reply: its id and name, its arguments so far, whether it went on.
  private readonly calls = new Map<number, WrittenCall>();
  // The calls not handed on yet, in the order they started.
  private readonly order = new StartOrder<WrittenCall>();
  // True once a finish reason came: an end of body without `[DONE]` is then an end.
  private finished = false;
  // Chunks read, to name a bad one.
  private chunks = 0;
  // True once the response's id and model went on (every chunk repeats them).
  private identified = false;

  constructor(
    private readonly provider: string,
    private readonly secrets: readonly string[] = [],
  ) {}

  event(event: EventSourceMessage, emit: (part: ModelStreamPart) => void): boolean {
    const { data } = event;
    if (data === '[DONE]') {
      this.end(emit);
      return true;
    }
    const n = ++this.chunks;
    let raw: unknown;
    try {
      raw = JSON.parse(data);
    } catch {
      throw new ProviderReplyError(this.provider, `stream chunk ${n} is not JSON: ${clip(redact(data, this.secrets))}`);
    }
    const decoded = ChunkCodec.decode(raw);
    if (isLeft(decoded)) throw new ProviderReplyError(this.provider, describeFailures(decoded.left, `chunk ${n}`));
    const { choices = [], usage, error } = decoded.right;
    if (!this.identified) {
      this.identified = true;
      const info = responseInfo((raw as { id?: unknown }).id, (raw as { model?: unknown }).model);
      if (info !== undefined) emit({ type: 'response', ...info.response });
    }
    if (error != null) {
      const { type, code, message } = error as { type?: unknown; code?: unknown; message?: unknown };
      const kind = typeof type === 'string' && type !== '' ? type : typeof code === 'string' && code !== '' ? code : undefined;
      throw new ProviderStreamError(this.provider, kind, clip(redact(typeof message === 'string' ? message : JSON.stringify(error), this.secrets)));
    }
    for (const choice of choices) {
      const { delta, finish_reason } = choice;
      if (delta != null) {
        const { content, refusal, tool_calls } = delta;
        if (typeof content === 'string' && content !== '') emit({ type: 'text-delta', delta: content });
        if (typeof refusal === 'string' && refusal !== '') emit({ type: 'text-delta', delta: refusal });
        for (const piece of tool_calls ?? []) {
          const id = typeof piece.id === 'string' && piece.id !== '' ? piece.id : undefined;
          let call = this.calls.get(piece.index);
          if (call === undefined || (id !== undefined && call.id !== '' && call.id !== id)) {
            // A new id at an index in use: the call there is over, with what was written of it.
            if (call !== undefined && !call.sent) this.handOn(call, emit);
            call = { id: '', name: '', args: '', sent: false };
            this.calls.set(piece.index, call);
            this.order.started(call);
          }
          if (call.sent) continue;
          if (id !== undefined) call.id = id;
          const fn = piece.function;
          if (typeof fn?.name === 'string' && fn.name !== '' && call.name === '') call.name = fn.name;
          if (typeof fn?.arguments === 'string' && fn.arguments !== '') {
            call.args += fn.arguments;
            if (closesObject(call.args, fn.arguments)) this.handOn(call, emit);
          }
        }
      }
      if (typeof finish_reason === 'string') {
        this.flush(emit);
        this.finished = true;
        emit({ type: 'finish', finishReason: finishReasonOf(finish_reason) });
      }
    }
    if (usage != null) emit({ type: 'usage', ...usageOf(usage) });
    return false;
  }

  end(emit: (part: ModelStreamPart) => void): void {
    if (!this.finished) throw new ProviderStreamError(this.provider, undefined, 'the stream ended before the reply was complete');
    this.flush(emit);
  }

  // A call is complete: it goes on once the calls started before it have.
  private handOn(call: WrittenCall, emit: (part: ModelStreamPart) => void): void {
    call.sent = true;
    for (const part of this.order.complete(call, callPart(call))) emit(part);
  }

  // The reply is over: every call not handed on goes on, in its place, with what was written of it.
  private flush(emit: (part: ModelStreamPart) => void): void {
    const parts = this.order.ended((call) => {
      call.sent = true;
      return callPart(call);
    });
    for (const part of parts) emit(part);
  }
}

/** A call of a streamed chat completion: its id and name, its arguments so far, whether it went on. */
interface WrittenCall {
  id: string;
  name: string;
  args: string;
  sent: boolean;
}

const callPart = (call: WrittenCall): CallPart => ({ type: 'tool-call', id: call.id, name: call.name, arguments: call.args });

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
  /** True when replies are asked for streamed. */
  readonly stream: boolean;
  /** For tracing: the GenAI conventions' name of this wire's provider, and the server of {@link url}. */
  readonly providerName = 'openai';
  readonly server: { readonly address: string; readonly port: number };

  constructor(options: OpenAIChatOptions = {}) {
    if (options === null || typeof options !== 'object') throw new ConfigError('OpenAIChatProvider', `options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, fields, 'OpenAIChatProvider', { noun: 'option' });
    const baseURL = (options.baseURL ?? process.env['OPENAI_BASE_URL'] ?? OPENAI_URL).replace(/\/+$/, '');
    this.url = `${baseURL}/chat/completions`;
    this.label = providerLabel('OpenAI Chat Completions', this.url);
    this.server = serverOf(this.url);
    this.#apiKey = resolveKey(options.apiKey, 'OPENAI_API_KEY', baseURL === OPENAI_URL, 'OpenAIChatProvider');
    this.#headers = { ...options.headers };
    this.#body = { ...options.body };
    this.#retry = retryPolicy(options.retry);
    this.#timeoutSeconds = checkTimeoutSeconds(options.timeoutSeconds === undefined ? DEFAULT_TIMEOUT_SECONDS : options.timeoutSeconds);
    this.#fetch = options.fetch;
    const { stream = true } = options;
    if (typeof stream !== 'boolean') throw new ConfigError('stream', `stream must be true or false, got ${describeValue(stream)}`);
    this.stream = stream;
  }

  /** The reply: streamed parts by default (see `OpenAIChatOptions.stream`), else one whole response. */
  respond(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> | Observable<ModelStreamPart | ModelResponse> {
    const key = this.#apiKey;
    const secrets = key === undefined ? [] : [key];
    let body: Record<string, unknown>;
    try {
      body = toChatCompletionRequest(request, this.#body);
    } catch (error) {
      return Promise.reject(error);
    }
    const post = {
      provider: this.label,
      url: this.url,
      headers: { ...this.#headers, ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
      // Usage comes as a last chunk only when asked for; options given in `body` win.
      body: this.stream ? { ...body, stream: true, stream_options: { include_usage: true, ...(body['stream_options'] as object | undefined) } } : body,
      signal,
      retry: this.#retry,
      timeoutSeconds: this.#timeoutSeconds,
      ...(this.#fetch ? { fetch: this.#fetch } : {}),
      secrets,
    };
    if (this.stream) return streamedReply(post, () => new ChatCompletionChunks(this.label, secrets), (reply) => fromChatCompletion(reply, this.label));
    return postJson(post).then((reply) => fromChatCompletion(reply, this.label));
  }
}
