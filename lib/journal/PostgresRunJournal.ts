// A run journal on PostgreSQL through node-postgres (`pg`, an optional peer): the entries of all
// the runs of a runner are written by group commit, one statement per flush; each run's lease is
// a row its owner renews while the run lives. The tables are created on first use (or by
// `setup()`); their layout is schema.ts's, and docs/resuming.md's.
import { describeValue, refuseUnknownFields } from '../config/index.js';
import { ConfigError, JournalError } from '../errors.js';
import type { JournalEntry, RecoverableRun } from '../runner/runJournal.js';
import { GroupCommit, type JournalRow } from './groupCommit.js';
import { poolFor, setUp, type PgPoolLike } from './pgPool.js';

export type { PgClientLike, PgPoolLike } from './pgPool.js';
import { claimStatement, createStatements, dropStatements, flushStatement, readStatement, recoverableStatement, releaseStatement, renewStatement, resumeStatement, tablesOf, type JournalTables } from './schema.js';

export interface PostgresRunJournalOptions {
  /** A pool of yours (never ended by the journal); or give `connectionString` and the journal makes its own. */
  readonly pool?: PgPoolLike;
  readonly connectionString?: string;
  /** The schema the tables live in. Default `public`. */
  readonly schema?: string;
  /** The tables' names start with this. Default `agent_lanes_`. */
  readonly tablePrefix?: string;
  /** How long a run stays its owner's without a renewal; renewed every third of it. Default 30. */
  readonly leaseSeconds?: number;
}

const fields = ['pool', 'connectionString', 'schema', 'tablePrefix', 'leaseSeconds'];

/**
 * A run journal on PostgreSQL. Give it a `pool` of yours or a `connectionString`; the tables are
 * created on first use (or by `await journal.setup()`), under `schema` and `tablePrefix`.
 *
 * ## Example
 * ```ts
 * const journal = new PostgresRunJournal({ connectionString: 'postgres://127.0.0.1/app' });
 * const runner = new AgentRunner({ provider, tools, journal });
 * // ... and in a process started after a crash:
 * for (const { runId } of await runner.recoverable()) await runner.recover(agent, runId);
 * ```
 */
export class PostgresRunJournal extends GroupCommit {
  readonly tables: JournalTables;
  readonly leaseSeconds: number;
  private readonly own: boolean;
  private pool: PgPoolLike | undefined;
  private readonly connectionString: string | undefined;
  private ready: Promise<void> | undefined = undefined;
  private readonly flushSql: string;
  private readonly renewal: ReturnType<typeof setInterval>;

