// The server-sent events wire format: the response headers and one frame per value
// (`event:`, `id:`, one `data:` line per line of the payload, a blank line). Used by the
// SSE handler, the UI message stream and the live view; no parsing here.

/** Headers of an event stream response; `x-accel-buffering: no` keeps nginx from holding frames back. */
export const EVENT_STREAM_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** One server-sent event: its data, and optionally an event name and an id. */
export interface EventStreamFrame {
  readonly data: string;
  readonly event?: string;
  readonly id?: string;
}

/**
 * One frame as text. A payload with newlines becomes several `data:` lines, which a reader
 * joins back with `\n`; a name or id with a newline would end the frame early, so it is refused.
 *
 * ## Example
 * ```ts
 * eventStreamFrame({ event: 'TOOL_RESULT', data: JSON.stringify(event) });
 * // 'event: TOOL_RESULT\ndata: {"type":"TOOL_RESULT",...}\n\n'
 * ```
 */
export function eventStreamFrame(frame: EventStreamFrame): string {
  const { data, event, id } = frame;
  for (const [field, value] of [['event', event], ['id', id]] as const) {
    if (value !== undefined && /[\r\n]/.test(value)) throw new TypeError(`an event stream ${field} cannot contain a line break, got ${JSON.stringify(value)}`);
  }
  const lines = data.split(/\r\n|\r|\n/).map((line) => `data: ${line}\n`);
  return `${event === undefined ? '' : `event: ${event}\n`}${id === undefined ? '' : `id: ${id}\n`}${lines.join('')}\n`;
}

/** A comment line: ignored by readers, it keeps proxies from closing a quiet connection. */
export const EVENT_STREAM_HEARTBEAT = ': keep-alive\n\n';
