// A run served as a Vercel AI SDK UI message stream, the body its `useChat` hook reads: over
// `node:http` (uiMessageStreamHandler) or as a fetch `Response` for route handlers
// (uiMessageStreamResponse). A client going away cancels the run, classified, as for sseHandler.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { map, tap, type Observable } from 'rxjs';
import { jsonText } from '../json.js';
import type { RunEvent } from '../runner/index.js';
import { reportUnhandled } from '../unhandled.js';
import { eventStreamFrame } from './eventStream.js';
import { followForClient, type StreamEnding } from './followForClient.js';
import { refusalOf, serveEventStream, type SseHandlerOptions, type StreamStarter } from './sseHandler.js';
import { keepSnapshots, type SnapshotStore } from './uiApprovals.js';
import { toUIMessageStream, UI_MESSAGE_STREAM_DONE, UI_MESSAGE_STREAM_HEADERS, type UIMessageStreamOptions } from './toUIMessageStream.js';

export type UIMessageStreamHandlerOptions = Omit<SseHandlerOptions<RunEvent>, 'eventName'> &
  UIMessageStreamOptions & {
    /**
     * Where the snapshot of a run that ends waiting for a person is kept, server-side, until a
     * request answers it (`resumeApproved`): the client is sent approval requests, never the snapshot.
     */
    readonly snapshots?: SnapshotStore;
  };

const encoderOptions = (options: UIMessageStreamOptions): UIMessageStreamOptions => ({
  ...(options.dynamicTools !== undefined ? { dynamicTools: options.dynamicTools } : {}),
  ...(options.messageId !== undefined ? { messageId: options.messageId } : {}),
  ...(options.activity !== undefined ? { activity: options.activity } : {}),
});

/**
 * A `node:http` handler that streams a run as a UI message stream (`data: <chunk JSON>` frames,
 * then `data: [DONE]`), with the protocol's headers. `onEnd` sees the run's own events.
 *
 * A request `start` cannot serve is answered as `sseHandler` answers it: a ConfigError (a body
 * without `messages`, a chat that does not end with the user's message: `fromUIMessages` and
 * `run$` throw one naming the field) is a 400 whose text is the error's message; an
 * ApprovalRefusedError a 403; anything else a 500, reported to `onError` (default: as RxJS
 * reports an error nobody can receive), `onEnd` or not.
 *
 * ## Example
 * ```ts
 * // POST /api/chat from useChat (DefaultChatTransport): { id, messages: [...], trigger }, the whole chat
 * import { fromUIMessages } from 'agent-lanes/ai-sdk';
 * const chat = uiMessageStreamHandler(async (req, signal) => {
 *   const { messages } = JSON.parse(await text(req));             // text from node:stream/consumers
 *   return runner.run$(agent, fromUIMessages(messages), { signal }); // the model sees every earlier turn
 * });
 * createServer(chat).listen(3001, '127.0.0.1');
 * ```
 */
export function uiMessageStreamHandler(
  start: StreamStarter<RunEvent>,
  options: UIMessageStreamHandlerOptions = {},
): (request: IncomingMessage, response: ServerResponse) => void {
  const encoder = encoderOptions(options);
  const { snapshots } = options;
  return serveEventStream(start, options, {
    frames: (run$) => toUIMessageStream(snapshots === undefined ? run$ : run$.pipe(keepSnapshots(snapshots)), encoder).pipe(map((chunk) => ({ data: jsonText(chunk) }))),
    headers: UI_MESSAGE_STREAM_HEADERS,
    trailer: UI_MESSAGE_STREAM_DONE,
  });
}

export interface UIMessageStreamResponseOptions extends UIMessageStreamOptions {
  /** How long the run may take to end (classified) after the reader cancelled, before it is unsubscribed. Default 5000 ms. */
  readonly graceMs?: number;
  /** Called once when the run has ended, with its events and whether the reader cancelled first. */
  readonly onEnd?: (ending: StreamEnding<RunEvent>) => void;
  /** Extra response headers. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Where the snapshot of a run that ends waiting for a person is kept until a request answers it (`resumeApproved`). */
  readonly snapshots?: SnapshotStore;
  /**
   * Where the server's own failures go: `start` threw anything but a client's mistake (a
   * ConfigError: 400; an ApprovalRefusedError: 403), or the run's Observable errored. Default:
   * reported as RxJS reports an error nobody can receive (`config.onUnhandledError`, else thrown
   * outside the request).
   */
  readonly onError?: (error: unknown) => void;
}

/**
 * A fetch `Response` whose body is the run as a UI message stream, for route handlers that
 * return one (Next.js, Hono, a Worker). Cancelling the body (the client went away) aborts the
 * signal handed to `start`, so the run ends classified; `onEnd` sees that ending. `start` is
 * called at once: one that throws a ConfigError (a bad chat) gives a 400 whose text is the
 * error's message, an ApprovalRefusedError a 403, anything else a 500 reported to `onError`.
 *
 * ## Example
 * ```ts
 * export async function POST(req: Request) {
 *   const { messages } = await req.json();
 *   return uiMessageStreamResponse((signal) => runner.run$(agent, fromUIMessages(messages), { signal }));
 * }
 * ```
 */
export function uiMessageStreamResponse(start: (signal: AbortSignal) => Observable<RunEvent>, options: UIMessageStreamResponseOptions = {}): Response {
  const { graceMs = 5000, onEnd, headers, snapshots, onError } = options;
  // The server's own failure, told once; a watcher that throws is reported as any other.
  const failed = (error: unknown): void => {
    if (onError === undefined) return reportUnhandled(error);
    try {
      onError(error);
    } catch (thrown) {
      reportUnhandled(thrown);
    }
  };
  const controller = new AbortController();
  // Started before the body, so a request it cannot serve is answered with a status that says whose fault it was.
  let started$: Observable<RunEvent>;
  try {
    started$ = start(controller.signal);
  } catch (error) {
    const refused = refusalOf(error);
    if (refused === undefined) failed(error);
    onEnd?.({ values: [], clientLeft: false, ended: 'error', error });
    return new Response(refused?.text ?? 'the stream could not be started\n', { status: refused?.status ?? 500, headers: { 'content-type': 'text/plain; charset=utf-8' } });
  }
  const encoder = new TextEncoder();
  // The run's own events, for onEnd; the body carries their chunks.
  const events: RunEvent[] = [];
  let leave: (() => void) | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(stream) {
      const told$ = started$.pipe(tap({ error: failed }));
      const run$ = snapshots === undefined ? told$ : told$.pipe(keepSnapshots(snapshots));
      // Each chunk's text is made in the stream, so a value without a JSON form ends the stream
      // with an error rather than throwing where nobody can catch it.
      const frames$ = toUIMessageStream(
        run$.pipe(
          map((event) => {
            events.push(event);
            return event;
          }),
        ),
        encoderOptions(options),
      ).pipe(map((chunk) => eventStreamFrame({ data: jsonText(chunk) })));
      let open = true;
      const follow = followForClient(frames$, controller, {
        write: (frame) => open && stream.enqueue(encoder.encode(frame)),
        end: (ending) => {
          if (open && !ending.clientLeft) {
            stream.enqueue(encoder.encode(UI_MESSAGE_STREAM_DONE));
            stream.close();
          }
          open = false;
          onEnd?.({ ...ending, values: events });
        },
      }, graceMs);
      leave = () => {
        open = false;
        follow.leave();
      };
    },
    cancel() {
      leave?.();
    },
  });
  return new Response(body, { status: 200, headers: { ...UI_MESSAGE_STREAM_HEADERS, ...headers } });
}
