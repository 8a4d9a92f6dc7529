// The process a crash cell kills: a runner journaled on PostgreSQL (a lease of 1 s) runs one turn
// of six calls to `work` under the lane kind named on the command line. c1 and c2 answer at once;
// c3 and c4 never answer; the process kills itself (SIGKILL) once c1 and c2 have answered and
// c3 and c4 have both started, and its journal holds all that (under a rate, at once as the
// second of c3 and c4 starts: the next admission could come while it waited, and c1's and c2's
// outcomes were written before c3's and c4's dispatches). It prints its run's id first.
import { PostgresRunJournal } from '../../lib/postgres.js';
import { AgentRunner, ScriptedProvider } from '../../lib/index.js';
import { connectionString } from '../journal/pg.js';
import { agent, loggedTools, turn } from './crash.js';
import { concurrencyOf, TENANT, type Kind } from './kinds.js';

const [prefix, log, kind] = process.argv.slice(2) as [string, string, Kind];
const journal = new PostgresRunJournal({ connectionString, tablePrefix: prefix, leaseSeconds: 1 });
let hanging = 0;
let answered = 0;
const die = (): void => void process.kill(process.pid, 'SIGKILL');
// Once every outcome and dispatch is in: the answers' outcomes are recorded a turn of the loop after they answer.
const dieOnceWritten = (): void => void setImmediate(() => void journal.flushed().then(die));
const tools = loggedTools(kind, log, (callId) => {
  if (callId === 'c1' || callId === 'c2') {
    if (++answered === 2 && hanging === 2) dieOnceWritten();
    return Promise.resolve('done');
  }
  if (++hanging === 2) {
    if (kind === 'rate') die();
    else if (answered === 2) dieOnceWritten();
  }
  return new Promise(() => undefined);
});
const runner = new AgentRunner({ provider: new ScriptedProvider([turn]), tools, journal, concurrency: concurrencyOf(kind) });
runner.run$(agent, 'go', { tenant: TENANT }).subscribe((event) => {
  if (event.type === 'RUN_STARTED') console.log(JSON.stringify({ runId: event.runId }));
});
