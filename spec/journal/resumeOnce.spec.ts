// A snapshot is resumed once: a runner with a journal or a snapshot store refuses the second
// resume of the same snapshot, one after the other or racing, so the approved body runs exactly
// once (counted by the body), in memory and on PostgreSQL.
import { expect } from 'chai';
import {
  Agent,
  AgentRunner,
  ApprovalRefusedError,
  InMemoryRunJournal,
  InMemorySnapshotStore,
  ScriptedProvider,
  ToolRegistry,
  type RunJournal,
  type RunSnapshot,
  type SnapshotStore,
} from '../../lib/index.js';
import { PostgresRunJournal } from '../../lib/postgres.js';
import { journalFixture } from './pg.js';

const desk = new Agent({ name: 'desk', instructions: '', model: 'scripted' });

// A runner whose `book` waits for a person and counts its runs in `booked`.
function deskRunner(booked: { n: number }, guard: { journal?: RunJournal; snapshots?: SnapshotStore }): AgentRunner {
  const tools = new ToolRegistry().register({ name: 'book', needsApproval: true }, () => `booking ${++booked.n}`);
  // The model asks to book, then answers; a second resume (if it ran) would be answered too.
  const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'book', arguments: {} }] }, { text: 'booked' }, { text: 'booked again' }]);
  return new AgentRunner({ provider, tools, ...guard });
}

async function interrupted(runner: AgentRunner): Promise<RunSnapshot> {
  const result = await runner.run(desk, 'book room 7');
  if (result.status !== 'interrupted') throw new Error(`expected an interrupted run, got ${result.status}`);
  return result.snapshot;
}

function expectRefused(reason: unknown, snapshot: RunSnapshot): void {
  expect(reason).to.be.instanceOf(ApprovalRefusedError);
  expect((reason as ApprovalRefusedError).reason).to.equal('answered');
  expect((reason as Error).message).to.include(snapshot.digest).and.include(snapshot.runId);
}

describe('runner.resume of one snapshot', () => {
  const { prefix, pool, journals } = journalFixture();

  const guards: Array<[string, () => { journal?: RunJournal; snapshots?: SnapshotStore }]> = [
    ['a snapshot store', () => ({ snapshots: new InMemorySnapshotStore() })],
    ['an in-memory journal', () => ({ journal: new InMemoryRunJournal() })],
    [
      'a PostgreSQL journal',
      () => {
        const journal = new PostgresRunJournal({ pool, tablePrefix: prefix });
        journals.push(journal);
        return { journal };
      },
    ],
  ];
  for (const [what, guard] of guards) {
    describe(`on a runner with ${what}`, function () {
      this.timeout(20_000);

      it('runs the approved call once: the second resume is refused, naming the snapshot', async () => {
        const booked = { n: 0 };
        const runner = deskRunner(booked, guard());
        const snapshot = await interrupted(runner);
        const first = await runner.resume(desk, snapshot, { approvals: { c1: true } });
        expect(first.status).to.equal('completed');
        const second = await runner.resume(desk, snapshot, { approvals: { c1: true } }).then(() => undefined, (reason: unknown) => reason);
        expectRefused(second, snapshot);
        expect(booked.n, 'the body ran once').to.equal(1);
      });

      it('runs the approved call once when two resumes race', async () => {
        const booked = { n: 0 };
        const runner = deskRunner(booked, guard());
        const snapshot = await interrupted(runner);
        const raced = await Promise.allSettled([runner.resume(desk, snapshot, { approvals: { c1: true } }), runner.resume(desk, snapshot, { approvals: { c1: true } })]);
        expect(raced.map((r) => r.status).sort()).to.deep.equal(['fulfilled', 'rejected']);
        expectRefused((raced.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason, snapshot);
        expect(booked.n, 'the body ran once').to.equal(1);
      });
    });
  }

  it('journals the resumed run under its id: its approved call written ahead, and a crash during it recovered', async () => {
    const journal = new InMemoryRunJournal();
    const booked: string[] = [];
    const tools = (hangs: boolean): ToolRegistry =>
      new ToolRegistry().register({ name: 'book', needsApproval: true }, (_args, ctx) => (booked.push(hangs ? 'first' : 'second'), hangs ? new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('stopped')))) : 'booked'));
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'book', arguments: {} }] }]), tools: tools(true), journal });
    const snapshot = await interrupted(runner);
    const controller = new AbortController();
    const resumed = runner.resume(desk, snapshot, { approvals: { c1: true }, signal: controller.signal });
    while (booked.length === 0) await new Promise((resolve) => setImmediate(resolve));
    await journal.flushed();
    expect((await journal.read(snapshot.runId)).map((e) => e.kind).slice(-2)).to.deep.equal(['resumed', 'dispatched']);
    journal.simulateCrash();
    const second = journal.reopen();
    const recovering = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: tools(false), journal: second });
    expect((await recovering.recoverable()).map((run) => run.runId)).to.deep.equal([snapshot.runId]);
    const result = await recovering.recover(desk, snapshot.runId);
    expect(result.events.filter((e) => e.type.startsWith('TOOL_')).map((e) => `${e.type} ${'callId' in e ? e.callId : ''}`)).to.deep.equal(['TOOL_INDETERMINATE c1']);
    expect(result.status).to.equal('completed');
    expect(booked, 'the booking ran once, in the resume the crash cut').to.deep.equal(['first']);
    controller.abort();
    await resumed;
  });

  it('on a bare runner, resumes the same snapshot twice (nothing guards it): the body runs twice', async () => {
    const booked = { n: 0 };
    const runner = deskRunner(booked, {});
    const snapshot = await interrupted(runner);
    await runner.resume(desk, snapshot, { approvals: { c1: true } });
    await runner.resume(desk, snapshot, { approvals: { c1: true } });
    expect(booked.n).to.equal(2);
  });
});
