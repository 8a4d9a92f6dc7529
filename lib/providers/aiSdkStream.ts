// An AI SDK model's streamed reply (doStream's parts, V3 or V4) read as the runner's stream parts.
// The point of reading it here rather than waiting for each `tool-call` part: a call is handed on
// as soon as its input is complete, so it starts inside its lanes while the model is still
// writing the calls after it, whatever the provider package does with its `tool-call` parts.
import type { ModelStreamPart } from '../runner/index.js';
import { finishReasonOf, responseInfoOf, usageOf, type AiSdkStreamPart } from './aiSdkModel.js';
import { closesObject, StartOrder } from './streamedCalls.js';

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

  // The runner's calls in the order the model started writing them.
  const order = new StartOrder<string>();

  const handOn = (id: string, name: string, args: string): ModelStreamPart[] | undefined => {
    handedOn.add(id);
    const out = order.complete(id, { type: 'tool-call', id, name, arguments: args });
    return out.length === 0 ? undefined : out;
  };

  // The stream is over: a call whose input never completed goes on in its place with what was written of it.
  const rest = (): ModelStreamPart[] =>
    order.ended((id) => {
      const call = open.get(id);
      if (call === undefined) return undefined;
      handedOn.add(id);
      return { type: 'tool-call', id, name: call.name, arguments: call.input };
    });

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
        order.started(start.id);
        return undefined;
      }
      case 'tool-input-delta': {
        const { id, delta } = part as Part<'tool-input-delta'>;
        const call = open.get(id);
        if (call === undefined || call.sent !== undefined) return undefined;
        call.input += delta;
        return !call.raw && closesObject(call.input, delta) ? complete(id, call) : undefined;
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
