// An AI SDK model's streamed reply (doStream's parts, V3 or V4) read as the runner's stream parts.
// The point of reading it here rather than waiting for each `tool-call` part: a call is handed on
// as soon as its input is complete, so it starts inside its lanes while the model is still
// writing the calls after it, whatever the provider package does with its `tool-call` parts.
import type { ModelStreamPart } from '../runner/index.js';
import { finishReasonOf, responseInfoOf, usageOf, type AiSdkStreamPart } from './aiSdkModel.js';

type Part<T extends string> = Extract<AiSdkStreamPart, { type: T }>;

/** A call whose input is being written: its tool, its input so far, whether it was handed on. */
interface OpenCall {
  readonly name: string;
  /** The input's JSON text so far, the deltas since `tool-input-start` joined. */
  input: string;
  /** True for input written as raw text (V4's `inputEncoding: 'text'`): only its `tool-call` part completes it. */
  readonly raw: boolean;
  /** The arguments the call was handed on with, once it was. */
  sent: string | undefined;
}

/**
 * Reads one streamed reply. A call of the runner's is complete at the first of:
 * - its `tool-input-end` (its arguments: the `tool-input-delta`s since its `tool-input-start`);
 * - the moment its input so far is a whole JSON object: a JSON object cannot go on once it is
 *   closed, and some provider packages (the AI SDK's OpenAI chat model among them) write every
 *   call's `tool-input-end` only when the stream closes;
 * - its `tool-call` part, for a call whose input was not streamed, or was empty, or raw text.
 *
 * Calls go on in the order the model started writing them (their `tool-input-start`): a call
 * complete while one started before it is still open waits for it, so a call whose JSON never
 * closes keeps its place (it goes on, with what was written of it, at its `tool-input-end`, its
 * `tool-call` part or the `finish`, and fails there as arguments that are not JSON).
 *
 * A later `tool-call` part for a call already handed on is not a second call: it is dropped. If
 * its input differs from what was streamed, the streamed arguments stand: the call started with
 * them, and they are what the transcript records. Calls the provider runs itself
 * (`providerExecuted`) are not the runner's and are left out, as are the parts the runner does
 * not read (reasoning, sources, files, provider metadata); the response's id and model go on as a `response` part. An `error` part is thrown.
 */
export function streamReader(): (part: AiSdkStreamPart) => ModelStreamPart[] | undefined {
  // Calls whose input is streamed, by id, from their tool-input-start on.
  const open = new Map<string, OpenCall>();
  // Ids of calls handed on, so a second tool-call part for one of them is not a second call.
  const handedOn = new Set<string>();

  // The runner's calls in the order the model started writing them, each with its part once it is complete.
  const order: Array<{ readonly id: string; part: ModelStreamPart | undefined }> = [];

  // A call's place is where the model started writing it: a complete call goes on once every
  // call started before it has (one whose JSON is still open holds the later ones back).
  const released = (): ModelStreamPart[] | undefined => {
    let n = 0;
    while (n < order.length && order[n]!.part !== undefined) n++;
    return n === 0 ? undefined : order.splice(0, n).map((entry) => entry.part!);
  };

  const handOn = (id: string, name: string, args: string): ModelStreamPart[] | undefined => {
    handedOn.add(id);
    const part: ModelStreamPart = { type: 'tool-call', id, name, arguments: args };
    const entry = order.find((e) => e.id === id);
    if (entry === undefined) order.push({ id, part });
    else entry.part = part;
    return released();
  };

  // The stream is over: a call whose input never completed goes on in its place with what was written of it.
  const rest = (): ModelStreamPart[] => {
    for (const entry of order) {
      const call = open.get(entry.id);
      if (entry.part === undefined && call !== undefined) {
        handedOn.add(entry.id);
        entry.part = { type: 'tool-call', id: entry.id, name: call.name, arguments: call.input };
      }
    }
    return order.splice(0).flatMap((entry) => (entry.part === undefined ? [] : [entry.part]));
  };

  const complete = (id: string, call: OpenCall): ModelStreamPart[] | undefined => {
    if (call.sent !== undefined || call.raw || call.input.trim() === '') return undefined;
    call.sent = call.input;
    return handOn(id, call.name, call.input);
  };

  return (part) => {
    switch (part.type) {
      case 'text-delta': {
        const { delta } = part as Part<'text-delta'>;
        return delta === '' ? undefined : [{ type: 'text-delta', delta }];
      }
      case 'tool-input-start': {
        const start = part as Part<'tool-input-start'>;
        // The provider's own calls, and a second start for a call already handed on, are not read.
        if (start.providerExecuted === true || handedOn.has(start.id)) return undefined;
        open.set(start.id, { name: start.toolName, input: '', raw: start.inputEncoding === 'text', sent: undefined });
        if (!order.some((e) => e.id === start.id)) order.push({ id: start.id, part: undefined });
        return undefined;
      }
      case 'tool-input-delta': {
        const { id, delta } = part as Part<'tool-input-delta'>;
        const call = open.get(id);
        if (call === undefined || call.sent !== undefined) return undefined;
        call.input += delta;
        return !call.raw && closesObject(delta) && isWholeObject(call.input) ? complete(id, call) : undefined;
      }
      case 'tool-input-end': {
        const { id } = part as Part<'tool-input-end'>;
        const call = open.get(id);
        return call === undefined ? undefined : complete(id, call);
      }
      case 'tool-call': {
        const call = part as Part<'tool-call'>;
        if (call.providerExecuted === true || handedOn.has(call.toolCallId)) return undefined;
        open.delete(call.toolCallId);
        return handOn(call.toolCallId, call.toolName, call.input);
      }
      case 'finish': {
        const { usage: used, finishReason } = part as Part<'finish'>;
        const usage = usageOf(used);
        const reason = finishReasonOf(finishReason);
        const out: ModelStreamPart[] = rest();
        if (usage !== undefined) out.push({ type: 'usage', ...usage });
        if (reason !== undefined) out.push({ type: 'finish', finishReason: reason });
        return out;
      }
      case 'response-metadata': {
        // Which response this is (its id and model), for tracing; the turn is the same without it.
        const info = responseInfoOf(part as Part<'response-metadata'>);
        return info === undefined ? undefined : [{ type: 'response', ...info }];
      }
      case 'error':
        throw (part as Part<'error'>).error;
      default:
        return undefined;
    }
  };
}

// Whether a delta ends in `}` (trailing whitespace aside): only then can the input have become a
// whole object, so the input is parsed at most once per such delta, not once per delta.
function closesObject(delta: string): boolean {
  for (let i = delta.length - 1; i >= 0; i--) {
    const c = delta.charCodeAt(i);
    if (c === 0x7d) return true;
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return false;
  }
  return false;
}

function isWholeObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value);
  } catch {
    return false;
  }
}
