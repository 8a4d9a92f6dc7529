// runner.recover over the in-memory journal: a run whose process stopped mid-batch (simulated:
// the journal stops writing and its owner is gone) carried on by another runner.
import { expect } from 'chai';
import { Agent, ConcurrencyConfig, ConfigError, InMemoryRunJournal, JournalError, ScriptedProvider, stopClassOf, ToolRegistry, type RunEvent } from '../../lib/index.js';
import type { JournalEntry } from '../../lib/runner/journal/runJournal.js';
import { agent, runnerWith, settle, untilStopped } from './helpers.js';

type Counts = Record<string, number>;

// The first process's tools: `quick` answers at once, `slow` and `look` (idempotent) never do.
function firstTools(ran: Counts): ToolRegistry {
  const count = (args: unknown): string => {
    const { id } = args as { id: string };
    ran[id] = (ran[id] ?? 0) + 1;
    return `${id} done`;
  };
  return new ToolRegistry()
    .register({ name: 'quick' }, count)
    .register({ name: 'slow' }, (args, ctx) => (count(args), untilStopped(ctx.signal)))
    .register({ name: 'look', idempotent: true }, (args, ctx) => (count(args), untilStopped(ctx.signal)));
}

// The recovering process's tools: the same names, every body answering at once.
function secondTools(ran: Counts): ToolRegistry {
  const count = (args: unknown): string => {
    const { id } = args as { id: string };
    ran[id] = (ran[id] ?? 0) + 1;
    return `${id} done`;
  };
  return new ToolRegistry().register({ name: 'quick' }, count).register({ name: 'slow' }, count).register({ name: 'look', idempotent: true }, count);
}

const batch = { toolCalls: ['q1:quick', 'q2:quick', 's1:slow', 's2:slow', 's3:slow', 's4:slow', 'l1:look'].map((c) => ({ id: c.split(':')[0]!, name: c.split(':')[1]!, arguments: { id: c.split(':')[0]! } })) };
// Two slow calls at once: s3 and s4 wait in the slow lane.
const concurrency = new ConcurrencyConfig({ perTool: { slow: 2 } });

const line = (e: RunEvent): string => {
  switch (e.type) {
    case 'TOOL_RESULT':
      return `${e.callId} result ${String(e.result)}`;
    case 'TOOL_ERROR':
      return `${e.callId} error ${e.error.message}`;
    case 'TOOL_INDETERMINATE':
      return `${e.callId} indeterminate ${e.message}`;
    case 'MODEL_RESPONSE':
      return `turn ${e.turn}`;
    default:
      return e.type;
  }
};

// The first runners' runs, left running as a killed process leaves them: ended after each spec.
const left: Array<{ unsubscribe(): void }> = [];

// A run of `batch` on a first runner, left as its process would be when killed mid-batch.
async function crashed(ran: Counts): Promise<{ journal: InMemoryRunJournal; runId: string }> {
  const journal = new InMemoryRunJournal();
  const runner = runnerWith(journal, firstTools(ran), [batch], { concurrency });
  let runId = '';
  left.push(
    runner.run$(agent, 'go').subscribe((event) => {
      if (event.type === 'RUN_STARTED') runId = event.runId;
    }),
  );
  for (let i = 0; i < 5; i++) await settle();
  await journal.flushed();
  journal.simulateCrash();
  return { journal, runId };
}

