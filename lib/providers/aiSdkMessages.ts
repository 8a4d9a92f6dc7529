// The Vercel AI SDK's conversations as a run's input: `UIMessage[]` (what `useChat` sends) and
// `ModelMessage[]` (what `streamText` takes) read into the library's Message[], each earlier
// call and its outcome as an assistant message's call and a tool message. The shapes are
// declared here, structurally, so the library's declarations need no `ai` package.
import { describeValue } from '../config/index.js';
import { ConfigError } from '../errors.js';
import { jsonText } from '../json.js';
import { inFlightMessage } from '../stopClass.js';
import type { Message, ToolCall } from '../runner/index.js';

/** One part of a message, as far as these readers need to know before looking inside. */
export interface AiSdkPartLike {
  readonly type: string;
}

/** The AI SDK's `UIMessage` (v5 to v7), structurally: any `UIMessage` is one. */
export interface UIMessageLike {
  readonly role: string;
  readonly parts: readonly AiSdkPartLike[];
}

/** The AI SDK's `ModelMessage` (v5 to v7), structurally: any `ModelMessage` is one. */
export interface ModelMessageLike {
  readonly role: string;
  readonly content: string | readonly AiSdkPartLike[];
}

type Fields = Readonly<Record<string, unknown>>;

/** How `fromUIMessages` reads a conversation. */
export interface FromUIMessagesOptions {
  /** What the whole value is called in errors. Default `'messages'`. */
  readonly root?: string;
  /**
   * A tool part still without its outcome (`input-streaming`, `input-available`, an approval not
   * yet settled: the reply was cut off, say by the user's stop button, before its result came).
   * `'refuse'` (the default): a ConfigError naming the part. `'unknown'`: the call goes on with a
   * tool message marked an error saying its outcome is unknown and its side effect may have
   * landed, so the chat can go on and the model is not told a result it never had.
   */
  readonly incompleteCalls?: 'refuse' | 'unknown';
}

/** The tool message of a call whose outcome never reached the conversation. */
export const UNKNOWN_OUTCOME = inFlightMessage('the outcome of this call is not in the conversation (the reply was cut off before it came)', false);

function refused(path: string, expected: string, actual: unknown): ConfigError {
  return new ConfigError(path, `${path}: expected ${expected}, got ${describeValue(actual)}`);
}

function record(value: unknown, path: string, expected: string): Fields {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw refused(path, expected, value);
  return value as Fields;
}

function text(fields: Fields, key: string, path: string): string {
  const value = fields[key];
  if (typeof value !== 'string') throw refused(`${path}.${key}`, 'string', value);
  return value;
}

// The roles a UI message may have here.
const uiRoles = '"user" or "assistant"';

function refusedRole(role: unknown, path: string, roles: string): ConfigError {
  const hint = role === 'system' ? ' (the agent\'s instructions are the system prompt: leave system messages out)' : '';
  return refused(`${path}.role`, `${roles}${hint}`, role);
}

// A call's input as the conversation keeps it: an object (a call given no input has `{}`).
function callInput(input: unknown, path: string): ToolCall['arguments'] {
  if (input === undefined) return {};
  if (typeof input === 'string') return input;
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw refused(path, 'an object of arguments', input);
  return input as Readonly<Record<string, unknown>>;
}

// The parts that carry nothing the model is sent again: its reasoning, step marks, sources, app data.
function unsent(type: string): boolean {
  return type === 'reasoning' || type === 'step-start' || type === 'source-url' || type === 'source-document' || type.startsWith('data-');
}

/** One assistant step being read: its text, its calls, then their outcomes as tool messages. */
class Step {
  text = '';
  calls: ToolCall[] = [];
  outcomes: Message[] = [];

  get empty(): boolean {
    return this.text === '' && this.calls.length === 0;
  }

  // The step as messages, appended to `out`; the step is then empty again.
  flush(out: Message[]): void {
    if (!this.empty) out.push(this.calls.length === 0 ? { role: 'assistant', content: this.text } : { role: 'assistant', content: this.text, toolCalls: this.calls });
    out.push(...this.outcomes);
    this.text = '';
    this.calls = [];
    this.outcomes = [];
  }
}

// A UI tool part's outcome as a tool message; a call still without one is refused, or said to be unknown.
function uiOutcome(part: Fields, toolCallId: string, path: string, incomplete: 'refuse' | 'unknown'): Message {
  switch (part.state) {
    case 'output-available':
      return { role: 'tool', toolCallId, content: jsonText(part.output) };
    case 'output-error':
      return { role: 'tool', toolCallId, content: text(part, 'errorText', path), isError: true };
    case 'output-denied': {
      const approval = part.approval as { reason?: unknown } | undefined;
      const reason = typeof approval?.reason === 'string' && approval.reason !== '' ? `: ${approval.reason}` : '';
      return { role: 'tool', toolCallId, content: `the call was not approved${reason}`, isError: true };
    }
    default:
      if (incomplete === 'unknown' && typeof part.state === 'string') return { role: 'tool', toolCallId, content: UNKNOWN_OUTCOME, isError: true };
      throw refused(`${path}.state`, '"output-available", "output-error" or "output-denied" (a call in the history needs its outcome; incompleteCalls: \'unknown\' sends it on as unknown)', part.state);
  }
}