  constructor(options: PostgresRunJournalOptions) {
    super();
    if (options === null || typeof options !== 'object') throw new ConfigError('PostgresRunJournal', `PostgresRunJournal options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, fields, 'PostgresRunJournal');
    const { pool, connectionString, schema = 'public', tablePrefix = 'agent_lanes_', leaseSeconds = 30 } = options;
    if ((pool === undefined) === (connectionString === undefined)) {
      throw new ConfigError('pool', 'PostgresRunJournal takes either pool (a pg.Pool) or connectionString, not both and not neither');
    }
    if (pool !== undefined && (pool === null || typeof pool.query !== 'function' || typeof pool.connect !== 'function')) {
      throw new ConfigError('pool', `pool must be a pg.Pool (query and connect methods), got ${describeValue(pool)}`);
    }
    if (connectionString !== undefined && (typeof connectionString !== 'string' || connectionString === '')) {
      throw new ConfigError('connectionString', `connectionString must be a non-empty string, got ${describeValue(connectionString)}`);
    }
    if (typeof leaseSeconds !== 'number' || !(leaseSeconds >= 1) || !Number.isFinite(leaseSeconds)) {
      throw new ConfigError('leaseSeconds', `leaseSeconds must be a number of seconds, at least 1, got ${describeValue(leaseSeconds)}`);
    }
    this.tables = tablesOf(schema, tablePrefix);
    this.leaseSeconds = leaseSeconds;
    this.pool = pool;
    this.own = pool === undefined;
    this.connectionString = connectionString;
    this.flushSql = flushStatement(this.tables);
    // Renews the leases of the runs this journal runs; unref'd, so it never keeps a process alive.
    this.renewal = setInterval(() => this.renew(), (leaseSeconds * 1000) / 3);
    this.renewal.unref();
  }

  /** Creates the schema and tables if they are missing (also done on first use). Safe to call from several processes at once. */
  setup(): Promise<void> {
    this.ready ??= this.create().catch((error: unknown) => {
      // A setup that failed (the database down) is tried again by the next use.
      this.ready = undefined;
      throw error;
    });
    return this.ready;
  }

  /** Drops the journal's tables (every run's journal with them). For tests and teardown. */
  async drop(): Promise<void> {
    const pool = await this.connection();
    for (const statement of dropStatements(this.tables)) await pool.query(statement);
    this.ready = undefined;
  }

  protected async write(rows: readonly JournalRow[]): Promise<void> {
    await this.setup();
    const runs: string[] = [];
    const agents: string[] = [];
    const tenants: string[] = [];
    // One row per run: its entries of this flush, in order.
    const byRun = new Map<string, { last: number; ended: boolean; body: string[] }>();
    for (const { runId, seq, entry } of rows) {
      let row = byRun.get(runId);
      if (row === undefined) byRun.set(runId, (row = { last: seq, ended: false, body: [] }));
      row.last = seq;
      row.body.push(JSON.stringify(entry));
      if (entry.kind === 'ended') row.ended = true;
      if (entry.kind === 'started') {
        runs.push(runId);
        agents.push(entry.agent);
        tenants.push(entry.tenant);
      }
    }
    // The rows as one JSON text: each run's entries written in as they are.
    const parts: string[] = [];
    for (const [runId, row] of byRun) parts.push(`{"r":${JSON.stringify(runId)},"s":${row.last},"e":${row.ended},"b":[${row.body.join(',')}]}`);
    const pool = await this.connection();
    await pool.query(this.flushSql, [this.owner, this.leaseSeconds, runs, agents, tenants, `[${parts.join(',')}]`]);
  }

  async read(runId: string): Promise<readonly JournalEntry[]> {
    await this.setup();
    const { rows } = await (await this.connection()).query(readStatement(this.tables), [runId]);
    return rows.flatMap((row) => row['body'] as JournalEntry[]);
  }

  protected async take(runId: string): Promise<number | undefined> {
    await this.setup();
    const { rows } = await (await this.connection()).query(claimStatement(this.tables), [runId, this.owner, this.leaseSeconds]);
    return rows.length === 0 ? undefined : Number(rows[0]!['next']);
  }

  protected async takeSnapshot(runId: string, digest: string): Promise<number | undefined> {
    await this.setup();
    const entry: JournalEntry = { kind: 'resumed', runId, digest };
    const { rows } = await (await this.connection()).query(resumeStatement(this.tables), [runId, digest, this.owner, this.leaseSeconds, JSON.stringify(entry)]);
    return rows.length === 0 ? undefined : Number(rows[0]!['next']);
  }

  async recoverable(): Promise<readonly RecoverableRun[]> {
    await this.setup();
    const { rows } = await (await this.connection()).query(recoverableStatement(this.tables));
    return rows.map((row) => ({
      runId: String(row['run_id']),
      agent: String(row['agent']),
      tenant: String(row['tenant']),
      owner: String(row['owner']),
      leaseEndedAt: new Date(row['lease_until'] as string | Date).getTime(),
    }));
  }

  override async close(): Promise<void> {
    clearInterval(this.renewal);
    const left = [...this.owned.keys()];
    await super.close();
    // The runs this journal still owned are nobody's now: recoverable at once, not a lease later.
    if (left.length > 0 && this.pool !== undefined) {
      await this.pool.query(releaseStatement(this.tables), [this.owner, left]).catch(() => undefined);
    }
    if (this.own) await this.pool?.end();
    this.pool = undefined;
  }

  private renew(): void {
    if (this.owned.size === 0 || this.pool === undefined || this.ready === undefined) return;
    // A renewal that fails is tried again at the next tick; meanwhile the runs' writes fail too,
    // so none of their bodies starts unrecorded.
    this.pool.query(renewStatement(this.tables), [this.owner, this.leaseSeconds, [...this.owned.keys()]]).catch(() => undefined);
  }

  private async create(): Promise<void> {
    await setUp(await this.connection(), createStatements(this.tables));
  }

  // The pool: the caller's, or one of the journal's own, made from `pg` on first use.
  private async connection(): Promise<PgPoolLike> {
    if (this.pool !== undefined) return this.pool;
    if (this.closed) throw new JournalError('the journal is closed');
    const made = await poolFor(this.connectionString, 'PostgresRunJournal');
    if (this.pool !== undefined) {
      await made.end();
      return this.pool;
    }
    return (this.pool = made);
  }
}
