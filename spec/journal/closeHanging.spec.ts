// PostgresRunJournal.close() with PostgreSQL hanging (a server that accepts connections and
// never answers) or unreachable: it ends within closeSeconds, the write it gave up is reported to
// its waiter, and a process whose journal made its own pool then exits by itself (the pool's
// sockets are not left behind). A pool of the application's is the application's to end.
import { createServer, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ConfigError } from '../../lib/index.js';
import { PostgresRunJournal } from '../../lib/postgres.js';
import type { RunStartedEntry } from '../../lib/runner/journal/runJournal.js';
import { runToExit } from '../childProcess.js';
import { closedPort } from '../lanes/redis/server.js';
import { newPool } from './pg.js';

const child = fileURLToPath(new URL('./closeChild.ts', import.meta.url));
const started: RunStartedEntry = { kind: 'started', runId: 'r1', agent: 'a', tenant: 't', input: 'go', history: [], state: {}, maxTurns: 3 };

// A server that accepts and never answers; it keeps the sockets to close them at the end.
async function hangingServer(): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    server,
    port,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe('PostgresRunJournal.close() with PostgreSQL hanging or unreachable', function () {
  this.timeout(30_000);

  it('refuses a closeSeconds it cannot use, naming the field', () => {
    expect(() => new PostgresRunJournal({ connectionString: 'postgres://127.0.0.1/x', closeSeconds: 0 })).to.throw(ConfigError, 'closeSeconds must be a positive finite number of seconds, got 0');
  });

  it('ends within closeSeconds with its own pool on a server that never answers, and the process then exits by itself', async () => {
    const hanging = await hangingServer();
    try {
      const ending = await runToExit(child, [String(hanging.port), '1'], 20_000);
      expect(ending.stderr).to.equal('');
      expect(ending.exitedAlone, `the child did not exit by itself; it printed ${JSON.stringify(ending.lines)}`).to.equal(true);
      expect(ending.lines[0]).to.match(/^written PostgreSQL did not answer within closeSeconds \(1 s\) of the journal's close: the write was given up, and may or may not have landed$/);
      // closeSeconds is 1: a close that gives up is within it and the margin; one that waits for the server never ends.
      expect(Number(ending.lines[1]?.replace('closed ', ''))).to.be.below(1000 + 2000);
    } finally {
      await hanging.close();
    }
  });

  it('ends at once with nothing listening, and the process then exits by itself', async () => {
    const ending = await runToExit(child, [String(await closedPort()), '1'], 20_000);
    expect(ending.exitedAlone, `the child did not exit by itself; it printed ${JSON.stringify(ending.lines)}`).to.equal(true);
    expect(ending.lines[0]).to.match(/^written connect ECONNREFUSED/);
  });

  it('ends within closeSeconds on a pool of the application, which it leaves open', async () => {
    const hanging = await hangingServer();
    const pool = newPool(`postgres://postgres@127.0.0.1:${hanging.port}/test`);
    try {
      const journal = new PostgresRunJournal({ pool, closeSeconds: 0.5 });
      const heard: Array<Error | undefined> = [];
      journal.append(started, { written: (error) => heard.push(error) });
      const start = performance.now();
      await journal.close();
      expect(performance.now() - start).to.be.below(500 + 2000);
      expect(heard.map((error) => error?.message)).to.deep.equal(["PostgreSQL did not answer within closeSeconds (0.5 s) of the journal's close: the write was given up, and may or may not have landed"]);
      // Closed: nothing more is written, and a late answer is not taken.
      journal.append(started, { written: (error) => heard.push(error) });
      expect(heard[1]?.message).to.equal('the journal is closed');
    } finally {
      // The connection the journal's query waits on is dropped with the server's sockets; then the pool ends.
      await hanging.close();
      await pool.end();
    }
  });
});
