// A run journal on PostgreSQL through node-postgres (`pg`, an optional peer): the entries of all
// the runs of a runner are written by group commit, one statement per flush; each run's lease is
// a row its owner renews while the run lives. The tables are created on first use (or by
// `setup()`); their layout is schema.ts's, and docs/resuming.md's.
import { Socket } from 'node:net';
import { describeValue, refuseUnknownFields } from '../config/index.js';
import { ConfigError, JournalError } from '../errors.js';
import type { JournalEntry, RecoverableRun } from '../runner/journal/runJournal.js';
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
  /**
   * How long `close()` waits for PostgreSQL to answer the journal's last writes (and, for a pool
   * of its own, to end it) before it gives them up: close ends within this whatever the database
   * does. Default 5.
   */
  readonly closeSeconds?: number;
}

const fields = ['pool', 'connectionString', 'schema', 'tablePrefix', 'leaseSeconds', 'closeSeconds'];

// Resolves true once `promise` settles, false if `ms` pass first; its timer is cleared either way.
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, ms));
  });
  const settled = promise.then(
    () => true,
    () => true,
  );
  const answer = await Promise.race([settled, late]);
  clearTimeout(timer);
  return answer;
}

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
  readonly closeSeconds: number;
  private readonly own: boolean;
  // The sockets of the journal's own pool, which close() destroys if PostgreSQL does not let it end.
  private readonly sockets = new Set<Socket>();
  private pool: PgPoolLike | undefined;
  private readonly connectionString: string | undefined;
  private ready: Promise<void> | undefined = undefined;
  private readonly flushSql: string;
  private readonly renewal: ReturnType<typeof setInterval>;

  constructor(options: PostgresRunJournalOptions) {
    super();
    if (options === null || typeof options !== 'object') throw new ConfigError('PostgresRunJournal', `PostgresRunJournal options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, fields, 'PostgresRunJournal');
    const { pool, connectionString, schema = 'public', tablePrefix = 'agent_lanes_', leaseSeconds = 30, closeSeconds = 5 } = options;
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
    if (typeof closeSeconds !== 'number' || !(closeSeconds > 0) || !Number.isFinite(closeSeconds)) {
      throw new ConfigError('closeSeconds', `closeSeconds must be a positive finite number of seconds, got ${describeValue(closeSeconds)}`);
    }
    this.tables = tablesOf(schema, tablePrefix);
    this.leaseSeconds = leaseSeconds;
    this.closeSeconds = closeSeconds;
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

  /**
   * Writes what was appended, hands back the runs it still owns, and ends its own pool (never
   * yours). It resolves within `closeSeconds` whatever PostgreSQL does: a write still unanswered
   * then is given up (its waiter told it failed: it may or may not have landed), and the sockets
   * of its own pool are destroyed. A pool of yours is yours to end; a query the journal left in
   * it against a hanging server holds one of its clients until the server answers or the
   * connection breaks (pg's `query_timeout` bounds that).
   */
  override async close(): Promise<void> {
    clearInterval(this.renewal);
    const end = performance.now() + this.closeSeconds * 1000;
    const left = () => end - performance.now();
    const owned = [...this.owned.keys()];
    if (!(await settlesWithin(this.flushed(), left()))) {
      this.abandon(new JournalError(`PostgreSQL did not answer within closeSeconds (${this.closeSeconds} s) of the journal's close: the write was given up, and may or may not have landed`));
    }
    await super.close();
    const pool = this.pool;
    this.pool = undefined;
    if (pool === undefined) return;
    // The runs this journal still owned are nobody's now: recoverable at once, not a lease later.
    if (owned.length > 0) await settlesWithin(pool.query(releaseStatement(this.tables), [this.owner, owned]), left());
    if (!this.own) return;
    const ended = pool.end();
    if (await settlesWithin(ended, left())) return;
    // PostgreSQL is not answering: the pool's connections are dropped, which ends it.
    for (const socket of this.sockets) socket.destroy();
    await ended.catch(() => undefined);
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
    // Each connection's socket is the journal's to drop at close (pg's `stream` option).
    const stream = (): Socket => {
      const socket = new Socket();
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      return socket;
    };
    const made = await poolFor(this.connectionString, 'PostgresRunJournal', stream);
    if (this.pool !== undefined) {
      await made.end();
      return this.pool;
    }
    return (this.pool = made);
  }
}