/**
 * Reads the AI SDK's `UIMessage[]` (the `messages` a `useChat` request body carries) into a
 * conversation for `runner.run` / `run$`. A user message is its text parts, joined with line
 * breaks. An assistant message is one assistant message per step (`step-start` parts divide
 * them; without them, text after a call begins a new step): the step's text, its tool parts as
 * calls (`tool-<name>` and `dynamic-tool` alike), then each call's outcome as a tool message
 * (`output-available`: its output as JSON text; `output-error`: its error text, marked an error;
 * `output-denied`: marked an error). Reasoning, step marks, sources and data parts are left out,
 * and so are calls the provider executed itself.
 *
 * Refused, with a ConfigError naming the place (`messages[2].parts[1].state`) and what was
 * expected there: a system message (the agent's instructions are the system prompt), a file
 * part (conversations are text), a call still without its outcome (unless `incompleteCalls` is
 * `'unknown'`). The order of the result (calls answered, the user's message last) is checked by the run.
 *
 * ## Example
 * ```ts
 * const { messages } = JSON.parse(body);                 // from useChat
 * runner.run$(agent, fromUIMessages(messages), { signal });
 * ```
 */
// Generic, so a message written out in place (with its parts' own fields) is not an excess-property error.
export function fromUIMessages<M extends UIMessageLike>(messages: readonly M[], options: FromUIMessagesOptions = {}): Message[] {
  const { root = 'messages', incompleteCalls = 'refuse' } = options;
  if (incompleteCalls !== 'refuse' && incompleteCalls !== 'unknown') throw refused('incompleteCalls', '"refuse" or "unknown"', incompleteCalls);
  if (!Array.isArray(messages)) throw refused(root, 'an array of UI messages', messages);
  const out: Message[] = [];
  messages.forEach((raw: unknown, i) => {
    const path = `${root}[${i}]`;
    const message = record(raw, path, 'a UI message: an object with a role and parts');
    const { role, parts } = message;
    if (role !== 'user' && role !== 'assistant') throw refusedRole(role, path, uiRoles);
    if (!Array.isArray(parts)) throw refused(`${path}.parts`, 'an array of parts', parts);
    if (role === 'user') {
      const texts: string[] = [];
      parts.forEach((rawPart: unknown, j) => {
        const at = `${path}.parts[${j}]`;
        const part = record(rawPart, at, 'a part: an object with a type');
        if (part.type === 'text') texts.push(text(part, 'text', at));
        else if (typeof part.type !== 'string' || !unsent(part.type)) throw refused(`${at}.type`, '"text" (a user message is sent as its text)', part.type);
      });
      out.push({ role: 'user', content: texts.join('\n') });
      return;
    }
    const step = new Step();
    parts.forEach((rawPart: unknown, j) => {
      const at = `${path}.parts[${j}]`;
      const part = record(rawPart, at, 'a part: an object with a type');
      const { type } = part;
      if (type === 'step-start') return step.flush(out);
      if (type === 'text') {
        // Text after a call is the next step's: the model wrote it once the results were in.
        if (step.calls.length > 0) step.flush(out);
        step.text += text(part, 'text', at);
        return;
      }
      if (typeof type === 'string' && (type === 'dynamic-tool' || type.startsWith('tool-'))) {
        if (part.providerExecuted === true) return;
        const name = type === 'dynamic-tool' ? text(part, 'toolName', at) : type.slice('tool-'.length);
        const id = text(part, 'toolCallId', at);
        step.calls.push({ id, name, arguments: callInput(part.input, `${at}.input`) });
        step.outcomes.push(uiOutcome(part, id, at, incompleteCalls));
        return;
      }
      if (typeof type === 'string' && unsent(type)) return;
      throw refused(`${at}.type`, 'a text, tool, reasoning, step, source or data part (a conversation is sent as text)', type);
    });
    step.flush(out);
  });
  return out;
}

