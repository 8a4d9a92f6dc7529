// The PostgreSQL the journal specs talk to (127.0.0.1:5432, trust auth, database `test`), a
// table prefix of each spec run's own, and a TCP hop between the two that a spec can cut.
import { randomBytes } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import type { PostgresRunJournal } from '../../lib/postgres.js';

export const connectionString = process.env['AGENT_LANES_PG'] ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A prefix no other spec run uses: `spec_<pid>_<random>_`. */
export function uniquePrefix(): string {
  return `spec_${process.pid}_${randomBytes(4).toString('hex')}_`;
}

export function newPool(connection = connectionString): pg.Pool {
  const pool = new pg.Pool({ connectionString: connection, max: 4 });
  pool.on('error', () => undefined);
  return pool;
}

/** Drops the tables of `prefix` (in schema public). */
export async function dropTables(pool: pg.Pool, prefix: string): Promise<void> {
  await pool.query(`DROP TABLE IF EXISTS "public"."${prefix}entries", "public"."${prefix}runs", "public"."${prefix}resumed"`);
}

/**
 * A spec file's PostgreSQL, made inside its describe: a table prefix of its own, a pool, and a
 * list for the journals it makes, all closed (and the tables dropped) after its specs.
 */
export function journalFixture(): { prefix: string; pool: pg.Pool; journals: PostgresRunJournal[] } {
  const prefix = uniquePrefix();
  const pool = newPool();
  const journals: PostgresRunJournal[] = [];
  after(async () => {
    for (const journal of journals) await journal.close();
    await dropTables(pool, prefix);
    await pool.end();
  });
  return { prefix, pool, journals };
}

/** A TCP hop to the database that `cut()` severs: every connection through it destroyed, new ones refused. */
export class CuttableLink {
  private readonly sockets = new Set<Socket>();
  private constructor(private readonly server: Server) {}

  static async open(): Promise<CuttableLink> {
    const server = createServer();
    const link = new CuttableLink(server);
    server.on('connection', (client) => {
      const upstream = connect(5432, '127.0.0.1');
      link.sockets.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      const drop = (): void => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return link;
  }

  get connectionString(): string {
    return `postgres://postgres@127.0.0.1:${(this.server.address() as AddressInfo).port}/test`;
  }

  /** Every connection through the hop destroyed, and the hop closed to new ones. */
  cut(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
