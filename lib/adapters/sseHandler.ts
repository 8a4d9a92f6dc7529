// Streams an Observable (a run's transcript, runner.activity$) to a `node:http` client as
// server-sent events. When the client goes away the stream's signal aborts, so a run is
// cancelled and classified, and the response, timers and subscription are all let go.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { asyncScheduler, map, Observable, type Subscription } from 'rxjs';
import { ApprovalRefusedError, ConfigError, toErrorInfo } from '../errors.js';
import { jsonText } from '../json.js';
import { scheduleAfter } from '../time.js';
import { reportUnhandled } from '../unhandled.js';
import { EVENT_STREAM_HEADERS, EVENT_STREAM_HEARTBEAT, eventStreamFrame, type EventStreamFrame } from './eventStream.js';
import { followForClient, type ClientFollow, type StreamEnding } from './followForClient.js';

/** Starts the stream for one request. Pass `signal` on (`runner.run$(agent, input, { signal })`) so leaving cancels it. */
export type StreamStarter<T> = (request: IncomingMessage, signal: AbortSignal) => Observable<T> | Promise<Observable<T>>;

export interface SseHandlerOptions<T> {
  /** The `event:` name of a value. Default: its `type` field when that is a string (RUN_STARTED, TOOL_RESULT, ...). */
  readonly eventName?: (value: T) => string | undefined;
  /** How long a stream may take to end (classified) after the client left, before it is unsubscribed. Default 5000 ms. */
  readonly graceMs?: number;
  /** A comment line is sent this often so proxies keep a quiet connection open. Default 15000 ms; 0 sends none. */
  readonly heartbeatMs?: number;
  /** Called once per request when its stream has ended: every value, whether the client left first, and how it ended. */
  readonly onEnd?: (ending: StreamEnding<T>, request: IncomingMessage) => void;
  /**
   * Where the server's own failures go, whether `onEnd` is given or not: `start` threw or
   * rejected with anything but a client's mistake (a ConfigError: 400; an ApprovalRefusedError:
   * 403), or the stream errored. Default: reported as RxJS reports an error nobody can receive
   * (`config.onUnhandledError`, else thrown outside the request), so an operator sees it.
   */
  readonly onError?: (error: unknown, request: IncomingMessage) => void;
}

/** How a request whose stream could not be started is answered when it was the client's mistake; undefined for the server's own failure. */
export function refusalOf(error: unknown): { readonly status: number; readonly text: string } | undefined {
  // A bad body or conversation (fromUIMessages, run$) names its field; answers the run does not wait for say why.
  if (error instanceof ConfigError) return { status: 400, text: `${error.name}: ${error.message}\n` };
  if (error instanceof ApprovalRefusedError) return { status: 403, text: `${error.name}: ${error.message}\n` };
  return undefined;
}

/** How the engine writes: frames for the values, extra headers, and what closes the body. */
export interface EventStreamEncoding<T> {
  readonly frames: (source$: Observable<T>) => Observable<EventStreamFrame>;
  readonly headers?: Readonly<Record<string, string>>;
  /** Written after the last frame when the stream ended by itself (the UI message stream's `data: [DONE]`). */
  readonly trailer?: string;
}

const typeOf = (value: unknown): string | undefined => {
  const type = value !== null && typeof value === 'object' ? (value as { type?: unknown }).type : undefined;
  return typeof type === 'string' ? type : undefined;
};

function checkMs(value: number, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) throw new TypeError(`${field} must be a finite number of ms from 0 up, got ${String(value)}`);
  return value;
}

/**
 * A `node:http` request handler that streams what `start` returns as server-sent events, one
 * event per value: `event: <its type>` and `data: <its JSON>`. The response ends when the stream
 * ends. When the client goes away first, the signal handed to `start` aborts: a run started
 * with it ends classified (stopped calls, then RUN_CANCELLED), `onEnd` sees that ending, and
 * nothing is left running (the subscription, the heartbeat and the grace timer are all let go).
 * If `start` throws or rejects, `onEnd` gets the error and the reply says whose it was: a
 * ConfigError (a bad body or conversation: `fromUIMessages`, `run$`) is the client's, a 400 with
 * its message, which names the field; an ApprovalRefusedError a 403 with its message; anything
 * else the server's, a 500 saying only that the stream could not be started, and reported to
 * `onError` (default: as RxJS reports an error nobody can receive). A stream that errors is reported
 * there too.
 *
 * ## Example
 * ```ts
 * const handler = sseHandler((req, signal) => runner.run$(agent, 'Four hotels in Lisbon', { signal }), {
 *   onEnd: ({ values, clientLeft }) => log(clientLeft ? 'client left' : 'done', values.at(-1)?.type),
 * });
 * createServer(handler).listen(8080, '127.0.0.1');
 * // event: RUN_STARTED / data: {"type":"RUN_STARTED",...} ... event: RUN_COMPLETED
 * ```
 */
