// A run journal kept in this process's memory, for tests and for trying recovery out: the same
// group commit and the same rules as the PostgreSQL journal, with the entries in a store that
// several journal objects (standing for several processes) can share.
import type { JournalEntry, RecoverableRun } from '../runner/journal/runJournal.js';
import { GroupCommit, type JournalRow } from './groupCommit.js';

// One run in the store: whose it is, and its entries in order. The run builds each entry afresh
// and never changes it, so the store keeps them as they are and copies them out when read.
interface StoredRun {
  readonly agent: string;
  readonly tenant: string;
  owner: string;
  leaseEndedAt: number;
  ended: boolean;
  readonly entries: JournalEntry[];
}

// What several journal objects share: the runs, and which owners still live.
class Store {
  readonly runs = new Map<string, StoredRun>();
  readonly live = new Set<string>();
  /** The digests of the snapshots resumed. */
  readonly resumed = new Set<string>();
  /** Flushes written, as a database would count its statements. */
  writes = 0;
}

/**
 * A run journal in memory. `reopen()` gives another journal over the same entries, writing as
 * another owner (what another process sees); `simulateCrash()` makes this one stop as its
 * process would, mid-write: nothing more it is given lands, no waiter of it hears again, and
 * its runs are recoverable by the others at once.
 *
 * ## Example
 * ```ts
 * const journal = new InMemoryRunJournal();
 * const runner = new AgentRunner({ provider, tools, journal });
 * ```
 */
export class InMemoryRunJournal extends GroupCommit {
  private readonly store: Store;
  private crashed = false;

  constructor(shared?: InMemoryRunJournal) {
    super();
    this.store = shared?.store ?? new Store();
    this.store.live.add(this.owner);
  }

  /** Another journal over the same entries, writing as an owner of its own (another process's view). */
  reopen(): InMemoryRunJournal {
    return new InMemoryRunJournal(this);
  }

  /** How many flushes every journal over this store has written (each would be one statement). */
  get writes(): number {
    return this.store.writes;
  }

  /** This journal's process stops: nothing pending lands, nothing more is written, its runs' owner is gone. */
  simulateCrash(): void {
    this.crashed = true;
    this.closed = true;
    this.gone();
    this.owned.clear();
  }

  // This journal's owner is gone: its runs' leases end now.
  private gone(): void {
    const { store, owner } = this;
    store.live.delete(owner);
    const now = Date.now();
    for (const run of store.runs.values()) if (run.owner === owner && !run.ended) run.leaseEndedAt = now;
  }

  protected write(rows: readonly JournalRow[]): Promise<void> {
    // A crashed process writes nothing, and its waiters never hear (its calls never start).
    if (this.crashed) return new Promise<void>(() => undefined);
    const { runs } = this.store;
    this.store.writes++;
    for (const { runId, entry } of rows) {
      let run = runs.get(runId);
      if (entry.kind === 'started') {
        run ??= { agent: entry.agent, tenant: entry.tenant, owner: this.owner, leaseEndedAt: 0, ended: false, entries: [] };
        runs.set(runId, run);
      }
      if (run === undefined) continue;
      run.entries.push(entry);
      if (entry.kind === 'ended') run.ended = true;
    }
    return Promise.resolve();
  }

  read(runId: string): Promise<readonly JournalEntry[]> {
    const run = this.store.runs.get(runId);
    // Copied through JSON, as a database would give them back.
    return Promise.resolve(run === undefined ? [] : (JSON.parse(JSON.stringify(run.entries)) as JournalEntry[]));
  }

  protected take(runId: string): Promise<number | undefined> {
    const run = this.store.runs.get(runId);
    if (run === undefined || run.ended || this.store.live.has(run.owner)) return Promise.resolve(undefined);
    run.owner = this.owner;
    return Promise.resolve(run.entries.length);
  }

  protected takeSnapshot(runId: string, digest: string): Promise<number | undefined> {
    const { runs, resumed } = this.store;
    const run = runs.get(runId);
    if (run === undefined || resumed.has(digest)) return Promise.resolve(undefined);
    resumed.add(digest);
    run.owner = this.owner;
    run.ended = false;
    run.entries.push({ kind: 'resumed', runId, digest });
    return Promise.resolve(run.entries.length);
  }

  recoverable(): Promise<readonly RecoverableRun[]> {
    const found: RecoverableRun[] = [];
    for (const [runId, run] of this.store.runs) {
      if (run.ended || this.store.live.has(run.owner)) continue;
      found.push({ runId, agent: run.agent, tenant: run.tenant, owner: run.owner, leaseEndedAt: run.leaseEndedAt });
    }
    return Promise.resolve(found);
  }

  override async close(): Promise<void> {
    await super.close();
    this.gone();
  }
}
