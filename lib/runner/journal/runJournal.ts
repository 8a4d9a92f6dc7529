// What a run journal is to the runner: where a run writes, as it goes, what it would need to be
// rebuilt after its process stopped (its start, each turn's model answer, each call of a streamed
// turn as the model writes it, each call's dispatch before its body starts, each outcome as it is
// decided, its end). The journals themselves (in
// memory, on PostgreSQL) are in lib/journal/; reading a run back is recover.ts's.
import type { Outcome } from '../../batch/index.js';
import type { RunEvent } from '../events.js';
import type { Message, ModelResponse, ToolCall } from '../model/model.js';

/** The run began: what it was asked, for whom, from which state. */
export interface RunStartedEntry {
  readonly kind: 'started';
  readonly runId: string;
  readonly agent: string;
  readonly tenant: string;
  readonly input: string;
  readonly history: readonly Message[];
  readonly state: Readonly<Record<string, unknown>>;
  readonly maxTurns: number;
}

/** Turn `turn`'s model answer, written before any of its calls is dispatched. */
export interface TurnAnsweredEntry {
  readonly kind: 'answered';
  readonly runId: string;
  readonly turn: number;
  readonly response: ModelResponse;
}

/**
 * Call `index` of a streamed turn, as the model wrote it: written as soon as the stream completes
 * the call, before the call is gated, dispatched or settled (its turn's `answered` entry comes
 * only once the stream ends). A turn cut off is rebuilt from these.
 */
export interface CallWrittenEntry {
  readonly kind: 'called';
  readonly runId: string;
  readonly turn: number;
  readonly index: number;
  readonly call: ToolCall;
}

/** Call `index` of turn `turn` is about to start its body (written ahead: the body waits for it). */
export interface CallDispatchedEntry {
  readonly kind: 'dispatched';
  readonly runId: string;
  readonly turn: number;
  readonly index: number;
  readonly callId: string;
  readonly tool: string;
  /** Written by earlier versions for a streamed turn's call (read back when its `called` entry is missing). */
  readonly args?: unknown;
}

/**
 * Call `index` of turn `turn` settled: its outcome as the transcript has it, and the text the model
 * reads for a result. Written as the outcome is decided (its settle steps done), streamed turn or not.
 */
export interface CallSettledEntry {
  readonly kind: 'settled';
  readonly runId: string;
  readonly turn: number;
  readonly index: number;
  readonly outcome: Outcome;
  readonly content?: string;
}

/**
 * Call `index` of turn `turn` ended without a result (an error, a refusal, never dispatched, a
 * stop), written as the batch decides it, before its settle steps: a crash while an earlier call
 * still runs reads it back and settles it then, rather than taking it for a call never dispatched.
 */
export interface CallDecidedEntry {
  readonly kind: 'decided';
  readonly runId: string;
  readonly turn: number;
  readonly index: number;
  readonly outcome: Outcome;
}

/** The run ended, with this final event. */
export interface RunEndedEntry {
  readonly kind: 'ended';
  readonly runId: string;
  readonly event: RunEvent;
}

/**
 * The run, which ended waiting for a person, goes on from its snapshot `digest` (written by the
 * journal as it hands the run to the one resume that takes it): the `ended` entry before it is no
 * longer the run's end.
 */
export interface RunResumedEntry {
  readonly kind: 'resumed';
  readonly runId: string;
  readonly digest: string;
}

/** One line of a run's journal. */
export type JournalEntry = RunStartedEntry | TurnAnsweredEntry | CallWrittenEntry | CallDispatchedEntry | CallDecidedEntry | CallSettledEntry | RunEndedEntry | RunResumedEntry;

/** True when the run's journal says it ended: an `ended` entry that no `resumed` entry follows. */
export function journaledEnd(entries: readonly JournalEntry[]): boolean {
  for (let i = entries.length - 1; i >= 0; i--) {
    const { kind } = entries[i]!;
    if (kind === 'ended') return true;
    if (kind === 'resumed') return false;
  }
  return false;
}

/** Hears once whether an entry is recorded: `undefined`, or the error that kept it out. */
export interface JournalWaiter {
  written(error: Error | undefined): void;
}

/** A run whose owner is gone: it has not ended, and the lease of the process that ran it lapsed. */
export interface RecoverableRun {
  readonly runId: string;
  readonly agent: string;
  readonly tenant: string;
  /** Who ran it last (a journal's `owner`). */
  readonly owner: string;
  /** When that owner's lease lapsed (ms since the epoch). */
  readonly leaseEndedAt: number;
}

/**
 * Where runs are journaled, for recovery after a crash. `append` never throws and never waits:
 * entries are written in the order given (batched with others), and a waiter hears once its
 * entry, and every entry appended before it, is recorded or could not be. A run whose entry
 * could not be recorded is broken for the journal: its later entries are refused (their waiters
 * hear the error at once), so nothing of it runs that the journal does not know of.
 *
 * A journal writes as one `owner`: the runs it began or claimed are its own, under a lease it
 * renews while they live; a run whose lease lapsed (its process stopped) may be claimed.
 */
export interface RunJournal {
  /** Who this journal writes as (unique per journal object). */
  readonly owner: string;
  append(entry: JournalEntry, waiter?: JournalWaiter): void;
  /** A run's entries, in the order written; empty for a run the journal does not know. */
  read(runId: string): Promise<readonly JournalEntry[]>;
  /**
   * Makes the run this journal's own, when its owner is gone (its lease lapsed) and it has not
   * ended: true if it is now ours; false if a live owner holds it, it ended, or it is unknown.
   * Of two journals claiming the same run at once, one wins.
   */
  claim(runId: string): Promise<boolean>;
  /** The runs whose owner is gone and that have not ended. */
  recoverable(): Promise<readonly RecoverableRun[]>;
  /**
   * Makes run `runId`, which ended waiting for a person, this journal's own again to go on from
   * its snapshot `digest`, writing its `resumed` entry: true for the one caller that takes that
   * snapshot; false if it was taken before (of two at once, one wins), or the run is unknown.
   */
  resume(runId: string, digest: string): Promise<boolean>;
  /** Resolves once every entry appended so far is recorded (or failed). */
  flushed(): Promise<void>;
  /** Writes what is pending, stops renewing leases, and lets go of what the journal made (its pool). */
  close(): Promise<void>;
}
