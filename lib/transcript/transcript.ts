// The deterministic transcript: a run's events without what differs between two runs of
// the same script (the run id), and the transcript a cassette holds, rebuilt from it. A
// replay is right when the two are equal.
import { isLeft } from 'fp-ts/lib/Either.js';
import { decodeModelResponse, toOutcomeEvent, toResponseEvent, type ModelResponse, type OutcomeLike, type RunEvent, type RunStartedEvent } from '../runner/index.js';
import type { Cassette, RecordedCall } from './Cassette.js';
import { RUN_ID } from './scrub.js';
import { put } from '../own.js';

/** A run event as a deterministic transcript holds it: RUN_STARTED has no run id. */
export type TranscriptEvent = Exclude<RunEvent, RunStartedEvent> | Omit<RunStartedEvent, 'runId'>;

/** The response as the runner accepts it (`text` only when a string, `toolCalls`, `usage`, `finishReason` only when present), or undefined when it does not decode. */
export function acceptedResponse(raw: unknown): ModelResponse | undefined {
  const decoded = decodeModelResponse(raw);
  return isLeft(decoded) ? undefined : decoded.right.response;
}

function replaceIn(value: unknown, runId: string): unknown {
  if (typeof value === 'string') return value.split(runId).join(RUN_ID);
  if (Array.isArray(value)) return value.map((item) => replaceIn(item, runId));
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    put(out, key, replaceIn(item, runId));
  }
  return out;
}

/**
 * A run's events as a deterministic transcript: RUN_STARTED without its run id, and the run id
 * replaced by `<runId>` wherever else it appears (a result quoting `ctx.idempotencyKey`). For the
 * same script it is the same whatever order the calls finished in.
 *
 * ## Example
 * ```ts
 * const first = await runner.run(planner, 'go');
 * const second = await runner.run(planner, 'go');   // same script, other latencies
 * expect(deterministicTranscript(second.events)).to.deep.equal(deterministicTranscript(first.events));
 * ```
 */
export function deterministicTranscript(events: readonly RunEvent[]): TranscriptEvent[] {
  const started = events.find((event): event is RunStartedEvent => event.type === 'RUN_STARTED');
  const runId = started?.runId ?? '';
  return events.map((event): TranscriptEvent => {
    if (event.type === 'RUN_STARTED') {
      const { runId: _dropped, ...rest } = event;
      return rest;
    }
    return runId === '' ? event : (replaceIn(event, runId) as TranscriptEvent);
  });
}


// A recorded call as the outcome its event is made from. A result is in its JSON form, as the
// runner reports it: one recorded as nothing (undefined, in a cassette written before results
// had one form) is null. An error's `stopped` is a flag here, a stop reason in an outcome.
function outcomeOf(call: RecordedCall): OutcomeLike {
  if (call.kind === 'result') return call.result === undefined ? { ...call, result: null } : call;
  if (call.kind === 'error') return { callId: call.callId, tool: call.tool, kind: 'error', error: call.error, dispatched: call.dispatched, ...(call.stopped ? { stopped: true } : {}) };
  return call;
}

/**
 * The transcript a cassette holds: what `deterministicTranscript` gave for the recorded run
 * (with redacted values as the cassette holds them).
 *
 * ## Example
 * ```ts
 * const replayed = await replay.run(runner);
 * expect(deterministicTranscript(replayed.events)).to.deep.equal(cassetteTranscript(cassette));
 * ```
 */
export function cassetteTranscript(cassette: Cassette): TranscriptEvent[] {
  const { agent, tenant, input, history } = cassette.run;
  const events: TranscriptEvent[] = [history === undefined ? { type: 'RUN_STARTED', agent, tenant, input } : { type: 'RUN_STARTED', agent, tenant, input, history }];
  for (const { turn, reply, calls } of cassette.turns) {
    const response = 'response' in reply ? acceptedResponse(reply.response) : undefined;
    if (response === undefined) continue;
    events.push(toResponseEvent(turn, response));
    for (const call of calls) events.push(toOutcomeEvent(turn, outcomeOf(call)));
  }
  events.push(cassette.ending);
  return events;
}
