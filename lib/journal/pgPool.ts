// The PostgreSQL pieces the journal and the snapshot store share: what they need of a
// node-postgres pool (written out, so the library's declarations never import the optional peer),
// the pool made from a connection string on first use, and the setup run under an advisory lock.
import { JournalError } from '../errors.js';

/** What the journal needs of a node-postgres `Pool` (any `pg.Pool` is one), written out so the library's declarations never import the peer. */
export interface PgPoolLike {
  query(text: string, values?: readonly unknown[]): Promise<{ readonly rows: readonly Record<string, unknown>[] }>;
  connect(): Promise<PgClientLike>;
  end(): Promise<void>;
  on?(event: 'error', listener: (error: Error) => void): unknown;
}

/** A client checked out of a pool, for the setup's transaction. */
export interface PgClientLike {
  query(text: string, values?: readonly unknown[]): Promise<unknown>;
  release(error?: Error | boolean): void;
}

// A serialised setup per database, whatever the prefix: CREATE ... IF NOT EXISTS races itself.
const setupLock = 0x6a6f75726e616c;

/**
 * A pool of four connections to `connectionString`, made from `pg` (`who` names what needs it);
 * `stream`, where given, makes each connection's socket (pg's option), so its owner can drop them.
 */
export async function poolFor(connectionString: string | undefined, who: string, stream?: () => unknown): Promise<PgPoolLike> {
  let pg: { default?: { Pool: new (options: object) => PgPoolLike }; Pool?: new (options: object) => PgPoolLike };
  try {
    pg = (await import('pg' as string)) as typeof pg;
  } catch {
    throw new JournalError(`${who} needs the pg package for a connectionString (npm install pg), or a pool of yours`);
  }
  const Pool = pg.Pool ?? pg.default?.Pool;
  if (Pool === undefined) throw new JournalError('the pg package has no Pool');
  const pool = new Pool(stream === undefined ? { connectionString, max: 4 } : { connectionString, max: 4, stream });
  // An idle client's error (the server went away) must not end the process: the next query says so.
  pool.on?.('error', () => undefined);
  return pool;
}

/** Runs `statements` in one transaction under the setup lock: safe from several processes at once. */
export async function setUp(pool: PgPoolLike, statements: readonly string[]): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [setupLock]);
    for (const statement of statements) await client.query(statement);
    await client.query('COMMIT');
    client.release();
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release(true);
    throw error;
  }
}
