// The process the crash spec kills: a runner journaled on PostgreSQL runs one batch, two quick
// calls, then four slow ones in a lane of two (two running, never answering; two queued), and
// prints its run's id, then "ready" once its journal holds the quick calls' outcomes and the
// running calls' dispatches. Every body notes itself in the log file named on the command line.
import { appendFileSync, readFileSync } from 'node:fs';
import { ConcurrencyConfig, PostgresRunJournal, ToolRegistry } from '../../lib/index.js';
import { agent, runnerWith } from './helpers.js';
import { connectionString } from './pg.js';

const [prefix, log] = process.argv.slice(2) as [string, string];
const note = (args: unknown): string => {
  const { id } = args as { id: string };
  appendFileSync(log, `${id} ${process.pid}\n`);
  return `${id} done`;
};
const tools = new ToolRegistry().register({ name: 'quick' }, note).register({ name: 'slow' }, (args) => (note(args), new Promise(() => undefined)));
const journal = new PostgresRunJournal({ connectionString, tablePrefix: prefix, leaseSeconds: 1 });
const calls = ['q1:quick', 'q2:quick', 's1:slow', 's2:slow', 's3:slow', 's4:slow'].map((c) => ({ id: c.split(':')[0]!, name: c.split(':')[1]!, arguments: { id: c.split(':')[0]! } }));
const runner = runnerWith(journal, tools, [{ toolCalls: calls }], { concurrency: new ConcurrencyConfig({ perTool: { slow: 2 } }) });
runner.run$(agent, 'go').subscribe((event) => {
  if (event.type === 'RUN_STARTED') console.log(JSON.stringify({ runId: event.runId }));
});
const ran = (): number => readFileSync(log, 'utf8').split('\n').filter(Boolean).length;
const wait = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
while (ran() < 4) await wait(10);
await wait(50);
await journal.flushed();
console.log('ready');