describe('runner.recover', () => {
  afterEach(() => {
    for (const run of left.splice(0)) run.unsubscribe();
  });

  it('carries a run on after its process stopped: settled calls read back, calls in flight classified, queued ones run, in call order', async () => {
    const ran: Counts = {};
    const { journal, runId } = await crashed(ran);
    expect(ran).to.deep.equal({ q1: 1, q2: 1, s1: 1, s2: 1, l1: 1 });
    const second = journal.reopen();
    expect((await second.recoverable()).map((run) => run.runId)).to.deep.equal([runId]);
    const runner = runnerWith(second, secondTools(ran), [{ text: 'done' }], { concurrency });
    const result = await runner.recover(agent, runId);
    expect(result.status).to.equal('completed');
    expect(result.events.map(line)).to.deep.equal([
      'RUN_STARTED',
      'turn 1',
      'q1 result q1 done',
      'q2 result q2 done',
      's1 indeterminate slow was in flight when the process running it stopped. The side effect may have landed',
      's2 indeterminate slow was in flight when the process running it stopped. The side effect may have landed',
      's3 result s3 done',
      's4 result s4 done',
      'l1 error look was in flight when the process running it stopped. Safe to call again',
      'turn 2',
      'RUN_COMPLETED',
    ]);
    expect(ran, 'across both processes each body ran once').to.deep.equal({ q1: 1, q2: 1, s1: 1, s2: 1, s3: 1, s4: 1, l1: 1 });
    expect(result.messages.filter((m) => m.role === 'tool').map((m) => m.toolCallId)).to.deep.equal(['q1', 'q2', 's1', 's2', 's3', 's4', 'l1']);
    // The model was asked only for the turn after the batch.
    expect((runner.provider as ScriptedProvider).requests).to.have.length(1);
    await second.flushed();
    expect(await second.recoverable()).to.deep.equal([]);
    await expectRejected(runner.recover(agent, runId), 'cannot be recovered: it ended');
  });

  it('gives each recovered call its stop class as a field of its event, and none to the calls that ended by themselves', async () => {
    const ran: Counts = {};
    const { journal, runId } = await crashed(ran);
    const result = await runnerWith(journal.reopen(), secondTools(ran), [{ text: 'done' }], { concurrency }).recover(agent, runId);
    const classes = result.events.flatMap((e) => (e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE' ? [[e.callId, stopClassOf(e) ?? '-', 'stopClass' in e ? e.stopClass : '-']] : []));
    expect(classes).to.deep.equal([
      ['q1', '-', '-'],
      ['q2', '-', '-'],
      ['s1', 'indeterminate', 'indeterminate'],
      ['s2', 'indeterminate', 'indeterminate'],
      ['s3', '-', '-'],
      ['s4', '-', '-'],
      ['l1', 'safe_to_call_again', 'safe_to_call_again'],
    ]);
  });

  it('reads a journal written before events carried their class, and rebuilds every event with it', async () => {
    // The entries as an earlier version wrote them (outcomes have not changed shape): turn 1's
    // calls settled (a timeout, a call stopped never dispatched by a deadline, a result), turn 2's
    // call in flight when the process stopped.
    const first = new InMemoryRunJournal();
    const runId = 'r-old';
    const deadline = { kind: 'deadline', why: 'DeadlineConfig.toolCallSeconds passed', error: { name: 'DeadlineExceededError', message: 'x' } };
    const entries: JournalEntry[] = [
      { kind: 'started', runId, agent: 'journaled', tenant: 'default', input: 'go', history: [], state: {}, maxTurns: 20 },
      { kind: 'answered', runId, turn: 1, response: { toolCalls: [{ id: 't1', name: 'slow', arguments: {} }, { id: 'n1', name: 'look', arguments: {} }, { id: 'r1', name: 'quick', arguments: {} }] } },
      { kind: 'dispatched', runId, turn: 1, index: 0, callId: 't1', tool: 'slow' },
      { kind: 'settled', runId, turn: 1, index: 0, outcome: { index: 0, callId: 't1', tool: 'slow', kind: 'error', dispatched: true, error: { name: 'ToolTimedOutError', message: 'slow timed out after 2s (its perToolSeconds ceiling). The side effect may have landed' } } },
      { kind: 'settled', runId, turn: 1, index: 1, outcome: { index: 1, callId: 'n1', tool: 'look', kind: 'error', dispatched: false, error: { name: 'CallStoppedError', message: 'never dispatched: DeadlineConfig.toolCallSeconds passed' }, stopped: deadline } as never },
      { kind: 'dispatched', runId, turn: 1, index: 2, callId: 'r1', tool: 'quick' },
      { kind: 'settled', runId, turn: 1, index: 2, outcome: { index: 2, callId: 'r1', tool: 'quick', kind: 'result', dispatched: true, result: 'r1 done', delta: undefined }, content: '"r1 done"' },
      { kind: 'answered', runId, turn: 2, response: { toolCalls: [{ id: 'l2', name: 'look', arguments: {} }, { id: 's2', name: 'slow', arguments: {} }] } },
      { kind: 'dispatched', runId, turn: 2, index: 0, callId: 'l2', tool: 'look' },
      { kind: 'dispatched', runId, turn: 2, index: 1, callId: 's2', tool: 'slow' },
    ];
    for (const entry of entries) first.append(entry);
    await first.flushed();
    first.simulateCrash();
    const ran: Counts = {};
    const result = await runnerWith(first.reopen(), secondTools(ran), [{ text: 'done' }], { concurrency }).recover(agent, runId);
    expect(result.status).to.equal('completed');
    const classes = result.events.flatMap((e) => (e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE' ? [[e.turn, e.callId, e.type, 'stopClass' in e ? e.stopClass : '-']] : []));
    expect(classes).to.deep.equal([
      [1, 't1', 'TOOL_ERROR', 'indeterminate'],
      [1, 'n1', 'TOOL_ERROR', 'never_dispatched'],
      [1, 'r1', 'TOOL_RESULT', '-'],
      [2, 'l2', 'TOOL_ERROR', 'safe_to_call_again'],
      [2, 's2', 'TOOL_INDETERMINATE', 'indeterminate'],
    ]);
    expect(ran, 'nothing in flight at the crash runs again').to.deep.equal({});
  });

  it('runs an idempotent call that was in flight again when told to', async () => {
    const ran: Counts = {};
    const { journal, runId } = await crashed(ran);
    const runner = runnerWith(journal.reopen(), secondTools(ran), [{ text: 'done' }], { concurrency });
    const result = await runner.recover(agent, runId, { callIdempotentAgain: true });
    expect(result.events.map(line)).to.include('l1 result l1 done');
    expect(ran['l1']).to.equal(2);
    expect(ran['s1'], 'a call that is not idempotent never runs again').to.equal(1);
  });

  it('takes over no run its live owner holds, and lets one of two processes recover a run', async () => {
    const ran: Counts = {};
    const live = new InMemoryRunJournal();
    const owner = runnerWith(live, firstTools(ran), [batch], { concurrency });
    let liveId = '';
    const subscription = owner.run$(agent, 'go').subscribe((event) => (liveId = event.type === 'RUN_STARTED' ? event.runId : liveId));
    await live.flushed();
    const other = runnerWith(live.reopen(), secondTools(ran), [{ text: 'done' }], { concurrency });
    expect(await other.recoverable()).to.deep.equal([]);
    await expectRejected(other.recover(agent, liveId), "is another process's");
    subscription.unsubscribe();

    const { journal, runId } = await crashed(ran);
    const racers = [journal.reopen(), journal.reopen()].map((j) => runnerWith(j, secondTools(ran), [{ text: 'done' }], { concurrency }).recover(agent, runId));
    const settled = await Promise.allSettled(racers);
    expect(settled.map((s) => s.status).sort()).to.deep.equal(['fulfilled', 'rejected']);
  });

  it('takes nothing when it refuses: refused for another agent, or an agent whose tools are missing here, the run stays recoverable and the right agent recovers it on the same runner', async () => {
    const ran: Counts = {};
    const { journal, runId } = await crashed(ran);
    const runner = runnerWith(journal.reopen(), secondTools(ran), [{ text: 'done' }], { concurrency });
    const stranger = new Agent({ name: 'stranger', instructions: '', model: 'scripted' });
    const refused = await runner.recover(stranger, runId).then(() => undefined, (reason: unknown) => reason);
    expect(refused).to.be.instanceOf(ConfigError);
    expect((refused as ConfigError).field).to.equal('agent');
    const lacking = new Agent({ name: agent.name, instructions: '', model: 'scripted', tools: ['quick', 'slow', 'look', 'absent'] });
    const missing = await runner.recover(lacking, runId).then(() => undefined, (reason: unknown) => reason);
    expect(missing).to.be.instanceOf(ConfigError);
    expect((missing as ConfigError).field).to.equal('tools');
    expect((await runner.recoverable()).map((run) => run.runId), 'still recoverable').to.deep.equal([runId]);
    const result = await runner.recover(agent, runId);
    expect(result.status).to.equal('completed');
    expect(ran, 'the queued calls ran once, in the recovery that was not refused').to.deep.equal({ q1: 1, q2: 1, s1: 1, s2: 1, s3: 1, s4: 1, l1: 1 });
  });

  it('starts again a run whose process stopped before its first answer was journaled', async () => {
    const journal = new InMemoryRunJournal();
    const asking = runnerWith(journal, secondTools({}), [() => new Promise(() => undefined)] as never);
    let runId = '';
    const subscription = asking.run$(agent, 'go').subscribe((event) => (runId = event.type === 'RUN_STARTED' ? event.runId : runId));
    await journal.flushed();
    journal.simulateCrash();
    const result = await runnerWith(journal.reopen(), secondTools({}), [{ text: 'done' }]).recover(agent, runId);
    expect(result.status).to.equal('completed');
    expect(result.output).to.equal('done');
    subscription.unsubscribe();
  });
});

async function expectRejected(promise: Promise<unknown>, words: string): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).to.be.instanceOf(JournalError);
  expect((error as Error).message).to.include(words);
}
