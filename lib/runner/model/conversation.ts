// A run's input checked and copied: a user's text, or a conversation (the library's Message[])
// whose calls are each answered by a tool message and whose last message is the user's. Each
// message's shape is an io-ts decode; the order rules are checked after it. The first thing
// wrong is a ConfigError naming its place (`input[3].toolCallId`) and what was expected there.
import { isLeft, left, right, type Either } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { describeValue, failures } from '../../config/index.js';
import { ConfigError } from '../../errors.js';
import { describePath, nestedTooDeep, tooDeep } from '../../nesting.js';
import { frozenPlainCopy, jsonLike, NotPlainDataError } from '../../tools/index.js';
import type { Message, ToolCall } from '../../conversation.js';

/** A run's input as the run keeps it: the text it answers, and the conversation before it. */
export interface CheckedInput {
  /** The last user message's text (the whole input when it was a string). */
  readonly text: string;
  /** The messages before it, frozen copies; empty for a string input. */
  readonly history: readonly Message[];
}

const noHistory: readonly Message[] = Object.freeze([]);

const NonEmptyString = t.refinement(t.string, (s) => s !== '', 'a non-empty string');

const ToolCallCodec = t.type({ id: NonEmptyString, name: NonEmptyString, arguments: t.union([t.string, t.UnknownRecord]) });

const MessageCodec = t.intersection([
  t.type({ role: t.keyof({ user: null, assistant: null, tool: null }), content: t.string }),
  t.partial({
    toolCalls: t.union([t.array(ToolCallCodec), t.undefined]),
    toolCallId: t.union([NonEmptyString, t.undefined]),
    isError: t.union([t.boolean, t.undefined]),
  }),
]);

// What a run answers must say something: a model asked with an empty user message either refuses the
// request or answers nothing in particular, and either way a turn is paid for.
const blank = (text: string): boolean => text.trim() === '';

// `input.3.toolCalls.0.id` as a person reads an index: `input[3].toolCalls[0].id`.
function indexed(path: string): string {
  return path.replace(/\.(\d+)(?=\.|$)/g, '[$1]');
}

function refusal(path: string, expected: string, actual: unknown): ConfigError {
  return new ConfigError(path, `${path}: expected ${expected}, got ${describeValue(actual)}`);
}

// One call's arguments as the conversation keeps them: JSON text of an object, or a frozen copy of one.
function callArguments(args: ToolCall['arguments'], path: string): Either<ConfigError, ToolCall['arguments']> {
  if (typeof args === 'string') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(args);
    } catch {
      return left(refusal(path, 'JSON text of an object', args));
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return left(refusal(path, 'JSON text of an object', args));
    const deep = nestedTooDeep(parsed);
    return deep === undefined ? right(args) : left(new ConfigError(indexed(describePath(path, deep)), `${indexed(describePath(path, deep))} is ${tooDeep}`));
  }
  try {
    return right(frozenPlainCopy(args, path) as ToolCall['arguments']);
  } catch (error) {
    if (error instanceof NotPlainDataError) {
      const said = error.found === tooDeep ? indexed(error.message) : `${indexed(error.path)}: expected JSON-like data (${jsonLike}): ${error.message}`;
      return left(new ConfigError(indexed(error.path), said));
    }
    throw error;
  }
}

/**
 * Checks a conversation and copies it (frozen): every message a user, assistant or tool message
 * with text content; an assistant's calls each answered by one tool message before the next
 * user or assistant message; no tool message without an earlier call to answer; the last
 * message the user's, with text that is not blank (empty or only whitespace). `root` names the
 * whole value in errors (`input`, `messages`).
 *
 * ## Example
 * ```ts
 * decodeConversation([{ role: 'tool', toolCallId: 'c1', content: '{}' }, { role: 'user', content: 'go' }]);
 * // Left(ConfigError: input[0].toolCallId: expected the id of a call an earlier assistant message asked for, got "c1")
 * ```
 */
