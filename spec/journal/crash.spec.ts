// A runner in a child process is killed with SIGKILL mid-batch (two calls settled, two running,
// two queued behind a lane), or mid-stream (a streamed turn: one call settled, three running, one
// queued), and this process recovers the run from PostgreSQL: across both, each settled call's
// body ran once, each queued call's once, the running ones are classified, and the transcript is
// whole and in call order. Two recoveries raced: one wins.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ConcurrencyConfig, JournalError, ToolRegistry, type RunEvent } from '../../lib/index.js';
import { PostgresRunJournal } from '../../lib/postgres.js';
import { agent, runnerWith } from './helpers.js';
import { journalFixture } from './pg.js';

const child = fileURLToPath(new URL('./crashChild.ts', import.meta.url));

// Starts the child, reads its run id, and kills it with SIGKILL once it says it is ready.
async function killedMidBatch(prefix: string, log: string, scene = 'batch'): Promise<{ runId: string; pid: number }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', child, prefix, log, scene], { stdio: ['ignore', 'pipe', 'inherit'] });
  let runId = '';
  for await (const line of createInterface({ input: proc.stdout! })) {
    if (line.startsWith('{')) runId = (JSON.parse(line) as { runId: string }).runId;
    if (line === 'ready') break;
  }
  const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.once('exit', (_code, signal) => resolve(signal)));
  proc.kill('SIGKILL');
  expect(await exited).to.equal('SIGKILL');
  return { runId, pid: proc.pid! };
}

const line = (e: RunEvent): string =>
  e.type === 'TOOL_RESULT' ? `${e.callId} result` : e.type === 'TOOL_INDETERMINATE' ? `${e.callId} indeterminate: ${e.message}` : e.type === 'TOOL_ERROR' ? `${e.callId} error: ${e.error.message}` : e.type;

describe('a run whose process was killed mid-batch', function () {
  this.timeout(60_000);
  const { prefix, pool, journals } = journalFixture();
  const dir = mkdtempSync(join(tmpdir(), 'agent-lanes-crash-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('is recovered by another process: settled calls not run again, queued ones run once, running ones classified, the transcript whole', async () => {
    const log = join(dir, 'bodies.log');
    writeFileSync(log, '');
    const { runId, pid } = await killedMidBatch(prefix, log);
    const note = (args: unknown): string => {
      writeFileSync(log, `${(args as { id: string }).id} ${process.pid}\n`, { flag: 'a' });
      return 'done here';
    };
    const tools = new ToolRegistry().register({ name: 'quick' }, note).register({ name: 'slow' }, note);
    const recovering = () => {
      const journal = new PostgresRunJournal({ pool, tablePrefix: prefix });
      journals.push(journal);
      return runnerWith(journal, tools, [{ text: 'all done' }], { concurrency: new ConcurrencyConfig({ perTool: { slow: 2 } }) });
    };
    const [first, second] = [recovering(), recovering()];
    // The killed process's lease lapses a second after its last renewal.
    let found = false;
    for (let i = 0; i < 100 && !found; i++) {
      found = (await first.recoverable()).some((run) => run.runId === runId);
      if (!found) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(found, 'the run is recoverable once its owner is gone').to.equal(true);
    const raced = await Promise.allSettled([first.recover(agent, runId), second.recover(agent, runId)]);
    const won = raced.filter((r): r is PromiseFulfilledResult<Awaited<ReturnType<typeof first.recover>>> => r.status === 'fulfilled');
    const lost = raced.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(won, 'one recovery wins').to.have.length(1);
    expect(lost).to.have.length(1);
    expect(lost[0]!.reason).to.be.instanceOf(JournalError);
    const result = won[0]!.value;
    const lost1 = 'slow was in flight when the process running it stopped. The side effect may have landed';
    expect(result.events.map(line)).to.deep.equal([
      'RUN_STARTED', 'MODEL_RESPONSE',
      'q1 result', 'q2 result',
      `s1 indeterminate: ${lost1}`, `s2 indeterminate: ${lost1}`,
      's3 result', 's4 result',
      'MODEL_RESPONSE', 'RUN_COMPLETED',
    ]);
    const bodies = readFileSync(log, 'utf8').split('\n').filter(Boolean).map((row) => row.split(' '));
    expect(bodies.map(([id, by]) => `${id} ${by === String(pid) ? 'killed' : 'recovering'}`).sort()).to.deep.equal([
      'q1 killed', 'q2 killed', 's1 killed', 's2 killed', 's3 recovering', 's4 recovering',
    ]);
  });

  it('recovers a streamed turn cut by the kill: every call it had written back in call order, a call settled before the kill read back, queued ones run once', async () => {
    const log = join(dir, 'streamed.log');
    writeFileSync(log, '');
    const { runId, pid } = await killedMidBatch(prefix, log, 'streamed');
    const note = (args: unknown): string => {
      writeFileSync(log, `${(args as { id: string }).id} ${process.pid}\n`, { flag: 'a' });
      return `${(args as { id: string }).id} done`;
    };
    const tools = new ToolRegistry().register({ name: 'quick' }, note).register({ name: 'slow' }, note).register({ name: 'note' }, note).register({ name: 'look', idempotent: true }, note);
    const journal = new PostgresRunJournal({ pool, tablePrefix: prefix });
    journals.push(journal);
    const runner = runnerWith(journal, tools, [{ text: 'all done' }], { concurrency: new ConcurrencyConfig({ perTool: { slow: 1 } }) });
    let found = false;
    for (let i = 0; i < 100 && !found; i++) {
      found = (await runner.recoverable()).some((run) => run.runId === runId);
      if (!found) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(found, 'the run is recoverable once its owner is gone').to.equal(true);
    const result = await runner.recover(agent, runId);
    const inFlight = (tool: string): string => `${tool} was in flight when the process running it stopped. The side effect may have landed`;
    expect(result.events.map(line)).to.deep.equal([
      'RUN_STARTED', 'MODEL_RESPONSE',
      'q1 result', `s1 indeterminate: ${inFlight('slow')}`, 's2 result', `n3 indeterminate: ${inFlight('note')}`, 'x4 error: look was in flight when the process running it stopped. Safe to call again',
      'MODEL_RESPONSE', 'RUN_COMPLETED',
    ]);
    expect(result.events.find((e) => e.type === 'TOOL_RESULT' && e.callId === 'q1')).to.deep.include({ result: 'q1 done' });
    const bodies = readFileSync(log, 'utf8').split('\n').filter(Boolean).map((row) => row.split(' '));
    expect(bodies.map(([id, by]) => `${id} ${by === String(pid) ? 'killed' : 'recovering'}`).sort()).to.deep.equal([
      'end:q1 killed', 'n3 killed', 'q1 killed', 's1 killed', 's2 recovering', 'x4 killed',
    ]);
  });
});
