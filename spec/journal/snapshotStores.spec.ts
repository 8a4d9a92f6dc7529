// The snapshot stores: the in-memory one forgets what nobody answered once its time to live is
// over (with no timer of its own), and the PostgreSQL one keeps snapshots for a fleet, one
// caller alone taking each, expired rows found by nobody and swept. Counted from the store's
// side: what a `get` finds, which `delete` wins, the rows in the table.
import { expect } from 'chai';
import sinon from 'sinon';
import {
  AgentRunner,
  ConfigError,
  InMemorySnapshotStore,
  ScriptedProvider,
  ToolRegistry,
  Agent,
  type RunSnapshot,
  type SnapshotStore,
} from '../../lib/index.js';
import { PostgresSnapshotStore } from '../../lib/postgres.js';
import { newPool, uniquePrefix } from './pg.js';

// A real snapshot: a run that waits for a person.
async function waitingSnapshot(): Promise<RunSnapshot> {
  const tools = new ToolRegistry().register({ name: 'book', needsApproval: true }, () => 'booked');
  const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'book', arguments: {} }] }]), tools });
  const result = await runner.run(new Agent({ name: 'desk', instructions: '', model: 'scripted' }), 'book it');
  if (result.status !== 'interrupted') throw new Error(`expected an interrupted run, got ${result.status}`);
  return result.snapshot;
}

// What every store does: keep, find, and let one caller alone take.
async function keepsAndHandsOnce(store: SnapshotStore, snapshot: RunSnapshot): Promise<void> {
  await store.put(snapshot.digest, { tenant: 'acme', snapshot });
  expect(await store.get(snapshot.digest)).to.deep.equal({ tenant: 'acme', snapshot });
  const taken = await Promise.all([store.delete(snapshot.digest), store.delete(snapshot.digest), store.delete(snapshot.digest)]);
  expect(taken.filter(Boolean), 'one caller takes it').to.have.length(1);
  expect(await store.get(snapshot.digest)).to.equal(undefined);
}

describe('InMemorySnapshotStore', () => {
  let clock: sinon.SinonFakeTimers | undefined;
  afterEach(() => clock?.restore());

  it('keeps a snapshot and hands it to one caller alone', async () => {
    await keepsAndHandsOnce(new InMemorySnapshotStore(), await waitingSnapshot());
  });

  it('forgets an entry once its time to live is over: a day by default, or ttlSeconds', async () => {
    const snapshot = await waitingSnapshot();
    clock = sinon.useFakeTimers({ now: Date.now(), toFake: ['Date'] });
    const store = new InMemorySnapshotStore();
    expect(store.ttlSeconds).to.equal(86_400);
    await store.put('a', { tenant: 'acme', snapshot });
    clock.tick(86_399_000);
    expect(await store.get('a'), 'kept until the day is over').to.not.equal(undefined);
    clock.tick(1_000);
    expect(await store.get('a')).to.equal(undefined);
    expect(await store.delete('a'), 'nobody takes an expired entry').to.equal(false);

    const short = new InMemorySnapshotStore({ ttlSeconds: 60 });
    for (let i = 0; i < 100; i++) await short.put(`k${i}`, { tenant: 'acme', snapshot });
    clock.tick(30_000);
    await short.put('late', { tenant: 'acme', snapshot });
    clock.tick(30_000);
    expect(short.size, 'the hundred abandoned ones are swept; the late one lives').to.equal(1);
    expect(await short.get('late')).to.not.equal(undefined);
  });

  it('sets no timer (nothing keeps the process alive), and refuses a time to live that is not a positive number', () => {
    const setTimeout = sinon.spy(globalThis, 'setTimeout');
    const setInterval = sinon.spy(globalThis, 'setInterval');
    try {
      void new InMemorySnapshotStore({ ttlSeconds: 5 }).put('a', { tenant: 'acme', snapshot: {} as RunSnapshot });
      expect(setTimeout.called || setInterval.called).to.equal(false);
    } finally {
      setTimeout.restore();
      setInterval.restore();
    }
    for (const ttlSeconds of [0, -1, Number.NaN, Infinity, '60']) {
      expect(() => new InMemorySnapshotStore({ ttlSeconds } as never)).to.throw(ConfigError, 'ttlSeconds must be a positive number of seconds');
    }
    expect(() => new InMemorySnapshotStore({ ttl: 5 } as never)).to.throw(ConfigError, 'ttl');
  });
});

describe('PostgresSnapshotStore', function () {
  this.timeout(20_000);
  const prefix = uniquePrefix();
  const pool = newPool();
  const stores: PostgresSnapshotStore[] = [];
  const storeWith = (ttlSeconds?: number): PostgresSnapshotStore => {
    const store = new PostgresSnapshotStore({ pool, tablePrefix: prefix, ...(ttlSeconds === undefined ? {} : { ttlSeconds }) });
    stores.push(store);
    return store;
  };

  after(async () => {
    await storeWith().drop();
    for (const store of stores) await store.close();
    await pool.end();
  });

  it('keeps a snapshot for any process, and hands it to one caller alone, of several stores racing', async () => {
    const snapshot = await waitingSnapshot();
    await keepsAndHandsOnce(storeWith(), snapshot);
    const [a, b, c] = [storeWith(), storeWith(), storeWith()];
    await a.put(snapshot.digest, { tenant: 'acme', snapshot });
    expect((await b.get(snapshot.digest))?.snapshot.digest, 'another store reads it').to.equal(snapshot.digest);
    const taken = await Promise.all([a, b, c, a, b, c].map((store) => store.delete(snapshot.digest)));
    expect(taken.filter(Boolean)).to.have.length(1);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "public"."${prefix}snapshots"`);
    expect(rows[0].n).to.equal(0);
  });

  it('finds nothing of an expired entry, takes nothing, and sweeps it on the next put', async () => {
    const snapshot = await waitingSnapshot();
    const store = storeWith(1);
    expect(storeWith().ttlSeconds, 'a day by default').to.equal(86_400);
    await store.put('old', { tenant: 'acme', snapshot });
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(await store.get('old')).to.equal(undefined);
    expect(await store.delete('old')).to.equal(false);
    await store.put('new', { tenant: 'acme', snapshot });
    const { rows } = await pool.query(`SELECT key FROM "public"."${prefix}snapshots" ORDER BY key`);
    expect(rows.map((row: { key: string }) => row.key), 'the expired row is gone from the table').to.deep.equal(['new']);
  });

  it('refuses options it cannot use, naming the field', () => {
    expect(() => new PostgresSnapshotStore({} as never)).to.throw(ConfigError, 'either pool');
    expect(() => new PostgresSnapshotStore({ pool, ttlSeconds: 0 })).to.throw(ConfigError, 'ttlSeconds');
    expect(() => new PostgresSnapshotStore({ pool, tablePrefix: 'Bad-' })).to.throw(ConfigError, 'tablePrefix');
  });
});
