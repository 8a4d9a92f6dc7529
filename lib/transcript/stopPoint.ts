// Where a recorded run stopped mid-batch, and when a replay has got there. A stop (a failure
// under FAIL_RUN, a cancel, a deadline) classifies calls by what they were doing at that
// moment, so a replay lands its stop only once every call the recording dispatched is out.
import type { SchedulerLike } from 'rxjs';
import type { Cassette } from './Cassette.js';

export interface StopPoint {
  /** The turn whose batch the recorded run stopped in. */
  readonly turn: number;
  /** Under FAIL_RUN, the index of the call whose failure stopped the batch: its replay fails only at the stop point. */
  readonly stopper: number | undefined;
  /** The replay gave the turn's response. */
  responded(): void;
  /** The replay dispatched call `index` of the turn. */
  dispatched(index: number): void;
  /** Calls `then` once the stop point is reached; returns what cancels the wait. */
  onReached(then: () => void): () => void;
}

/**
 * The stop point of a cassette whose last batch was stopped (or whose run was cancelled after
 * its last batch), or undefined. It is reached once the turn's response was given and every call
 * the recording dispatched has been dispatched again; `then`s run on `scheduler` a tick later, so
 * the answers given by then settle first, as they had in the recording.
 */
export function stopPoint(cassette: Cassette, scheduler: SchedulerLike): StopPoint | undefined {
  const last = cassette.turns[cassette.turns.length - 1];
  const { ending } = cassette;
  if (last === undefined || !('response' in last.reply) || last.calls.length === 0) return undefined;
  const stopped = last.calls.some((call) => call.stopped);
  if (!stopped && ending.type !== 'RUN_CANCELLED') return undefined;
  const stopper =
    ending.type === 'RUN_FAILED' && stopped
      ? last.calls.find((call) => call.kind === 'error' && !call.stopped && call.dispatched && call.error.name === ending.error.name && call.error.message === ending.error.message)?.index
      : undefined;
  // The calls the recording dispatched; each must be dispatched again before the stop.
  const expected = last.calls.filter((call) => call.dispatched).map((call) => call.index);
  // The calls dispatched so far in the replay.
  const seen = new Set<number>();
  // Whether the turn's response was given.
  let given = false;
  // Set once the stop was scheduled, and once it ran.
  let scheduled = false;
  let reached = false;
  // Who waits for the stop.
  const waiting = new Set<() => void>();

  const check = (): void => {
    if (scheduled || !given || expected.some((index) => !seen.has(index))) return;
    scheduled = true;
    scheduler.schedule(() => {
      reached = true;
      const now = [...waiting];
      waiting.clear();
      for (const then of now) then();
    });
  };

  return {
    turn: last.turn,
    stopper,
    responded: () => {
      given = true;
      check();
    },
    dispatched: (index) => {
      seen.add(index);
      check();
    },
    onReached: (then) => {
      if (reached) {
        then();
        return () => undefined;
      }
      waiting.add(then);
      return () => waiting.delete(then);
    },
  };
}
