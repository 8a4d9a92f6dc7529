// Group commit: the part every run journal shares. Entries of all the runs of a journal are
// queued as they come and written together, one write per flush (one statement on PostgreSQL);
// while a write is out, what comes meanwhile waits for the next, so the round trips grow fewer
// as the load grows. Each entry's waiter hears when its write landed. A journal (in memory, on
// PostgreSQL) says only how a flush is written and how runs are read and claimed.
import { randomUUID } from 'node:crypto';
import { JournalError, toErrorInfo } from '../errors.js';
import type { JournalEntry, JournalWaiter, RecoverableRun, RunJournal } from '../runner/journal/runJournal.js';

/** One entry as a flush writes it: its run, its place in the run's journal, and who waits for it. */
export interface JournalRow {
  readonly runId: string;
  readonly seq: number;
  readonly entry: JournalEntry;
  readonly waiter: JournalWaiter | undefined;
  readonly run: OwnedRun;
}

/** A run this journal owns and that has not ended: the place of its next entry, and whether a write of it failed. */
export interface OwnedRun {
  next: number;
  broken: Error | undefined;
}

// A rejection's reason as the Error a waiter hears.
function asError(reason: unknown): Error {
  return reason instanceof Error ? reason : new JournalError(toErrorInfo(reason).message);
}

/** The queue, the flushes and the runs owned, for a journal that says how to write, read and claim. */
export abstract class GroupCommit implements RunJournal {
  readonly owner: string = randomUUID();
  /** The runs this journal began or claimed, and that have not ended: the ones whose lease it renews. */
  protected readonly owned = new Map<string, OwnedRun>();
  // Entries waiting for the next flush, in the order appended.
  private pending: JournalRow[] = [];
  // True while a flush is written, and while one is due on the next microtask.
  private writing = false;
  // The rows of the flush being written (undefined between flushes, and once given up).
  private inFlight: readonly JournalRow[] | undefined = undefined;
  private due = false;
  // True when a failed write broke some run since the last flush began.
  private broke = false;
  // Who waits for everything appended so far to be written.
  private idle: Array<() => void> = [];
  /** True once closed: nothing more is written. */
  protected closed = false;

  /** Writes one flush's rows, in order, as one unit: every row lands, or none does. */
  protected abstract write(rows: readonly JournalRow[]): Promise<void>;
  abstract read(runId: string): Promise<readonly JournalEntry[]>;
  abstract recoverable(): Promise<readonly RecoverableRun[]>;
  /** Claims the run in the store: the place of its next entry if it is now ours, else undefined. */
  protected abstract take(runId: string): Promise<number | undefined>;
  /**
   * Takes snapshot `digest` of run `runId` in the store, once: writes the run's `resumed` entry
   * and makes the run ours; the place of its next entry, or undefined if the snapshot was taken
   * before or the run is unknown.
   */
  protected abstract takeSnapshot(runId: string, digest: string): Promise<number | undefined>;

  append(entry: JournalEntry, waiter?: JournalWaiter): void {
    const { runId } = entry;
    let run = this.owned.get(runId);
    if (entry.kind === 'started' && run === undefined) {
      run = { next: 0, broken: undefined };
      this.owned.set(runId, run);
    }
    if (this.closed || run === undefined || run.broken !== undefined) {
      const error = this.closed
        ? new JournalError('the journal is closed')
        : run?.broken ?? new JournalError(`run ${runId} is not this journal's to write (it never began here, it ended, or another process claimed it)`);
      waiter?.written(error);
      return;
    }
    this.pending.push({ runId, seq: run.next++, entry, waiter, run });
    // An ended run is no longer ours to renew or to write.
    if (entry.kind === 'ended') this.owned.delete(runId);
    if (!this.writing && !this.due) {
      this.due = true;
      queueMicrotask(() => this.flush());
    }
  }

  async claim(runId: string): Promise<boolean> {
    if (this.closed) return false;
    const next = await this.take(runId);
    if (next === undefined) return false;
    this.owned.set(runId, { next, broken: undefined });
    return true;
  }

  async resume(runId: string, digest: string): Promise<boolean> {
    if (this.closed) return false;
    // What this journal has yet to write of the run (its end) lands before the run is taken back.
    await this.flushed();
    const next = await this.takeSnapshot(runId, digest);
    if (next === undefined) return false;
    this.owned.set(runId, { next, broken: undefined });
    return true;
  }

  flushed(): Promise<void> {
    if (!this.writing && !this.due) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  async close(): Promise<void> {
    await this.flushed();
    this.closed = true;
    this.owned.clear();
  }

  // Writes everything pending as one unit; what comes meanwhile waits for the next flush.
  private flush(): void {
    this.due = false;
    let rows = this.pending;
    this.pending = [];
    // Rows of a run that broke while they waited are refused, not written after the gap.
    if (this.broke) {
      this.broke = false;
      rows = rows.filter((row) => row.run.broken === undefined || (row.waiter?.written(row.run.broken), false));
    }
    if (rows.length === 0) return this.wentIdle();
    // Given up at close (abandon): refused, not written.
    if (this.closed) return this.landed(rows, new JournalError('the journal is closed'));
    this.writing = true;
    this.inFlight = rows;
    let written: Promise<void>;
    try {
      written = this.write(rows);
    } catch (error) {
      written = Promise.reject(error);
    }
    written.then(
      () => this.answered(rows, undefined),
      (reason: unknown) => this.answered(rows, asError(reason)),
    );
  }

  // The database answered a flush; one given up meanwhile (abandon) was told already.
  private answered(rows: readonly JournalRow[], error: Error | undefined): void {
    if (rows !== this.inFlight) return;
    this.inFlight = undefined;
    this.landed(rows, error);
  }

  /**
   * Closed while a write is unanswered (the database hanging): the write and every entry queued
   * behind it are given up, their waiters told `error`, and nothing more is written. A late
   * answer to the write is ignored.
   */
  protected abandon(error: Error): void {
    this.closed = true;
    const rows = this.inFlight;
    this.inFlight = undefined;
    if (rows !== undefined) this.landed(rows, error);
  }

  private landed(rows: readonly JournalRow[], error: Error | undefined): void {
    this.writing = false;
    for (const row of rows) {
      if (error !== undefined) {
        row.run.broken ??= error;
        this.broke = true;
      }
      try {
        row.waiter?.written(error);
      } catch {
        // A waiter is the library's own (a call's record); one that throws must not keep the others waiting.
      }
    }
    if (this.pending.length > 0) this.flush();
    else this.wentIdle();
  }

  private wentIdle(): void {
    const { idle } = this;
    if (idle.length === 0) return;
    this.idle = [];
    for (const resolve of idle) resolve();
  }
}
