// The stop classes, and the words that say them. A call that did not end by itself (its batch
// stopped, or its request or its fleet lease was cut off while it ran) ends in one of three
// classes, read from its outcome by `stopClassOf`; every message that tells a caller whether a
// call went out, or whether calling it again is safe, is built here. It imports nothing, so
// errors.ts may build its messages with it.

/**
 * What a stopped call did, as far as anyone can know: `never_dispatched` (its body never
 * started: nothing happened), `safe_to_call_again` (it was in flight, and its tool is declared
 * idempotent) or `indeterminate` (it was in flight, not idempotent: its side effect may have
 * landed). The same words are a call span's `agent_lanes.stop.class`.
 */
export type StopClass = 'never_dispatched' | 'safe_to_call_again' | 'indeterminate';

/** The stop classes, by name. */
export const StopClasses = {
  NEVER_DISPATCHED: 'never_dispatched',
  SAFE_TO_CALL_AGAIN: 'safe_to_call_again',
  INDETERMINATE: 'indeterminate',
} as const satisfies Record<string, StopClass>;

/** The class a stop gives a call: never dispatched if its body had not started, else by whether its tool is idempotent. */
export function stopClass(dispatched: boolean, idempotent: boolean): StopClass {
  if (!dispatched) return 'never_dispatched';
  return idempotent ? 'safe_to_call_again' : 'indeterminate';
}

/** What `stopClassOf` reads of an outcome (an `Outcome` of the batch is one). */
export type ClassifiedOutcome =
  | { readonly kind: 'result' }
  | { readonly kind: 'indeterminate' }
  | { readonly kind: 'error'; readonly dispatched: boolean; readonly error: { readonly name: string; readonly message?: string }; readonly stopped?: unknown };

/** What `stopClassOf` reads of a run's event: a call's outcome event (a `ToolOutcomeEvent` is one), which carries its class. */
export type ClassifiedEvent =
  | { readonly type: 'TOOL_RESULT' }
  | { readonly type: 'TOOL_ERROR' | 'TOOL_INDETERMINATE'; readonly stopClass?: StopClass };

// The errors that cut a call off alone (CallInterruptedError, LaneLostError, ProcessStoppedError), by the name their
// class gives them: the outcome of such a call keeps it.
const cutOff: ReadonlySet<string> = new Set(['CallInterruptedError', 'LaneLostError', 'ProcessStoppedError']);

// The errors that end a call in flight on its own ceiling (ToolTimedOutError) or its lost MCP
// connection (McpConnectionLostError): their message ends with `afterStop(idempotent)`, built
// here, which is the one record of the tool's idempotency that every form of an outcome keeps
// (a journal's, a snapshot's, a cassette's, one written before events carried their class too).
const cutOffInFlight: ReadonlySet<string> = new Set(['ToolTimedOutError', 'McpConnectionLostError']);

/**
 * The stop class of an outcome, or of the event a run told it with, or undefined for a call that
 * ended by itself (a result, a failure of its own). An indeterminate outcome is always a stopped
 * call; an error is one when its batch stopped it (`stopped` is set) or when it was cut off alone
 * (its request got no answer, its fleet lease was lost, the process running it stopped), and is
 * then never dispatched or safe to call again by whether its body had started; a call that
 * outran its own `perToolSeconds` ceiling, or whose MCP connection was lost in flight, is safe to
 * call again or indeterminate as its tool is idempotent or not (its error says which). A
 * `TOOL_ERROR` or `TOOL_INDETERMINATE` event carries the class
 * of its outcome as its `stopClass` field, which is read as it is (a TOOL_INDETERMINATE is
 * `indeterminate` even without one): nothing is read from a message.
 *
 * ## Example
 * ```ts
 * const stopped = result.events.filter((event) => event.type !== 'TOOL_RESULT' && stopClassOf(event) === 'safe_to_call_again');
 * ```
 */