// A tool result's output (the AI SDK's `ToolResultOutput`) as a tool message's content and error mark.
function modelOutcome(part: Fields, toolCallId: string, path: string): Message {
  // Before `output` (ai 4), a result was `result`: read as JSON.
  if (part.output === undefined && 'result' in part) return { role: 'tool', toolCallId, content: jsonText(part.result) };
  const output = record(part.output, `${path}.output`, 'a tool result output: an object with a type');
  switch (output.type) {
    case 'text':
      return { role: 'tool', toolCallId, content: text(output, 'value', `${path}.output`) };
    case 'json':
      return { role: 'tool', toolCallId, content: jsonText(output.value) };
    case 'error-text':
      return { role: 'tool', toolCallId, content: text(output, 'value', `${path}.output`), isError: true };
    case 'error-json':
      return { role: 'tool', toolCallId, content: jsonText(output.value), isError: true };
    case 'execution-denied': {
      const reason = typeof output.reason === 'string' && output.reason !== '' ? `: ${output.reason}` : '';
      return { role: 'tool', toolCallId, content: `the call was not approved${reason}`, isError: true };
    }
    case 'content': {
      const items = output.value;
      if (!Array.isArray(items)) throw refused(`${path}.output.value`, 'an array of content', items);
      const texts = items.map((item: unknown, k) => {
        const at = `${path}.output.value[${k}]`;
        const fields = record(item, at, 'a content item');
        if (fields.type !== 'text') throw refused(`${at}.type`, '"text" (a tool result is sent as text)', fields.type);
        return text(fields, 'text', at);
      });
      return { role: 'tool', toolCallId, content: texts.join('\n') };
    }
    default:
      throw refused(`${path}.output.type`, '"text", "json", "error-text", "error-json", "execution-denied" or "content"', output.type);
  }
}

/**
 * Reads the AI SDK's `ModelMessage[]` (what `streamText({ messages })` takes, and what
 * `response.messages` gives back) into a conversation for `runner.run` / `run$`. A user
 * message is its text (text parts joined with line breaks); an assistant message its text and
 * its `tool-call` parts as calls; each `tool-result` of a tool message becomes a tool message
 * (`text` and `json` outputs as their text or JSON text; `error-text`, `error-json` and
 * `execution-denied` marked errors). Reasoning, approval requests and responses, and calls the
 * provider executed itself are left out.
 *
 * Refused, with a ConfigError naming the place (`messages[1].content[0].type`): a system
 * message (the agent's instructions are the system prompt), an image or file part, a tool
 * result with media in it. The order (calls answered, the user's message last) is checked by the run.
 *
 * ## Example
 * ```ts
 * const history: ModelMessage[] = [...earlier, ...result.response.messages, { role: 'user', content: 'And Porto?' }];
 * await runner.run(agent, fromModelMessages(history));
 * ```
 */
export function fromModelMessages<M extends ModelMessageLike>(messages: readonly M[], options: { readonly root?: string } = {}): Message[] {
  const { root = 'messages' } = options;
  if (!Array.isArray(messages)) throw refused(root, 'an array of model messages', messages);
  const out: Message[] = [];
  messages.forEach((raw: unknown, i) => {
    const path = `${root}[${i}]`;
    const message = record(raw, path, 'a model message: an object with a role and content');
    const { role, content } = message;
    if (role !== 'user' && role !== 'assistant' && role !== 'tool') throw refusedRole(role, path, '"user", "assistant" or "tool"');
    if (typeof content === 'string') {
      if (role === 'tool') throw refused(`${path}.content`, 'an array of tool results', content);
      out.push({ role, content });
      return;
    }
    if (!Array.isArray(content)) throw refused(`${path}.content`, 'a string or an array of parts', content);
    const parts = content.map((rawPart: unknown, j) => record(rawPart, `${path}.content[${j}]`, 'a part: an object with a type'));
    const at = (j: number): string => `${path}.content[${j}]`;
    if (role === 'user') {
      const texts = parts.map((part, j) => {
        if (part.type !== 'text') throw refused(`${at(j)}.type`, '"text" (a user message is sent as its text)', part.type);
        return text(part, 'text', at(j));
      });
      out.push({ role: 'user', content: texts.join('\n') });
      return;
    }
    if (role === 'tool') {
      parts.forEach((part, j) => {
        if (part.type === 'tool-approval-response') return;
        if (part.type !== 'tool-result') throw refused(`${at(j)}.type`, '"tool-result"', part.type);
        out.push(modelOutcome(part, text(part, 'toolCallId', at(j)), at(j)));
      });
      return;
    }
    let said = '';
    const calls: ToolCall[] = [];
    parts.forEach((part, j) => {
      switch (part.type) {
        case 'text':
          said += text(part, 'text', at(j));
          return;
        case 'tool-call':
          if (part.providerExecuted === true) return;
          calls.push({ id: text(part, 'toolCallId', at(j)), name: text(part, 'toolName', at(j)), arguments: callInput(part.input ?? part.args, `${at(j)}.input`) });
          return;
        case 'reasoning':
        case 'tool-result':
        case 'tool-approval-request':
          // Reasoning is not sent again; a result here is of a call the provider executed, left out with it.
          return;
        default:
          throw refused(`${at(j)}.type`, '"text", "tool-call" or "reasoning" (a conversation is sent as text)', part.type);
      }
    });
    out.push(calls.length === 0 ? { role: 'assistant', content: said } : { role: 'assistant', content: said, toolCalls: calls });
  });
  return out;
}
