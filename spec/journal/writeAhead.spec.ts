// The run's side of its journal: what it writes, in which order, and that a call's body starts
// only once its dispatch is recorded; a journal that fails costs the calls it could not record
// and nothing else.
import { expect } from 'chai';
import { from, Observable } from 'rxjs';
import sinon from 'sinon';
import { Agent, ConcurrencyConfig, InMemoryRunJournal, ToolRegistry, type ModelStreamPart, type RunEvent } from '../../lib/index.js';
import type { JournalEntry } from '../../lib/runner/journal/runJournal.js';
import { agent, HeldJournal, kinds, runnerWith, script, settle } from './helpers.js';

// A registry whose `work` body notes each call it runs.
function noting(ran: string[]): ToolRegistry {
  return new ToolRegistry().register({ name: 'work' }, (args: unknown) => {
    ran.push((args as { id: string }).id);
    return 'ok';
  });
}

// Lets every flush land until `done` settles.
async function landAll(journal: HeldJournal, done: Promise<unknown>): Promise<void> {
  let over = false;
  void done.then(() => (over = true));
  while (!over) {
    if (journal.flushes.length > 0) await journal.land();
    else await settle();
  }
  // What the run wrote as it ended lands too.
  for (let i = 0; i < 3; i++) {
    await settle();
    while (journal.flushes.length > 0) await journal.land();
  }
}

const outcomesOf = (events: readonly RunEvent[]) => events.filter((e) => e.type.startsWith('TOOL_')).map((e) => ('error' in e ? `${e.type} ${e.error.name}: ${e.error.message}` : e.type));