export function decodeConversation(value: unknown, root = 'input'): Either<ConfigError, readonly Message[]> {
  if (!Array.isArray(value) || value.length === 0) {
    return left(refusal(root, 'a conversation: an array of messages ending with the user\'s', value));
  }
  const out: Message[] = [];
  // The calls of the last assistant message not answered yet, by id, with where they were asked.
  const open = new Map<string, { readonly tool: string; readonly at: number }>();
  // Calls answered since that message, to tell a second answer from a stray one.
  const answered = new Set<string>();
  for (let i = 0; i < value.length; i++) {
    const at = `${root}[${i}]`;
    const raw: unknown = value[i];
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return left(refusal(at, 'a message: an object with a role and content', raw));
    const decoded = MessageCodec.decode(raw);
    if (isLeft(decoded)) {
      const first = failures(decoded.left, at)[0]!;
      const path = indexed(first.path);
      const hint = path === `${at}.role` && first.actual === 'system' ? ' (the agent\'s instructions are the system prompt)' : '';
      return left(refusal(path, `${first.expected}${hint}`, first.actual));
    }
    const { role, content, toolCalls, toolCallId, isError } = decoded.right;
    if (role !== 'assistant' && toolCalls !== undefined) return left(refusal(`${at}.toolCalls`, 'no calls on a user or tool message (only an assistant asks for calls)', toolCalls));
    if (role !== 'tool' && (toolCallId !== undefined || isError !== undefined)) {
      const field = toolCallId !== undefined ? 'toolCallId' : 'isError';
      return left(refusal(`${at}.${field}`, `no ${field} on a ${role} message (only a tool message answers a call)`, toolCallId ?? isError));
    }
    if (role === 'tool') {
      if (toolCallId === undefined) return left(refusal(`${at}.toolCallId`, 'the id of the call this tool message answers', undefined));
      if (!open.delete(toolCallId)) {
        const expected = answered.has(toolCallId) ? `the id of a call not answered yet (${toolCallId} was answered before)` : 'the id of a call an earlier assistant message asked for';
        return left(refusal(`${at}.toolCallId`, expected, toolCallId));
      }
      answered.add(toolCallId);
      out.push(Object.freeze(isError === undefined ? { role, toolCallId, content } : { role, toolCallId, content, isError }));
      continue;
    }
    if (open.size > 0) {
      const [id, call] = open.entries().next().value as [string, { tool: string; at: number }];
      return left(refusal(at, `a tool message answering call ${id} (${call.tool}) of ${root}[${call.at}] before the next ${role} message`, raw));
    }
    answered.clear();
    if (role === 'user') {
      out.push(Object.freeze({ role, content }));
      continue;
    }
    if (toolCalls === undefined || toolCalls.length === 0) {
      out.push(Object.freeze({ role, content }));
      continue;
    }
    const calls: ToolCall[] = [];
    for (let c = 0; c < toolCalls.length; c++) {
      const { id, name } = toolCalls[c]!;
      if (open.has(id)) return left(refusal(`${at}.toolCalls[${c}].id`, 'an id no other call of this message has', id));
      const args = callArguments(toolCalls[c]!.arguments, `${at}.toolCalls[${c}].arguments`);
      if (isLeft(args)) return args;
      open.set(id, { tool: name, at: i });
      calls.push(Object.freeze({ id, name, arguments: args.right }));
    }
    out.push(Object.freeze({ role, content, toolCalls: Object.freeze(calls) }));
  }
  if (open.size > 0) {
    const [id, call] = open.entries().next().value as [string, { tool: string; at: number }];
    return left(refusal(`${root}[${value.length}]`, `a tool message answering call ${id} (${call.tool}) of ${root}[${call.at}], then the user's message`, undefined));
  }
  const last = out[out.length - 1]!;
  if (last.role !== 'user') {
    return left(refusal(`${root}[${out.length - 1}].role`, '"user": a conversation ends with the user message the run answers', last.role));
  }
  if (blank(last.content)) {
    return left(refusal(`${root}[${out.length - 1}].content`, 'the text of the user message the run answers, not empty or only whitespace', last.content));
  }
  return right(Object.freeze(out));
}

/**
 * A run's input checked: its text, and the conversation before it. Throws a ConfigError for bad
 * input, an empty one included: a blank string (`input`), or a conversation whose last message,
 * the user's, is blank (`input[n].content`, as `decodeConversation` says).
 */
export function checkedInput(input: unknown): CheckedInput {
  if (typeof input === 'string') {
    if (blank(input)) throw new ConfigError('input', `input must be the user's text, not empty or only whitespace, got ${describeValue(input)}`);
    return { text: input, history: noHistory };
  }
  if (!Array.isArray(input)) throw new ConfigError('input', `input must be a string or a conversation (an array of messages), got ${describeValue(input)}`);
  const decoded = decodeConversation(input);
  if (isLeft(decoded)) throw decoded.left;
  const messages = decoded.right;
  return { text: messages[messages.length - 1]!.content, history: messages.length === 1 ? noHistory : Object.freeze(messages.slice(0, -1)) };
}
