// The runner's side of the conversation with a model: what it sends each turn
// (ModelRequest), what it accepts back (a whole ModelResponse, or the turn as a stream of
// parts, decoded with io-ts, since a provider's response is input from outside), and the
// provider interface itself.
import { isLeft, isRight, left, right, type Either } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { describeFailures, describeValue } from '../../config/index.js';
import type { Observable } from 'rxjs';
import type { ToolSpec } from '../../tools/index.js';
import type { Message, ToolCall } from '../../conversation.js';

export type { Message, RunInput, ToolCall } from '../../conversation.js';

export interface ModelRequest {
  /** The agent's name. */
  readonly agent: string;
  readonly model: string;
  readonly instructions: string;
  readonly messages: readonly Message[];
  readonly tools: readonly ToolSpec[];
}

/** The tokens one model turn used, as its provider reported them. */
export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** Two usages added; either may be absent (a provider that reported none), and both absent stays absent. */
export function addedUsage(a: Usage | undefined, b: Usage | undefined): Usage | undefined {
  if (a === undefined || b === undefined) return a ?? b;
  return { inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens };
}

/** Why the model stopped writing its turn: the AI SDK's unified reasons, which every wire maps onto. */
export type FinishReason = 'stop' | 'length' | 'tool-calls' | 'content-filter' | 'error' | 'other';

/** Which response this was, as the wire says: its id, and the model that wrote it (which may differ from the one asked). */
export interface ResponseInfo {
  readonly id?: string;
  readonly model?: string;
}

export interface ModelResponse {
  readonly text?: string;
  readonly toolCalls?: readonly ToolCall[];
  /** The turn's token counts, when the provider reports them. */
  readonly usage?: Usage;
  readonly finishReason?: FinishReason;
  /** The response's id and model, when the provider reports them (read by tracing; not in the transcript). */
  readonly response?: ResponseInfo;
}

/**
 * One part of a streamed model turn. A turn is its parts in order: text deltas (joined, they are
 * the turn's text), each tool call once its arguments are complete (in call order), and the
 * turn's usage and finish reason (a later one replaces an earlier one), and which response it is
 * (`response`: its id and model, read by tracing).
 */
export type ModelStreamPart =
  | { readonly type: 'text-delta'; readonly delta: string }
  | ({ readonly type: 'tool-call' } & ToolCall)
  | ({ readonly type: 'usage' } & Usage)
  | { readonly type: 'finish'; readonly finishReason: FinishReason }
  | ({ readonly type: 'response' } & ResponseInfo);

/**
 * True for a value a provider streams a turn with: an object whose `type` is a string. A whole
 * ModelResponse has no `type`, so the first value a provider gives says which it sends.
 */
export function isStreamPart(value: unknown): boolean {
  return value !== null && typeof value === 'object' && typeof (value as { type?: unknown }).type === 'string';
}

/**
 * A model behind any wire. Given a request, the turn's response: one whole response (a Promise, or
 * an Observable's first value), or the turn as it is written, an Observable of stream parts
 * ending when the turn is complete. A streamed turn's calls start as soon as each is complete.
 */