describe('a journaled run', () => {
  it('writes its start, its answer and every dispatch of the batch in one flush, before any body starts', async () => {
    const ran: string[] = [];
    const journal = new HeldJournal();
    const runner = runnerWith(journal, noting(ran), script([['a', 'work'], ['b', 'work'], ['c', 'work']]));
    const done = runner.run(agent, 'go');
    await settle();
    expect(journal.flushes).to.have.length(1);
    expect(kinds(journal.flushes[0]!.rows.map((row) => row.entry))).to.deep.equal(['started', 'answered', 'dispatched:0', 'dispatched:1', 'dispatched:2']);
    expect(ran, 'no body starts before its dispatch is recorded').to.deep.equal([]);
    await journal.land();
    expect(ran).to.deep.equal(['a', 'b', 'c']);
    await landAll(journal, done);
    const result = await done;
    expect(result.status).to.equal('completed');
    const runId = (result.events[0] as { runId: string }).runId;
    expect(kinds(await journal.read(runId))).to.deep.equal(['started', 'answered', 'dispatched:0', 'dispatched:1', 'dispatched:2', 'settled:0', 'settled:1', 'settled:2', 'answered', 'ended']);
  });

  it('writes each outcome as the transcript has it, with the text the model reads', async () => {
    const journal = new InMemoryRunJournal();
    const result = await runnerWith(journal, noting([]), script([['a', 'work'], ['b', 'missing']])).run(agent, 'go');
    await journal.flushed();
    const entries = await journal.read((result.events[0] as { runId: string }).runId);
    const settled = entries.filter((e): e is Extract<JournalEntry, { kind: 'settled' }> => e.kind === 'settled');
    expect(settled.map((e) => [e.outcome.kind, e.content])).to.deep.equal([['result', 'ok'], ['error', undefined]]);
    expect(entries[entries.length - 1]).to.deep.include({ kind: 'ended', event: { type: 'RUN_COMPLETED', output: 'done' } });
  });

  it('fails a call whose dispatch the journal could not record, never dispatched, and starts none of its body', async () => {
    const ran: string[] = [];
    const journal = new HeldJournal();
    const runner = runnerWith(journal, noting(ran), script([['a', 'work'], ['b', 'work']]));
    const done = runner.run(agent, 'go');
    await settle();
    await journal.fail(new Error('Connection terminated unexpectedly'));
    const result = await done;
    expect(ran).to.deep.equal([]);
    const refused = 'TOOL_ERROR JournalError: never dispatched: the journal could not record it (Connection terminated unexpectedly)';
    expect(outcomesOf(result.events)).to.deep.equal([refused, refused]);
    // The model saw the failures and answered; the run itself goes on as it would have.
    expect(result.status).to.equal('completed');
    // Nothing more of a run whose record broke is written: no gap in its journal.
    await settle();
    expect(journal.flushes).to.have.length(0);
  });

  it('classifies a call stopped while its record is written as never dispatched, and gives its permits back', async () => {
    const ran: string[] = [];
    const journal = new HeldJournal();
    const concurrency = new ConcurrencyConfig({ perTool: { work: 1 } });
    // The first run takes the first turn and is stopped; the second takes the next two.
    const turns = [script([['a', 'work']])[0]!, ...script([['b', 'work']])];
    const runner = runnerWith(journal, noting(ran), turns, { concurrency });
    const controller = new AbortController();
    const stopped = runner.run(agent, 'go', { signal: controller.signal });
    await settle();
    controller.abort('the user pressed stop');
    const result = await stopped;
    expect(outcomesOf(result.events)).to.deep.equal(['TOOL_ERROR CallStoppedError: never dispatched: the run was cancelled: the user pressed stop']);
    await journal.land();
    expect(ran, 'a record landing after the stop starts nothing').to.deep.equal([]);
    // The one permit of the work lane is free: a second run's call gets it.
    const next = runner.run(agent, 'again');
    await landAll(journal, next);
    expect((await next).status).to.equal('completed');
    expect(ran).to.deep.equal(['b']);
  });

  it('journals a nested run as part of its caller: only the top-level run has entries', async () => {
    const journal = new InMemoryRunJournal();
    const append = sinon.spy(journal, 'append');
    const helper = new Agent({ name: 'helper', instructions: '', model: 'scripted' });
    const tools = noting([]).register({ name: 'delegate' }, async (_args, ctx) => (await ctx.runAgent(helper, 'help')).output);
    const turns = [{ toolCalls: [{ id: 'd', name: 'delegate', arguments: {} }] }, { text: 'helped' }, { text: 'done' }];
    const result = await runnerWith(journal, tools, turns).run(agent, 'go');
    expect(result.status).to.equal('completed');
    const runIds = new Set(append.getCalls().map((call) => (call.args[0] as JournalEntry).runId));
    expect([...runIds]).to.deep.equal([(result.events[0] as { runId: string }).runId]);
    expect(append.getCalls().map((call) => (call.args[0] as JournalEntry).kind)).to.deep.equal(['started', 'answered', 'dispatched', 'settled', 'answered', 'ended']);
  });

  it('records each call of a streamed turn as the stream completes it, ahead of its dispatch, and its answer once the stream ends', async () => {
    const journal = new InMemoryRunJournal();
    const parts: ModelStreamPart[] = [
      { type: 'tool-call', id: 'a', name: 'work', arguments: { id: 'a' } },
      { type: 'tool-call', id: 'b', name: 'work', arguments: { id: 'b' } },
    ];
    const turns = [() => from(parts) as Observable<ModelStreamPart>, { text: 'done' }];
    const result = await runnerWith(journal, noting([]), turns as never).run(agent, 'go');
    await journal.flushed();
    const entries = await journal.read((result.events[0] as { runId: string }).runId);
    expect(kinds(entries)).to.deep.equal(['started', 'called:0', 'dispatched:0', 'called:1', 'dispatched:1', 'answered', 'settled:0', 'settled:1', 'answered', 'ended']);
    expect(entries[1]).to.deep.include({ call: { id: 'a', name: 'work', arguments: { id: 'a' } } });
    expect(entries[2]).to.deep.equal({ kind: 'dispatched', runId: entries[0]!.runId, turn: 1, index: 0, callId: 'a', tool: 'work' });
  });
});
