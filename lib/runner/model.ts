// The runner's side of the conversation with a model: what it sends each turn
// (ModelRequest), what it accepts back (ModelResponse, decoded with io-ts, since a
// provider's reply is input from outside), and the provider interface itself.
import * as t from 'io-ts';
import type { Observable } from 'rxjs';
import type { ToolSpec } from '../tools/index.js';

/** One message of the conversation. Tool results go back as `tool` messages, in call order. */
export interface Message {
  readonly role: 'user' | 'assistant' | 'tool';
  readonly content: string;
  /** On an assistant message: the calls the model asked for. */
  readonly toolCalls?: readonly ToolCall[];
  /** On a tool message: the call it answers. */
  readonly toolCallId?: string;
  /** On a tool message: true when the call failed or its outcome is unknown. */
  readonly isError?: boolean;
}

/** One tool call as the model asked for it; `arguments` is JSON text or an object. */
export interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string | Readonly<Record<string, unknown>>;
}

export interface ModelRequest {
  /** The agent's name. */
  readonly agent: string;
  readonly model: string;
  readonly instructions: string;
  readonly messages: readonly Message[];
  readonly tools: readonly ToolSpec[];
}

export interface ModelResponse {
  readonly text?: string;
  readonly toolCalls?: readonly ToolCall[];
}

/** A model behind any wire: given a request, one response (a Promise, or an Observable's first value). */
export interface ModelProvider {
  respond(request: ModelRequest, signal: AbortSignal): Promise<ModelResponse> | Observable<ModelResponse>;
}

const ToolCallCodec = t.type({
  id: t.string,
  name: t.string,
  arguments: t.union([t.string, t.UnknownRecord]),
});

/** A provider's reply, as the runner accepts it; `null` is read as absent. */
export const ModelResponseCodec = t.intersection([
  t.UnknownRecord,
  t.partial({
    text: t.union([t.string, t.null, t.undefined]),
    toolCalls: t.union([t.array(ToolCallCodec), t.null, t.undefined]),
  }),
]);
