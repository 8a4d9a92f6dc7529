// A SnapshotStore on PostgreSQL through node-postgres (`pg`, the optional peer the run journal
// uses): the snapshots of runs waiting for a person, kept for a fleet, each for `ttlSeconds`. The
// table is created on first use (or by `setup()`), under the journal's naming conventions
// (schema.ts); expired rows are swept by each `put`, with no timer of the store's own.
import { describeValue, refuseUnknownFields } from '../config/index.js';
import { ConfigError, JournalError } from '../errors.js';
import type { RunSnapshot } from '../runner/resume/snapshotFormat.js';
import { checkedTtlSeconds, defaultSnapshotTtlSeconds, type KeptSnapshot, type SnapshotStore } from '../runner/resume/snapshotStore.js';
import { poolFor, setUp, type PgPoolLike } from './pgPool.js';
import { snapshotCreateStatements, snapshotDeleteStatement, snapshotGetStatement, snapshotPutStatement, snapshotTableOf, type SnapshotTable } from './schema.js';

export interface PostgresSnapshotStoreOptions {
  /** A pool of yours (never ended by the store); or give `connectionString` and the store makes its own. */
  readonly pool?: PgPoolLike;
  readonly connectionString?: string;
  /** The schema the table lives in. Default `public`. */
  readonly schema?: string;
  /** The table's name starts with this (`<prefix>snapshots`). Default `agent_lanes_`. */
  readonly tablePrefix?: string;
  /** How long an entry is kept after its `put`, in seconds. Default 86,400 (a day). */
  readonly ttlSeconds?: number;
}

const fields = ['pool', 'connectionString', 'schema', 'tablePrefix', 'ttlSeconds'];

/**
 * A SnapshotStore on PostgreSQL, for a fleet: any process may take a snapshot another kept, and
 * `delete` is one statement that one caller alone wins. An entry expires `ttlSeconds` after its
 * `put`: `get` and `delete` no longer find it, and a later `put` sweeps it.
 *
 * ## Example
 * ```ts
 * const snapshots = new PostgresSnapshotStore({ connectionString: process.env.DATABASE_URL });
 * const runner = new AgentRunner({ provider, tools, snapshots });
 * ```
 */
export class PostgresSnapshotStore implements SnapshotStore {
  readonly table: SnapshotTable;
  readonly ttlSeconds: number;
  private readonly own: boolean;
  private pool: PgPoolLike | undefined;
  private readonly connectionString: string | undefined;
  private ready: Promise<void> | undefined = undefined;
  private closed = false;

  constructor(options: PostgresSnapshotStoreOptions) {
    if (options === null || typeof options !== 'object') throw new ConfigError('PostgresSnapshotStore', `PostgresSnapshotStore options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, fields, 'PostgresSnapshotStore');
    const { pool, connectionString, schema = 'public', tablePrefix = 'agent_lanes_', ttlSeconds = defaultSnapshotTtlSeconds } = options;
    if ((pool === undefined) === (connectionString === undefined)) {
      throw new ConfigError('pool', 'PostgresSnapshotStore takes either pool (a pg.Pool) or connectionString, not both and not neither');
    }
    if (pool !== undefined && (pool === null || typeof pool.query !== 'function' || typeof pool.connect !== 'function')) {
      throw new ConfigError('pool', `pool must be a pg.Pool (query and connect methods), got ${describeValue(pool)}`);
    }
    if (connectionString !== undefined && (typeof connectionString !== 'string' || connectionString === '')) {
      throw new ConfigError('connectionString', `connectionString must be a non-empty string, got ${describeValue(connectionString)}`);
    }
    this.table = snapshotTableOf(schema, tablePrefix);
    this.ttlSeconds = checkedTtlSeconds(ttlSeconds);
    this.pool = pool;
    this.own = pool === undefined;
    this.connectionString = connectionString;
  }

  /** Creates the schema and table if they are missing (also done on first use). Safe to call from several processes at once. */
  setup(): Promise<void> {
    this.ready ??= this.connection()
      .then((pool) => setUp(pool, snapshotCreateStatements(this.table)))
      .catch((error: unknown) => {
        // A setup that failed (the database down) is tried again by the next use.
        this.ready = undefined;
        throw error;
      });
    return this.ready;
  }

  async put(key: string, kept: KeptSnapshot): Promise<void> {
    checkedKey(key);
    await this.setup();
    await (await this.connection()).query(snapshotPutStatement(this.table), [key, kept.tenant, JSON.stringify(kept.snapshot), this.ttlSeconds]);
  }

  async get(key: string): Promise<KeptSnapshot | undefined> {
    checkedKey(key);
    await this.setup();
    const { rows } = await (await this.connection()).query(snapshotGetStatement(this.table), [key]);
    const row = rows[0];
    return row === undefined ? undefined : { tenant: String(row['tenant']), snapshot: row['snapshot'] as RunSnapshot };
  }

  async delete(key: string): Promise<boolean> {
    checkedKey(key);
    await this.setup();
    const { rows } = await (await this.connection()).query(snapshotDeleteStatement(this.table), [key]);
    return rows.length > 0;
  }

  /** Drops the store's table (every kept snapshot with it). For tests and teardown. */
  async drop(): Promise<void> {
    const pool = await this.connection();
    await pool.query(`DROP TABLE IF EXISTS ${this.table.table}`);
    this.ready = undefined;
  }

  /** Lets go of what the store made (its pool, if it made one); a pool of yours is left open. */
  async close(): Promise<void> {
    this.closed = true;
    const { pool } = this;
    this.pool = undefined;
    if (this.own) await pool?.end();
  }

  // The pool: the caller's, or one of the store's own, made from `pg` on first use.
  private async connection(): Promise<PgPoolLike> {
    if (this.pool !== undefined) return this.pool;
    if (this.closed) throw new JournalError('the snapshot store is closed');
    const made = await poolFor(this.connectionString, 'PostgresSnapshotStore');
    if (this.pool !== undefined || this.closed) {
      await made.end();
      if (this.pool === undefined) throw new JournalError('the snapshot store is closed');
      return this.pool;
    }
    return (this.pool = made);
  }
}

function checkedKey(key: unknown): void {
  if (typeof key !== 'string' || key === '') throw new ConfigError('key', `a snapshot's key must be a non-empty string, got ${describeValue(key)}`);
}