export function stopClassOf(ended: ClassifiedOutcome | ClassifiedEvent): StopClass | undefined {
  if ('type' in ended) return eventClass(ended);
  const outcome = ended;
  switch (outcome.kind) {
    case 'result':
      return undefined;
    case 'indeterminate':
      return 'indeterminate';
    case 'error': {
      const { name, message } = outcome.error;
      if (outcome.stopped !== undefined || cutOff.has(name)) return outcome.dispatched ? 'safe_to_call_again' : 'never_dispatched';
      // Without the sentence that says it is safe, a call cut off in flight may have landed.
      if (outcome.dispatched && cutOffInFlight.has(name)) return message?.endsWith(`. ${afterStop(true)}`) === true ? 'safe_to_call_again' : 'indeterminate';
      return undefined;
    }
  }
}

// The class an outcome event carries; an event of another type (read at runtime) has none.
function eventClass(event: ClassifiedEvent): StopClass | undefined {
  switch (event.type) {
    case 'TOOL_ERROR':
      return event.stopClass;
    case 'TOOL_INDETERMINATE':
      return event.stopClass ?? 'indeterminate';
    default:
      return undefined;
  }
}

/** The sentence that ends the message of a call in flight when it was stopped, by whether its tool is idempotent. */
export function afterStop(idempotent: boolean): string {
  return idempotent ? 'Safe to call again' : 'The side effect may have landed';
}

/** What happened to `tool` in flight: "<tool> was in flight when <clause>". */
export function inFlightWhen(tool: string, clause: string): string {
  return `${tool} was in flight when ${clause}`;
}

/** The clause for a call in flight when its batch stopped: "the batch stopped (<why>)". */
export function batchStopped(why: string): string {
  return `the batch stopped (${why})`;
}

/**
 * The message of a call stopped in flight: `what` happened ("search was in flight when the
 * batch stopped (...)", without its full stop), then whether calling it again is safe.
 */
export function inFlightMessage(what: string, idempotent: boolean): string {
  return `${what}. ${afterStop(idempotent)}`;
}

/** The clause for a call in flight when the process running it stopped (a crash, read back from a run journal). */
export function processStopped(): string {
  return 'the process running it stopped';
}

/** The reason a call did not start because its write-ahead record failed: "the journal could not record it (<detail>)". */
export function journalCouldNotRecord(detail: string): string {
  return `the journal could not record it (${detail})`;
}

/** The message of a call that was stopped before its body started: "never dispatched: <why>". */
export function neverDispatchedMessage(why: string): string {
  return `never dispatched: ${why}`;
}

/**
 * The clause of an indeterminate message of `tool` (what `inFlightMessage(inFlightWhen(tool,
 * clause), false)` built): the clause alone. A message built otherwise loses only what matches.
 */
export function inFlightClause(tool: string, message: string): string {
  const head = inFlightWhen(tool, '');
  const tail = `. ${afterStop(false)}`;
  const from = message.startsWith(head) ? head.length : 0;
  const to = message.endsWith(tail) ? message.length - tail.length : message.length;
  return message.slice(from, to);
}

/** True when a message of `tool` says its batch stopped it in flight (rather than its own request or lease cut it off). */
export function stoppedByItsBatch(tool: string, message: string): boolean {
  return message.startsWith(inFlightWhen(tool, batchStopped('')).slice(0, -1));
}

/**
 * What a stop of `stopClass` means to whoever would ask for the call again (a model reading its
 * tool's error): whether it ran, and whether asking again is safe.
 */
export function stopAdvice(stopClass: StopClass): string {
  switch (stopClass) {
    case 'never_dispatched':
      return 'The call was stopped before it started: nothing happened, and asking for it again is safe.';
    case 'safe_to_call_again':
      return 'The call was stopped while it ran; the tool is idempotent, so asking for it again is safe.';
    case 'indeterminate':
      return 'The call was stopped while it ran, and its side effect may have landed: check before asking for it again.';
  }
}
