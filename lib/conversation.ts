// The conversation's shapes: one message, one tool call, and what a run is asked with (a user's
// text, or a whole conversation ending with the user's message). Types only, at the bottom of the
// library, so that tools (a body's `runAgent`) and the runner name the same thing.

/** One tool call as the model asked for it; `arguments` is JSON text or an object. */
export interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string | Readonly<Record<string, unknown>>;
}

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

/**
 * What a run is asked with: the user's text, or a conversation (earlier turns, their calls and
 * results) whose last message is the user's, the one the run answers.
 */
export type RunInput = string | readonly Message[];