export function sseHandler<T>(start: StreamStarter<T>, options: SseHandlerOptions<T> = {}): (request: IncomingMessage, response: ServerResponse) => void {
  const eventName = options.eventName ?? typeOf;
  return serveEventStream(start, options, {
    frames: (source$) =>
      source$.pipe(
        map((value): EventStreamFrame => {
          const event = eventName(value);
          // The one JSON form (lib/json.ts): a run's results are already in it, and anything
          // else JSON would refuse (a BigInt, a Map) goes as a run's results do.
          return { data: jsonText(value), ...(event === undefined ? {} : { event }) };
        }),
      ),
  });
}

/** The engine behind `sseHandler` and `uiMessageStreamHandler`: one request, one stream, one ending. */
export function serveEventStream<T>(
  start: StreamStarter<T>,
  options: SseHandlerOptions<T>,
  encoding: EventStreamEncoding<T>,
): (request: IncomingMessage, response: ServerResponse) => void {
  const graceMs = checkMs(options.graceMs ?? 5000, 'graceMs');
  const heartbeatMs = checkMs(options.heartbeatMs ?? 15_000, 'heartbeatMs');
  const { onError } = options;
  if (onError !== undefined && typeof onError !== 'function') throw new TypeError(`onError must be a function, got ${typeof onError}`);
  // The server's own failure, told once to whoever watches for it; a watcher that throws is reported as any other.
  const failed = (error: unknown, request: IncomingMessage): void => {
    if (onError === undefined) return reportUnhandled(error);
    try {
      onError(error, request);
    } catch (thrown) {
      reportUnhandled(thrown);
    }
  };
  return (request, response) => {
    const controller = new AbortController();
    // True once the client closed the connection before the response ended.
    let gone = false;
    const onClose = (): void => {
      if (!response.writableFinished) gone = true;
      controller.abort(new Error('the client went away'));
    };
    response.on('close', onClose);
    void (async () => {
      let source$: Observable<T>;
      try {
        source$ = await start(request, controller.signal);
      } catch (error) {
        response.off('close', onClose);
        const refused = refusalOf(error);
        if (!response.headersSent && !gone) {
          // A client's mistake is told what it was; the server's own failure says nothing of its insides.
          response.writeHead(refused?.status ?? 500, { 'content-type': 'text/plain; charset=utf-8' });
          response.end(refused?.text ?? 'the stream could not be started\n');
        }
        if (refused === undefined) failed(error, request);
        options.onEnd?.({ values: [], clientLeft: gone, ended: 'error', error }, request);
        return;
      }
      const values: T[] = [];
      // Frames go out only while the client is there; the values are kept for the ending either way.
      const frames$ = encoding.frames(
        new Observable<T>((subscriber) =>
          source$.subscribe({
            next: (value) => {
              values.push(value);
              subscriber.next(value);
            },
            error: (error: unknown) => {
              // Told here, before any encoding turns it into a frame the client reads (the UI message stream's `error` chunk).
              failed(error, request);
              subscriber.error(error);
            },
            complete: () => subscriber.complete(),
          }),
        ),
      );
      const writable = (): boolean => !gone && !response.destroyed && !response.writableEnded;
      if (writable()) {
        response.writeHead(200, { ...EVENT_STREAM_HEADERS, ...encoding.headers });
        response.flushHeaders();
      }
      // Re-armed after each beat rather than a setInterval, which Node would run every 1 ms for a
      // heartbeatMs above 2^31-1; it stops for good once the response can no longer be written.
      let heartbeat: Subscription | undefined;
      const beat = (): void => {
        if (!writable()) return;
        response.write(EVENT_STREAM_HEARTBEAT);
        heartbeat = scheduleAfter(asyncScheduler, beat, heartbeatMs);
      };
      if (heartbeatMs > 0) heartbeat = scheduleAfter(asyncScheduler, beat, heartbeatMs);
      // Set once following began; the source may end synchronously, before `leave` is ever needed.
      let follow: ClientFollow | undefined;
      const leave = (): void => {
        if (!response.writableFinished) follow?.leave();
      };
      response.on('close', leave);
      follow = followForClient(frames$, controller, {
        write: (frame) => {
          if (writable()) response.write(eventStreamFrame(frame));
        },
        end: (ending) => {
          heartbeat?.unsubscribe();
          response.off('close', leave);
          if (writable()) {
            if (ending.ended === 'error') response.write(eventStreamFrame({ event: 'error', data: JSON.stringify(toErrorInfo(ending.error)) }));
            else if (encoding.trailer !== undefined) response.write(encoding.trailer);
            response.end();
          }
          options.onEnd?.({ ...ending, values }, request);
        },
      }, graceMs);
      // The client may have left while the stream was being started.
      if (gone) follow.leave();
      response.off('close', onClose);
    })();
  };
}