export interface ModelProvider {
  respond(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> | Observable<ModelResponse | ModelStreamPart>;
  /**
   * Who serves the model, by the GenAI conventions' provider names (`openai`, `anthropic`,
   * `aws.bedrock` ...): the `gen_ai.provider.name` of a traced run's spans. Optional.
   */
  readonly providerName?: string;
  /** The server the requests go to, when the provider knows it: `server.address` and `server.port` on the spans. */
  readonly server?: { readonly address: string; readonly port?: number };
}

export interface TokenCountBrand {
  readonly TokenCount: unique symbol;
}
/** A number of tokens: a whole number from 0 up. */
const TokenCount = t.brand(t.number, (n): n is t.Branded<number, TokenCountBrand> => Number.isInteger(n) && n >= 0, 'TokenCount');

export const UsageCodec = t.type({ inputTokens: TokenCount, outputTokens: TokenCount });

export const FinishReasonCodec = t.keyof({ stop: null, length: null, 'tool-calls': null, 'content-filter': null, error: null, other: null });

const ToolCallCodec = t.intersection([
  t.type({ id: t.string, name: t.string }),
  // Some providers leave `arguments` out for a call without any.
  t.partial({ arguments: t.union([t.string, t.UnknownRecord, t.undefined]) }),
]);

/** A provider's response, as the runner accepts it; `null` is read as absent. Each call is checked on its own. */
export const ModelResponseCodec = t.intersection([
  t.UnknownRecord,
  t.partial({
    text: t.union([t.string, t.null, t.undefined]),
    toolCalls: t.union([t.UnknownArray, t.null, t.undefined]),
    usage: t.union([UsageCodec, t.null, t.undefined]),
    finishReason: t.union([FinishReasonCodec, t.null, t.undefined]),
  }),
]);

// A well-formed call, without the allocations of a codec's decode; undefined for anything else.
function plainCall(entry: unknown): ToolCall | undefined {
  if (entry === null || typeof entry !== 'object') return undefined;
  const { id, name, arguments: args } = entry as Record<string, unknown>;
  if (typeof id !== 'string' || typeof name !== 'string') return undefined;
  if (args === undefined) return { id, name, arguments: '{}' };
  if (typeof args === 'string' || t.UnknownRecord.is(args)) return { id, name, arguments: args };
  return undefined;
}

// What a response without a malformed call reports: one empty map, shared, that cannot be filled.
class EmptyMap<K, V> extends Map<K, V> {
  override set(): this {
    throw new TypeError('this map is read-only');
  }
}
const noneMalformed: ReadonlyMap<number, string> = new EmptyMap<number, string>();

/** A decoded response, with what was wrong with any call that did not decode, by position. */
export interface DecodedResponse {
  readonly response: ModelResponse;
  readonly malformed: ReadonlyMap<number, string>;
}

const isUsage = (value: unknown): value is Usage => UsageCodec.is(value);
const isFinishReason = (value: unknown): value is FinishReason => FinishReasonCodec.is(value);

/**
 * One call of a response, at `position` in call order. A well-formed call is itself; a malformed
 * one is kept, with a stand-in id or name if it lacks one, and `problem` says what was wrong,
 * so that it fails alone and its siblings still run.
 */
export function decodeToolCall(entry: unknown, position: number): { readonly call: ToolCall; readonly problem: string | undefined } {
  const plain = plainCall(entry);
  if (plain !== undefined) return { call: plain, problem: undefined };
  return malformedCall(entry, position);
}

function malformedCall(entry: unknown, i: number): { readonly call: ToolCall; readonly problem: string | undefined } {
  const decoded = ToolCallCodec.decode(entry);
  if (isRight(decoded)) return { call: { id: decoded.right.id, name: decoded.right.name, arguments: decoded.right.arguments ?? '{}' }, problem: undefined };
  const record = entry !== null && typeof entry === 'object' ? (entry as Record<string, unknown>) : {};
  const args = record.arguments;
  return {
    call: {
      id: typeof record.id === 'string' ? record.id : `malformed-${i + 1}`,
      name: typeof record.name === 'string' ? record.name : '(unnamed)',
      arguments: typeof args === 'string' || (args !== null && typeof args === 'object' && !Array.isArray(args)) ? (args as ToolCall['arguments']) : '{}',
    },
    problem: describeFailures(decoded.left, `toolCalls.${i}`),
  };
}

/** The keys a whole response may have, for the message that refuses another. */
export const responseKeys = 'text, toolCalls, usage, finishReason or response';

// The first key of a response that the contract does not know (`content`, `tool_calls`: another
// wire's shape), or undefined. Own enumerable keys, as the response's JSON would have them.
function unknownReplyKey(raw: object): string | undefined {
  const keys = Object.keys(raw);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (key !== 'text' && key !== 'toolCalls' && key !== 'usage' && key !== 'finishReason' && key !== 'response') return key;
  }
  return undefined;
}

/**
 * Decodes a provider's response. A response that is not an object, that has a key the contract does
 * not know (`content`, `tool_calls`: another wire's shape), that says nothing (neither `text`,
 * `toolCalls` nor a `finishReason` saying why there are neither: `{}`), or whose text, call
 * list, usage or finish reason has the wrong type, is refused whole (Left, with what came and
 * what was expected). `{ text: '' }` is a response. A single malformed call is kept, with a
 * stand-in id or name if it lacks one, and listed in `malformed`, so that it fails alone and
 * its siblings still run.
 */
export function decodeModelResponse(raw: unknown): Either<string, DecodedResponse> {
  let text: unknown;
  let toolCalls: unknown;
  let usage: unknown;
  let finishReason: unknown;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return left(`response: expected an object with ${responseKeys}, got ${describeValue(raw)}`);
  }
  const unknownKey = unknownReplyKey(raw);
  if (unknownKey !== undefined) {
    return left(`response.${unknownKey}: not a key of a reply (expected ${responseKeys}), got ${describeValue(raw)}`);
  }
  // The common response checked by hand (exactly what the codec accepts, without its allocations);
  // the codec decides anything else and words the error.
  ({ text, toolCalls, usage, finishReason } = raw as Record<string, unknown>);
  if (text == null && toolCalls == null && finishReason == null) {
    return left(`response: expected text or toolCalls (or a finishReason saying why there are neither), got ${describeValue(raw)}`);
  }
  if (
    !(text == null || typeof text === 'string') ||
    !(toolCalls == null || Array.isArray(toolCalls)) ||
    !(usage == null || isUsage(usage)) ||
    !(finishReason == null || isFinishReason(finishReason))
  ) {
    const decoded = ModelResponseCodec.decode(raw);
    if (isLeft(decoded)) return left(describeFailures(decoded.left, 'response'));
    ({ text, toolCalls, usage, finishReason } = decoded.right);
  }
  let malformed: Map<number, string> | undefined;
  const calls = ((toolCalls ?? []) as readonly unknown[]).map((entry, i): ToolCall => {
    // The common case checked by hand (a subset of what the codec accepts); the codec decides the rest and words the error.
    const plain = plainCall(entry);
    if (plain !== undefined) return plain;
    const { call, problem } = malformedCall(entry, i);
    if (problem !== undefined) (malformed ??= new Map()).set(i, problem);
    return call;
  });
  const response: { text?: string; toolCalls?: readonly ToolCall[]; usage?: Usage; finishReason?: FinishReason } = {};
  if (typeof text === 'string') response.text = text;
  if (calls.length > 0) response.toolCalls = calls;
  // Copied, so the event carries the counts alone, not whatever else the provider's object held.
  if (usage != null) response.usage = { inputTokens: (usage as Usage).inputTokens, outputTokens: (usage as Usage).outputTokens };
  if (finishReason != null) response.finishReason = finishReason as FinishReason;
  return right({ response, malformed: malformed ?? noneMalformed });
}
