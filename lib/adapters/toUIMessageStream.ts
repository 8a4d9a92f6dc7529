// A run's transcript as the Vercel AI SDK's UI message stream: the chunks its `useChat` hook
// reads (start, steps, text, tool input and output, finish). A front end built for that SDK
// renders an agent-lanes run, its tool calls in call order, with no code of ours on the client.
// Given the runner's activity$, the model's text goes out delta by delta as it is written.
import { catchError, concatMap, defer, from, Observable } from 'rxjs';
import { notApproved, toErrorInfo } from '../errors.js';
import type { RunEvent, RunnerActivity, ToolCall } from '../runner/index.js';
import { approvalIdOf } from './uiApprovals.js';

/**
 * The UI message stream chunks this encoder writes: a subset of the AI SDK's `UIMessageChunk`
 * (v5 and v6), declared here so the library does not depend on the `ai` package.
 */
export type UIMessageChunk =
  | { readonly type: 'start'; readonly messageId?: string }
  | { readonly type: 'start-step' }
  | { readonly type: 'finish-step' }
  | { readonly type: 'text-start'; readonly id: string }
  | { readonly type: 'text-delta'; readonly id: string; readonly delta: string }
  | { readonly type: 'text-end'; readonly id: string }
  | { readonly type: 'tool-input-available'; readonly toolCallId: string; readonly toolName: string; readonly input: unknown; readonly dynamic?: true }
  | { readonly type: 'tool-output-available'; readonly toolCallId: string; readonly output: unknown; readonly dynamic?: true }
  | { readonly type: 'tool-approval-request'; readonly approvalId: string; readonly toolCallId: string }
  | { readonly type: 'tool-output-error'; readonly toolCallId: string; readonly errorText: string; readonly dynamic?: true }
  | { readonly type: 'tool-output-denied'; readonly toolCallId: string }
  | { readonly type: `data-${string}`; readonly id?: string; readonly data: unknown }
  | { readonly type: 'error'; readonly errorText: string }
  | { readonly type: 'abort'; readonly reason?: string }
  | { readonly type: 'finish'; readonly finishReason?: 'stop' | 'error' | 'other' };

/** Response headers of a UI message stream; `x-vercel-ai-ui-message-stream: v1` names the protocol. */
export const UI_MESSAGE_STREAM_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
};

/** The last frame of a UI message stream body. */
export const UI_MESSAGE_STREAM_DONE = 'data: [DONE]\n\n';

export interface UIMessageStreamOptions {
  /**
   * true: tool parts are `dynamic-tool` parts (for a front end that does not declare the tools);
   * false: `tool-<name>` parts, as for tools the front end declares. Default false.
   */
  readonly dynamicTools?: boolean;
  /** The assistant message's id. Default: the run's id from RUN_STARTED. */
  readonly messageId?: string;
  /**
   * The runner's `activity$`: the run's text deltas (streamed model turns) are sent as
   * `text-delta` chunks as the model writes them, so `useChat` shows the tokens as they come.
   * Without it, each turn's text is sent whole with its MODEL_RESPONSE.
   */
  readonly activity?: Observable<RunnerActivity>;
}

// What the encoder reads: the run's events, its text deltas and the calls a streamed turn wrote,
// from activity$.
type Source =
  | { readonly event: RunEvent }
  | { readonly turn: number; readonly delta: string }
  | { readonly turn: number; readonly index: number; readonly callId: string; readonly tool: string; readonly input: ToolCall['arguments'] };

// The run's events, with its own text deltas and written calls from `activity` merged in as they
// happen. The activity is watched from before the run starts, so nothing is missed; only this
// run's (known from RUN_STARTED) is taken, not other runs' on the runner, nor its nested runs'.
function sourceOf(run$: Observable<RunEvent>, activity: Observable<RunnerActivity> | undefined): Observable<Source> {
  return new Observable<Source>((subscriber) => {
    let runId: string | undefined;
    const live = activity?.subscribe((a) => {
      if (runId === undefined || !('runId' in a) || a.runId !== runId) return;
      if (a.type === 'text-delta') subscriber.next({ turn: a.turn, delta: a.delta });
      else if (a.type === 'tool-call') subscriber.next({ turn: a.turn, index: a.index, callId: a.callId, tool: a.tool, input: a.input });
    });
    subscriber.add(live);
    subscriber.add(
      run$.subscribe({
        next: (event) => {
          if (event.type === 'RUN_STARTED') runId = event.runId;
          subscriber.next({ event });
        },
        error: (error: unknown) => subscriber.error(error),
        complete: () => subscriber.complete(),
      }),
    );
  });
}

