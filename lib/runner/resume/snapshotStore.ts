// Where the snapshots of runs waiting for a person are kept on the server: the interface a store
// meets (an atomic delete that one caller wins: how a snapshot is resumed once), and the store in
// this process's memory. Entries expire: a person who never answers leaves nothing behind for
// good. PostgresSnapshotStore (lib/journal/) is the one for a fleet.
import { concatMap, from, of, type MonoTypeOperatorFunction } from 'rxjs';
import { describeValue, refuseUnknownFields } from '../../config/index.js';
import { ApprovalRefusedError, ConfigError, JournalError } from '../../errors.js';
import type { RunEvent } from '../events.js';
import type { RunJournal } from '../journal/runJournal.js';
import type { RunSnapshot } from './snapshotFormat.js';

/** What a store keeps of a waiting run: its snapshot, and whose run it is. */
export interface KeptSnapshot {
  readonly tenant: string;
  readonly snapshot: RunSnapshot;
}

/**
 * Where waiting runs' snapshots are kept between the request that ended interrupted and the one
 * that answers it. A fleet passes one backed by its database; `delete` must be atomic: of two
 * callers taking the same entry, one alone may have it. An entry may expire: `get` and `delete`
 * then find nothing.
 */
export interface SnapshotStore {
  put(key: string, kept: KeptSnapshot): Promise<void>;
  get(key: string): Promise<KeptSnapshot | undefined>;
  /** Removes the entry; true only for the caller that removed it (false for an entry gone or expired). */
  delete(key: string): Promise<boolean>;
}

/** How long a kept snapshot lasts unless said otherwise: a day. */
export const defaultSnapshotTtlSeconds = 86_400;

/** A snapshot store's time to live, checked. */
export function checkedTtlSeconds(ttlSeconds: unknown): number {
  if (typeof ttlSeconds !== 'number' || !(ttlSeconds > 0) || !Number.isFinite(ttlSeconds)) {
    throw new ConfigError('ttlSeconds', `ttlSeconds must be a positive number of seconds, got ${describeValue(ttlSeconds)}`);
  }
  return ttlSeconds;
}

export interface InMemorySnapshotStoreOptions {
  /** How long an entry is kept after its `put`, in seconds. Default 86,400 (a day). */
  readonly ttlSeconds?: number;
}

// One entry: what is kept, and when it is no longer (ms since the epoch).
interface Entry {
  readonly kept: KeptSnapshot;
  readonly until: number;
}

/**
 * A SnapshotStore in this process's memory: for one server, or specs. Entries expire `ttlSeconds`
 * after their `put`. There is no timer: expired entries are swept as the store is used (each
 * `put`, and `size`), oldest first, so a store nobody uses any more keeps no process alive.
 */
export class InMemorySnapshotStore implements SnapshotStore {
  readonly ttlSeconds: number;
  // In the order of their expiry (a put moves its key to the end): the sweep stops at the first that lives.
  private readonly kept = new Map<string, Entry>();

  constructor(options: InMemorySnapshotStoreOptions = {}) {
    if (options === null || typeof options !== 'object') throw new ConfigError('InMemorySnapshotStore', `InMemorySnapshotStore options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, ['ttlSeconds'], 'InMemorySnapshotStore');
    this.ttlSeconds = checkedTtlSeconds(options.ttlSeconds ?? defaultSnapshotTtlSeconds);
  }

  put(key: string, kept: KeptSnapshot): Promise<void> {
    const now = Date.now();
    this.sweep(now);
    this.kept.delete(key);
    this.kept.set(key, { kept, until: now + this.ttlSeconds * 1000 });
    return Promise.resolve();
  }

  get(key: string): Promise<KeptSnapshot | undefined> {
    return Promise.resolve(this.live(key)?.kept);
  }

  delete(key: string): Promise<boolean> {
    return Promise.resolve(this.live(key) !== undefined && this.kept.delete(key));
  }

  /** How many snapshots wait (expired ones swept first). */
  get size(): number {
    this.sweep(Date.now());
    return this.kept.size;
  }

  // The entry of `key` if it has not expired; an expired one is dropped.
  private live(key: string): Entry | undefined {
    const entry = this.kept.get(key);
    if (entry === undefined || entry.until > Date.now()) return entry;
    this.kept.delete(key);
    return undefined;
  }

  // Drops the expired entries: they are first in the map.
  private sweep(now: number): void {
    for (const [key, entry] of this.kept) {
      if (entry.until > now) return;
      this.kept.delete(key);
    }
  }
}

/** A runner's option `snapshots`, checked: a SnapshotStore or undefined. */
export function checkedSnapshotStore(store: unknown): SnapshotStore | undefined {
  if (store === undefined) return undefined;
  const methods = store !== null && typeof store === 'object' ? (store as Partial<Record<string, unknown>>) : undefined;
  if (methods === undefined || typeof methods['put'] !== 'function' || typeof methods['get'] !== 'function' || typeof methods['delete'] !== 'function') {
    throw new ConfigError('snapshots', `snapshots must be a SnapshotStore (put, get, delete: an InMemorySnapshotStore, a PostgresSnapshotStore), got ${describeValue(store)}`);
  }
  return store as SnapshotStore;
}

/** The key under which a runner's store keeps a waiting run's snapshot for its one resume (apart from the UI round trip's keys, the bare digests). */
export function resumableKey(digest: string): string {
  return `resumable:${digest}`;
}

/**
 * Holds the RUN_INTERRUPTED of a run that ends waiting for a person until a resume can find it:
 * its snapshot kept in `store`, and its journal's entries (its `ended` one) written. A resume
 * right after it, in this process or another, then takes it.
 */
export function keptForResume(store: SnapshotStore | undefined, journal: RunJournal | undefined): MonoTypeOperatorFunction<RunEvent> {
  return concatMap((event) => {
    if (event.type !== 'RUN_INTERRUPTED') return of(event);
    const { snapshot } = event;
    const kept = store?.put(resumableKey(snapshot.digest), { tenant: snapshot.tenant, snapshot });
    return from(Promise.all([kept, journal?.flushed()]).then(() => event));
  });
}

/**
 * Takes `snapshot` (checked already) for its one resume, from the runner's store and from its
 * journal, whichever it has: of two resumes of one snapshot, one after the other or at once, the
 * second is refused with an ApprovalRefusedError (`answered`) naming the snapshot and its run.
 */
export async function takenForResume(snapshot: RunSnapshot, journal: RunJournal | undefined, store: SnapshotStore | undefined): Promise<void> {
  const { runId, digest } = snapshot;
  const again = (why: string): ApprovalRefusedError => new ApprovalRefusedError('answered', `snapshot ${digest} of run ${runId} was resumed already${why}: a snapshot is resumed once`);
  if (store !== undefined && !(await store.delete(resumableKey(digest)))) throw again(' (or the runner\'s snapshot store does not hold it: it expired, or a runner without that store took it)');
  if (journal !== undefined && !(await journal.resume(runId, digest))) {
    if ((await journal.read(runId)).length === 0) throw new JournalError(`run ${runId} is not in the runner's journal: a runner with a journal resumes the runs it journaled`);
    throw again('');
  }
}
