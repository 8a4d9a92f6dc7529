// A service's process for closeHanging.spec.ts: a PostgresRunJournal on a pool of its own
// (connectionString) pointed at a server that accepts and never answers (or a port where nothing
// listens); it appends a run's start, which is not written, then closes. It prints how long the
// close took and what the start's waiter heard; the spec sees whether the process then ends by
// itself (no process.exit).
import { PostgresRunJournal } from '../../lib/postgres.js';
import type { RunStartedEntry } from '../../lib/runner/journal/runJournal.js';

const [port, closeSeconds] = process.argv.slice(2) as [string, string];
const journal = new PostgresRunJournal({ connectionString: `postgres://postgres@127.0.0.1:${port}/test`, closeSeconds: Number(closeSeconds) });
const started: RunStartedEntry = { kind: 'started', runId: 'r1', agent: 'a', tenant: 't', input: 'go', history: [], state: {}, maxTurns: 3 };
journal.append(started, { written: (error) => console.log(`written ${error === undefined ? 'ok' : error.message}`) });
await new Promise((resolve) => setTimeout(resolve, 200));
const start = performance.now();
await journal.close();
console.log(`closed ${Math.round(performance.now() - start)}`);