/**
 * Encodes a run's transcript as UI message stream chunks, one assistant message per run.
 *
 * Each model turn is a step (`start-step` ... `finish-step`): its text (delta by delta as the
 * model writes it when `activity` is given and the turn streams, else whole), and one
 * `tool-input-available` per call in call order (when `activity` is given and the turn streams,
 * each as soon as the model has written it, while earlier calls may be running already), then one `tool-output-available` (TOOL_RESULT),
 * `tool-output-denied` (TOOL_ERROR of a call not approved: the part's state becomes
 * `output-denied`) or `tool-output-error` (any other TOOL_ERROR as `Name: message`;
 * TOOL_INDETERMINATE as its message, which says the side effect may have landed) per call, in call order. RUN_COMPLETED is `finish`
 * (a structured output that is not the final text comes first as a `data-output` part);
 * RUN_FAILED is `error` then `finish` with `finishReason: 'error'`; RUN_CANCELLED is `abort`;
 * RUN_INTERRUPTED is one `tool-approval-request` per waiting call (its approval id names the
 * run's snapshot and the call: see uiApprovals.ts), then `finish`.
 *
 * ## Example
 * ```ts
 * toUIMessageStream(runner.run$(agent, 'Lisbon and Porto?')).subscribe(console.log);
 * // { type: 'start', messageId: '…' } { type: 'start-step' }
 * // { type: 'tool-input-available', toolCallId: 'c1', toolName: 'lookup', input: { city: 'Lisbon' } } ...
 * // { type: 'tool-output-available', toolCallId: 'c1', output: { from: 122 } } ... { type: 'finish', finishReason: 'stop' }
 * ```
 */
