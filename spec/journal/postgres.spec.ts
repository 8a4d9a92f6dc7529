// PostgresRunJournal against a real PostgreSQL: its tables made on first use, a flush as one
// statement, runs read back in order, leases claimed by one process of two, renewed while a run
// lives, and a cut connection costing only the calls it could not record.
import { expect } from 'chai';
import type pg from 'pg';
import { ConfigError, ToolRegistry, type RunEvent } from '../../lib/index.js';
import { PostgresRunJournal } from '../../lib/postgres.js';
import type { JournalEntry } from '../../lib/runner/journal/runJournal.js';
import { agent, kinds, runnerWith, script, untilStopped } from './helpers.js';
import { connectionString, CuttableLink, dropTables, newPool, uniquePrefix } from './pg.js';

const runIdOf = (events: readonly RunEvent[]): string => (events[0] as { runId: string }).runId;

describe('PostgresRunJournal', function () {
  this.timeout(30_000);
  let pool: pg.Pool;
  const prefix = uniquePrefix();
  const journals: PostgresRunJournal[] = [];
  const journal = (options: { leaseSeconds?: number; pool?: pg.Pool; connectionString?: string } = {}): PostgresRunJournal => {
    const made = new PostgresRunJournal({ tablePrefix: prefix, ...(options.connectionString === undefined ? { pool: options.pool ?? pool } : { connectionString: options.connectionString }), leaseSeconds: options.leaseSeconds ?? 30 });
    journals.push(made);
    return made;
  };

  before(() => {
    pool = newPool();
  });

  after(async () => {
    for (const made of journals) await made.close();
    await dropTables(pool, prefix);
    await pool.end();
  });

  it('refuses options it cannot use, naming the field', () => {
    expect(() => new PostgresRunJournal({} as never)).to.throw(ConfigError, 'either pool (a pg.Pool) or connectionString');
    expect(() => new PostgresRunJournal({ connectionString, tablePrefix: 'Bad-Prefix' })).to.throw(ConfigError, 'tablePrefix must be lower-case letters');
    expect(() => new PostgresRunJournal({ connectionString, leaseSeconds: 0 })).to.throw(ConfigError, 'leaseSeconds must be a number of seconds, at least 1, got 0');
  });

  it('creates its tables on first use and reads a run back in the order it was written', async () => {
    const tools = new ToolRegistry().register({ name: 'work' }, () => ({ rows: 2 }));
    const made = journal();
    const result = await runnerWith(made, tools, script([['a', 'work'], ['b', 'work']])).run(agent, 'go');
    await made.flushed();
    const entries = await made.read(runIdOf(result.events));
    expect(kinds(entries)).to.deep.equal(['started', 'answered', 'dispatched:0', 'dispatched:1', 'settled:0', 'settled:1', 'answered', 'ended']);
    const settled = entries[4] as Extract<JournalEntry, { kind: 'settled' }>;
    expect(settled.outcome).to.deep.include({ kind: 'result', callId: 'a', result: { rows: 2 } });
    expect(settled.content).to.equal('{"rows":2}');
  });

  it('writes each flush as one statement, the dispatches of a batch together, across every run of the runner', async () => {
    const statements: string[][] = [];
    // The pool as the journal sees it, noting the kinds each flush statement carried.
    const watched = {
      query: (text: string, values?: readonly unknown[]) => {
        if (text.startsWith('WITH began')) {
          const rows = JSON.parse(values![5] as string) as Array<{ b: JournalEntry[] }>;
          statements.push(rows.flatMap((row) => row.b.map((entry) => `${entry.runId} ${entry.kind}`)));
        }
        return pool.query(text, values as unknown[]);
      },
      connect: () => pool.connect(),
      end: () => Promise.resolve(),
    };
    const made = journal({ pool: watched as never });
    const tools = new ToolRegistry().register({ name: 'work' }, () => 1);
    const runs = 40;
    const results = await Promise.all(Array.from({ length: runs }, () => runnerWith(made, tools, script([['a', 'work'], ['b', 'work'], ['c', 'work'], ['d', 'work']])).run(agent, 'go')));
    await made.flushed();
    const entries = statements.flat().length;
    // started, answered, four dispatched, four settled, answered, ended.
    expect(entries).to.equal(runs * 12);
    expect(statements.length, 'far fewer statements than entries').to.be.below(entries / 4);
    for (const result of results) {
      const id = runIdOf(result.events);
      const holding = statements.filter((rows) => rows.includes(`${id} dispatched`));
      expect(holding, 'one statement carries all four dispatches of a batch').to.have.length(1);
      expect(holding[0]!.filter((row) => row === `${id} dispatched`)).to.have.length(4);
    }
  });

  it('lets one of two processes claim a run whose lease lapsed, and no one take a run its live owner holds', async () => {
    const owner = journal();
    const tools = new ToolRegistry().register({ name: 'hang' }, (_args, ctx) => untilStopped(ctx.signal));
    const controller = new AbortController();
    const running = runnerWith(owner, tools, script([['a', 'hang']])).run(agent, 'go', { signal: controller.signal });
    await owner.flushed();
    const [started] = await pool.query(`SELECT run_id FROM "${prefix}runs" WHERE owner = $1`, [owner.owner]).then((r) => r.rows as Array<{ run_id: string }>);
    const runId = started!.run_id;
    const [one, two] = [journal(), journal()];
    expect(await one.claim(runId), 'a live owner keeps its run').to.equal(false);
    expect((await one.recoverable()).map((run) => run.runId)).to.not.include(runId);
    // The owner's process stops: its lease lapses without its run ending.
    await pool.query(`UPDATE "${prefix}runs" SET lease_until = now() - interval '1 second' WHERE run_id = $1`, [runId]);
    expect((await one.recoverable()).map((run) => run.runId)).to.include(runId);
    const claims = await Promise.all([one.claim(runId), two.claim(runId)]);
    expect(claims.filter(Boolean), 'exactly one claim wins').to.have.length(1);
    expect((await one.recoverable()).map((run) => run.runId)).to.not.include(runId);
    controller.abort();
    await running;
  });

  it('renews the lease of a run while it lives', async () => {
    const owner = journal({ leaseSeconds: 1 });
    let release = (): void => undefined;
    const tools = new ToolRegistry().register({ name: 'wait' }, () => new Promise<void>((resolve) => (release = resolve)));
    const running = runnerWith(owner, tools, script([['a', 'wait']])).run(agent, 'go');
    await owner.flushed();
    // Three leases long: without renewals the run would be recoverable by now.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const lapsed = await pool.query(`SELECT run_id FROM "${prefix}runs" WHERE owner = $1 AND lease_until < now()`, [owner.owner]);
    expect(lapsed.rows).to.deep.equal([]);
    release();
    expect((await running).status).to.equal('completed');
  });

  it('fails the calls it could not record once its connection is cut, never dispatched, and nothing else', async () => {
    const link = await CuttableLink.open();
    const made = journal({ connectionString: link.connectionString });
    let ran = 0;
    const tools = new ToolRegistry().register({ name: 'work' }, () => ++ran);
    const first = await runnerWith(made, tools, script([['a', 'work']])).run(agent, 'go');
    expect(first.status).to.equal('completed');
    await made.flushed();
    await link.cut();
    const second = await runnerWith(made, tools, script([['a', 'work'], ['b', 'work']])).run(agent, 'go');
    expect(ran, 'no body ran unrecorded').to.equal(1);
    const errors = second.events.flatMap((e) => (e.type === 'TOOL_ERROR' ? [`${e.error.name}: ${e.error.message.replace(/\(.*\)$/, '(...)')}`] : []));
    expect(errors).to.deep.equal(['JournalError: never dispatched: the journal could not record it (...)', 'JournalError: never dispatched: the journal could not record it (...)']);
    expect(second.status, 'the run goes on as its model says').to.equal('completed');
  });
});
