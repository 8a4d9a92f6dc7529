// The cassette: one recorded run as plain JSON data. Model exchanges are keyed by turn and
// tool outcomes by turn and call index, never by the order things finished, so the same
// run gives the same cassette whichever lookup was quickest. The io-ts codec reads one back.
import * as t from 'io-ts';
import type { ErrorInfo } from '../errors.js';
import type { Message, RunCancelledEvent, RunCompletedEvent, RunFailedEvent } from '../runner/index.js';
import type { Fingerprint } from './fingerprint.js';

/** The format version this library writes and reads. */
export const CASSETTE_VERSION = 1;

/** A delta a call recorded with `ctx.record`, as JSON. */
export type RecordedDelta = Readonly<Record<string, unknown>>;

/** How the run was started. */
export interface RecordedRun {
  /** The agent's name. */
  readonly agent: string;
  readonly tenant: string;
  /** The text of the user message the run answered. */
  readonly input: string;
  /** The conversation before it, when the run was given one (JSON inside it canonical and scrubbed, as in requests). */
  readonly history?: readonly Message[];
  /** The run's starting state. */
  readonly state: Readonly<Record<string, unknown>>;
  /** Set when the recorded run was given one. */
  readonly maxTurns?: number;
}

/**
 * A request as stored and compared: the conversation, with JSON inside tool messages and
 * arguments in canonical form, and the tools by name (their definitions are the fingerprint's;
 * the agent, model and instructions are too).
 */
export interface RecordedRequest {
  readonly messages: readonly Message[];
  readonly tools: readonly string[];
}

/** What the model gave back: a response (as the runner accepted it), a failure, or nothing before the run stopped. */
export type RecordedReply = { readonly response: unknown } | { readonly error: ErrorInfo } | { readonly stopped: true };

interface RecordedCallBase {
  /** The call's position in the model's response (0-based). */
  readonly index: number;
  readonly callId: string;
  readonly tool: string;
  /** True when the tool's body was invoked. */
  readonly dispatched: boolean;
  /** True when the batch stopped the call (it did not end by itself): never dispatched, or stopped in flight. */
  readonly stopped: boolean;
}

/** One tool call's outcome, as the transcript reported it. */
export type RecordedCall = RecordedCallBase &
  (
    | { readonly kind: 'result'; readonly result?: unknown; readonly deltas?: readonly RecordedDelta[] }
    | { readonly kind: 'error'; readonly error: ErrorInfo }
    | { readonly kind: 'indeterminate'; readonly message: string }
  );

/** One model turn: the request, the reply, and the outcome of each call the reply asked for, in call order. */
export interface RecordedTurn {
  /** 1-based, as the runner numbers turns. */
  readonly turn: number;
  readonly request: RecordedRequest;
  readonly reply: RecordedReply;
  readonly calls: readonly RecordedCall[];
}

/** The event that ended the run. */
export type RecordedEnding = RunCompletedEvent | RunFailedEvent | RunCancelledEvent;

/** One recorded run. Write it with `stringifyCassette`, read it with `parseCassette`. */
export interface Cassette {
  readonly version: typeof CASSETTE_VERSION;
  readonly fingerprint: Fingerprint;
  /** The keys whose values were redacted (lower case); a replay scrubs its requests the same way. */
  readonly redact: readonly string[];
  readonly run: RecordedRun;
  readonly turns: readonly RecordedTurn[];
  readonly ending: RecordedEnding;
}

// A provider's failure keeps its facts (status, code, attempts), so a replay fails with them too.
const ErrorInfoCodec = t.intersection([
  t.type({ name: t.string, message: t.string }),
  t.partial({ status: t.number, code: t.union([t.string, t.number]), attempts: t.number }),
]);

const ToolCallCodec = t.type({ id: t.string, name: t.string, arguments: t.union([t.string, t.UnknownRecord]) });

const MessageCodec = t.intersection([
  t.type({ role: t.keyof({ user: null, assistant: null, tool: null }), content: t.string }),
  t.partial({ toolCalls: t.array(ToolCallCodec), toolCallId: t.string, isError: t.boolean }),
]);

const ReplyCodec = t.union([
  t.type({ stopped: t.literal(true) }),
  t.type({ error: ErrorInfoCodec }),
  t.type({ response: t.unknown }),
]);

const CallCodec = t.intersection([
  t.type({ index: t.number, callId: t.string, tool: t.string, dispatched: t.boolean, stopped: t.boolean }),
  t.union([
    t.intersection([t.type({ kind: t.literal('result') }), t.partial({ result: t.unknown, deltas: t.array(t.UnknownRecord) })]),
    t.type({ kind: t.literal('error'), error: ErrorInfoCodec }),
    t.type({ kind: t.literal('indeterminate'), message: t.string }),
  ]),
]);

const EndingCodec = t.union([
  t.type({ type: t.literal('RUN_COMPLETED'), output: t.unknown }),
  t.type({ type: t.literal('RUN_FAILED'), error: ErrorInfoCodec }),
  t.type({ type: t.literal('RUN_CANCELLED'), reason: t.string }),
]);

const FingerprintCodec = t.type({
  sha256: t.string,
  agent: t.type({ name: t.string, instructions: t.string, model: t.string, output: t.union([t.string, t.null]) }),
  tools: t.record(t.string, t.type({ description: t.string, parameters: t.UnknownRecord, idempotent: t.boolean })),
});

/** Reads a cassette's JSON data (the file parsed); `parseCassette` reports its failures by path. */
export const CassetteCodec: t.Decoder<unknown, Cassette> = t.type({
  version: t.literal(CASSETTE_VERSION),
  // Checked as a record of unknown JSON schemas; parseCassette then checks the parts against their hash.
  fingerprint: FingerprintCodec as unknown as t.Type<Fingerprint>,
  redact: t.array(t.string),
  run: t.intersection([
    t.type({ agent: t.string, tenant: t.string, input: t.string, state: t.UnknownRecord }),
    t.partial({ maxTurns: t.number, history: t.array(MessageCodec) }),
  ]),
  turns: t.array(t.type({ turn: t.number, request: t.type({ messages: t.array(MessageCodec), tools: t.array(t.string) }), reply: ReplyCodec, calls: t.array(CallCodec) })),
  ending: EndingCodec,
});
