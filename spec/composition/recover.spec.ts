// The composition matrix, a journaled run killed and recovered: a child process (recoverChild.ts)
// runs one turn of six calls to `work` under the cell's lane kind, journaled on PostgreSQL, and
// kills itself with SIGKILL once c1 and c2 have answered and c3 and c4 (which never answer) have
// started (c5, c6 queued, or refused by the budget); this process recovers the run once the dead
// owner's lease lapses, with bodies of 40 ms. Counted from the bodies' side, across both processes,
// from the log every body writes: the kind's bound holds and is reached, each body runs once (a
// call settled before the crash never again), every call ends once in call order (the calls in
// flight as indeterminate), every permit is back. The lanes are the default, in process: what a
// rate or a budget remembers dies with the killed process (docs/reliability.md, "The composition
// matrix", says what that costs).
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { AgentRunner, ScriptedProvider } from '../../lib/index.js';
import { PostgresRunJournal } from '../../lib/postgres.js';
import { journalFixture } from '../journal/pg.js';
import { sleep } from '../lanes/redis/server.js';
import { agent, calls, loggedTools, tallyOfLog } from './crash.js';
import { BUDGET, concurrencyOf, expectInCallOrder, expectKind, kinds, outcomes, type Kind } from './kinds.js';

const child = fileURLToPath(new URL('./recoverChild.ts', import.meta.url));

const behaviour: Record<Kind, string> = {
  turn: 'before the kill and after the recovery, the turn runs at most two at once, and two at once',
  tool: "before the kill and after the recovery, the tool's calls run at most two at once, and two at once",
  tenant: "before the kill and after the recovery, the tenant's calls run at most two at once, and two at once",
  rate: 'across the kill and the recovery, no 200 ms holds more than two starts, and one holds two',
  adaptive: 'before the kill and after the recovery, the adaptive limit (max 2) is never passed, and is reached',
  budget: 'the four calls the budget covered ran in the killed process; the two it refused are not run by the recovery',
};

/** Runs the child for `kind` until it kills itself; its run's id and pid. */
async function killedRun(prefix: string, log: string, kind: Kind): Promise<{ runId: string; pid: number }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', child, prefix, log, kind], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.once('exit', (_code, signal) => resolve(signal)));
  let runId = '';
  for await (const line of createInterface({ input: proc.stdout! })) if (line.startsWith('{')) runId = (JSON.parse(line) as { runId: string }).runId;
  expect(await exited, 'the child killed itself').to.equal('SIGKILL');
  return { runId, pid: proc.pid! };
}

describe('composition matrix: a journaled run killed and recovered', function () {
  this.timeout(60_000);
  const { prefix, pool, journals } = journalFixture();
  const dir = mkdtempSync(join(tmpdir(), 'agent-lanes-composition-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const kind of kinds) {
    it(`${kind} × killed and recovered: ${behaviour[kind]}`, async () => {
      const log = join(dir, `${kind}.log`);
      writeFileSync(log, '');
      const { runId, pid } = await killedRun(prefix, log, kind);
      const journal = new PostgresRunJournal({ pool, tablePrefix: prefix, leaseSeconds: 1 });
      journals.push(journal);
      const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: loggedTools(kind, log, () => sleep(40).then(() => 'done')), journal, concurrency: concurrencyOf(kind) });
      // The dead owner's lease lapses a second after its last renewal.
      for (let i = 0; i < 100 && !(await runner.recoverable()).some((run) => run.runId === runId); i++) await sleep(50);
      const result = await runner.recover(agent, runId);

      expect(result.status).to.equal('completed');
      const tally = tallyOfLog(log, pid);
      const covered = calls.slice(0, BUDGET);
      expectKind(kind, tally, kind === 'budget' ? covered : calls);
      expectInCallOrder(result.events, calls);
      const queued = kind === 'budget' ? ['c5 error budget', 'c6 error budget'] : ['c5 result', 'c6 result'];
      expect(outcomes(result.events)).to.deep.equal(['c1 result', 'c2 result', 'c3 indeterminate', 'c4 indeterminate', ...queued]);
      expect(runner.lanes.occupancy().filter((lane) => lane.holders > 0 || lane.waiters > 0), 'lanes still held').to.deep.equal([]);
    });
  }
});