export function toUIMessageStream(run$: Observable<RunEvent>, options: UIMessageStreamOptions = {}): Observable<UIMessageChunk> {
  const dynamic = options.dynamicTools === true ? { dynamic: true as const } : {};
  return defer(() => {
    // Whether a step is open (a MODEL_RESPONSE seen, its finish-step not yet sent).
    let stepOpen = false;
    // The last text the model sent, to tell a structured output from the final text.
    let lastText: string | undefined;
    // Call ids already used in this message, and what each call of the current turn is called
    // here, by position: the outcomes of a turn come in call order, so the n-th outcome is the
    // n-th call's, even when the model gave two calls one id.
    const used = new Set<string>();
    let turnIds: string[] = [];
    // The id each call of the current turn is shown under, by its own (the first of a reused one).
    const uiIds = new Map<string, string>();
    let nextOutcome = 0;
    const idOf = (callId: string): string => turnIds[nextOutcome++] ?? callId;
    // The turn whose step opened as it streamed (its text delta by delta, its calls as written),
    // whether its text part is still open, and the calls of it already sent: the id each is shown
    // under and its own, by its place in the turn.
    let liveTurn: number | undefined;
    let textOpen = false;
    let early: Array<{ readonly callId: string; readonly id: string } | undefined> = [];

    const closeText = (): UIMessageChunk[] => {
      if (!textOpen) return [];
      textOpen = false;
      return [{ type: 'text-end', id: `text-${liveTurn}` }];
    };

    const closeStep = (): UIMessageChunk[] => {
      if (!stepOpen) return closeText();
      stepOpen = false;
      return [...closeText(), { type: 'finish-step' }];
    };

    // The step of a turn that streams, opened by the first of its text or calls to come.
    const stepOf = (turn: number): UIMessageChunk[] => {
      if (liveTurn === turn) return [];
      const chunks: UIMessageChunk[] = [...closeStep(), { type: 'start-step' }];
      stepOpen = true;
      liveTurn = turn;
      early = [];
      return chunks;
    };

    // A call's id in this message: one the model used already (in a later turn, or twice in one) is made unique.
    const uniqueId = (callId: string, turn: number): string => {
      let id = used.has(callId) ? `${callId}@${turn}` : callId;
      for (let n = 2; used.has(id); n++) id = `${callId}@${turn}.${n}`;
      used.add(id);
      return id;
    };

    // A delta of the model's text: the turn's step and text part open on its first.
    const deltaChunks = (turn: number, delta: string): UIMessageChunk[] => {
      const id = `text-${turn}`;
      const chunks = stepOf(turn);
      if (!textOpen) {
        chunks.push({ type: 'text-start', id });
        textOpen = true;
      }
      chunks.push({ type: 'text-delta', id, delta });
      return chunks;
    };

    // A call the model has written whole in a turn that streams: its tool part goes out now, so a
    // page shows it while it runs (and a person who presses stop sees what had started).
    const callChunks = (turn: number, index: number, callId: string, tool: string, input: ToolCall['arguments']): UIMessageChunk[] => {
      const chunks = stepOf(turn);
      if (early[index] !== undefined) return chunks;
      const id = uniqueId(callId, turn);
      early[index] = { callId, id };
      chunks.push({ type: 'tool-input-available', toolCallId: id, toolName: tool, input: inputOf(input), ...dynamic });
      return chunks;
    };

    const chunksOf = (event: RunEvent): UIMessageChunk[] => {
      switch (event.type) {
        case 'RUN_STARTED':
          return [{ type: 'start', messageId: options.messageId ?? event.runId }];
        case 'MODEL_RESPONSE': {
          lastText = event.text;
          // A turn whose text went out delta by delta has its step open already: its text part ends here.
          const streamed = liveTurn === event.turn;
          const chunks: UIMessageChunk[] = streamed ? closeText() : [...closeStep(), { type: 'start-step' }];
          stepOpen = true;
          if (!streamed && event.text !== undefined && event.text !== '') {
            const id = `text-${event.turn}`;
            chunks.push({ type: 'text-start', id }, { type: 'text-delta', id, delta: event.text }, { type: 'text-end', id });
          }
          turnIds = [];
          uiIds.clear();
          nextOutcome = 0;
          event.toolCalls.forEach((call, index) => {
            // Sent already as the turn streamed: its part is there, under the id it was given.
            const sent = streamed ? early[index] : undefined;
            // A front end keys tool parts by id: a reused id (in a later turn, or twice in one) is made unique.
            const id = sent !== undefined && sent.callId === call.id ? sent.id : uniqueId(call.id, event.turn);
            turnIds.push(id);
            if (!uiIds.has(call.id)) uiIds.set(call.id, id);
            if (id !== sent?.id) chunks.push({ type: 'tool-input-available', toolCallId: id, toolName: call.name, input: inputOf(call.arguments), ...dynamic });
          });
          early = [];
          return chunks;
        }
        case 'TOOL_RESULT':
          return [{ type: 'tool-output-available', toolCallId: idOf(event.callId), output: event.result, ...dynamic }];
        case 'TOOL_ERROR':
          // A call not approved is the SDK's own denied state (the part keeps the person's answer and reason); any other failure its error text.
          if (notApproved(event.error)) return [{ type: 'tool-output-denied', toolCallId: idOf(event.callId) }];
          return [{ type: 'tool-output-error', toolCallId: idOf(event.callId), errorText: `${event.error.name}: ${event.error.message}`, ...dynamic }];
        case 'TOOL_INDETERMINATE':
          return [{ type: 'tool-output-error', toolCallId: idOf(event.callId), errorText: event.message, ...dynamic }];
        case 'RUN_COMPLETED': {
          const structured = event.output !== undefined && event.output !== lastText && !(event.output === '' && lastText === undefined);
          return [...closeStep(), ...(structured ? [{ type: 'data-output' as const, data: event.output }] : []), { type: 'finish', finishReason: 'stop' }];
        }
        case 'RUN_FAILED':
          return [...closeStep(), { type: 'error', errorText: `${event.error.name}: ${event.error.message}` }, { type: 'finish', finishReason: 'error' }];
        case 'RUN_CANCELLED':
          return [...closeStep(), { type: 'abort', reason: event.reason }];
        case 'RUN_INTERRUPTED': {
          // Each waiting call asks for approval on its tool part (a nested run's call, on its caller's).
          const asks: UIMessageChunk[] = event.pending.map((pending) => {
            const callId = pending.callId.split('/')[0]!;
            return { type: 'tool-approval-request', approvalId: approvalIdOf(event.snapshot, pending.callId), toolCallId: uiIds.get(callId) ?? callId };
          });
          return [...asks, ...closeStep(), { type: 'finish' }];
        }
      }
    };

    return sourceOf(run$, options.activity).pipe(
      concatMap((source) => from('event' in source ? chunksOf(source.event) : 'delta' in source ? deltaChunks(source.turn, source.delta) : callChunks(source.turn, source.index, source.callId, source.tool, source.input))),
      // A transcript ends in RUN_COMPLETED, RUN_FAILED or RUN_CANCELLED; anything thrown is shown as an error, not a broken stream.
      catchError((error: unknown) =>
        from<UIMessageChunk[]>([...closeStep(), { type: 'error', errorText: toErrorInfo(error).message }, { type: 'finish', finishReason: 'error' }]),
      ),
    );
  });
}

// The SDK shows a tool's input as a value: JSON text is parsed; text that is not JSON is shown as it came.
function inputOf(args: string | Readonly<Record<string, unknown>>): unknown {
  if (typeof args !== 'string') return args;
  if (args.trim() === '') return {};
  try {
    return JSON.parse(args) as unknown;
  } catch {
    return args;
  }
}
