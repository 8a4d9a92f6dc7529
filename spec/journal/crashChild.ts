// The process the crash spec kills: a runner journaled on PostgreSQL, printing its run's id, then
// "ready" once its journal holds what the spec kills it over. Every body notes itself in the log
// file named on the command line (an end hook notes `end:<id>`). Two scenes:
// - `batch`: one batch, two quick calls, then four slow ones in a lane of two (two running, never
//   answering; two queued);
// - `streamed`: a streamed turn whose stream never ends: q1 answers (its end hook runs), s1 runs
//   and s2 waits behind it in a lane of one, n3 and x4 (idempotent) run, never answering.
import { appendFileSync, readFileSync } from 'node:fs';
import { Observable } from 'rxjs';
import { ConcurrencyConfig, ToolRegistry, type ModelStreamPart } from '../../lib/index.js';
import { PostgresRunJournal } from '../../lib/postgres.js';
import { agent, runnerWith } from './helpers.js';
import { connectionString } from './pg.js';

const [prefix, log, scene = 'batch'] = process.argv.slice(2) as [string, string, string?];
const note = (args: unknown): string => {
  const { id } = args as { id: string };
  appendFileSync(log, `${id} ${process.pid}\n`);
  return `${id} done`;
};
const hang = (args: unknown): Promise<never> => (note(args), new Promise<never>(() => undefined));
const journal = new PostgresRunJournal({ connectionString, tablePrefix: prefix, leaseSeconds: 1 });
const hooks = { onToolEnd: (call: { callId: string }) => void appendFileSync(log, `end:${call.callId} ${process.pid}\n`) };
let runner: ReturnType<typeof runnerWith>;
let started: number;
if (scene === 'streamed') {
  const tools = new ToolRegistry().register({ name: 'quick' }, note).register({ name: 'slow' }, hang).register({ name: 'note' }, hang).register({ name: 'look', idempotent: true }, hang);
  const stream = (): Observable<ModelStreamPart> =>
    new Observable<ModelStreamPart>((subscriber) => {
      for (const [id, name] of [['q1', 'quick'], ['s1', 'slow'], ['s2', 'slow'], ['n3', 'note'], ['x4', 'look']] as const) subscriber.next({ type: 'tool-call', id, name, arguments: { id } });
    });
  runner = runnerWith(journal, tools, [stream] as never, { concurrency: new ConcurrencyConfig({ perTool: { slow: 1 } }), hooks });
  // The log's lines once it is ready: q1, its end hook, s1, n3, x4.
  started = 5;
} else {
  const tools = new ToolRegistry().register({ name: 'quick' }, note).register({ name: 'slow' }, hang);
  const calls = ['q1:quick', 'q2:quick', 's1:slow', 's2:slow', 's3:slow', 's4:slow'].map((c) => ({ id: c.split(':')[0]!, name: c.split(':')[1]!, arguments: { id: c.split(':')[0]! } }));
  runner = runnerWith(journal, tools, [{ toolCalls: calls }], { concurrency: new ConcurrencyConfig({ perTool: { slow: 2 } }) });
  // q1, q2, s1, s2.
  started = 4;
}
runner.run$(agent, 'go').subscribe((event) => {
  if (event.type === 'RUN_STARTED') console.log(JSON.stringify({ runId: event.runId }));
});
const ran = (): number => readFileSync(log, 'utf8').split('\n').filter(Boolean).length;
const wait = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
while (ran() < started) await wait(10);
await wait(50);
await journal.flushed();
console.log('ready');
