// The hand-off of a fleet lane's permit: the leave script hands a freed permit to the next waiter
// and publishes the grant on the channel of the process that asked for it alone, which starts its
// body without asking again. Forked processes (handOffWorker.ts) count their bodies in Redis: the
// bound, the order between tenants, and a SIGKILLed holder's permits and places, seen from the
// bodies' side. Then in one process: a grant wakes no other process, and a lane left with
// thousands of dead waiters is swept a bounded step per change, its live waiter granted all the same.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { nodeRedisConnection, RedisLaneStore } from '../../../lib/lanes/index.js';
import { keysOf, laneBase } from '../../../lib/lanes/redis/keys.js';
import { acquireScript, refreshScript } from '../../../lib/lanes/redis/scripts.js';
import { CountingConnection, redisFixture, requestArgs, until, type NodeRedis } from './server.js';
import type { HandOffCommand, HandOffMessage, HandOffWorkerConfig } from './handOffWorker.js';

const workerFile = fileURLToPath(new URL('./handOffWorker.ts', import.meta.url));

interface Worker {
  readonly child: ChildProcess;
  readonly started: string[];
  entered: number;
  closed: Extract<HandOffMessage, { type: 'closed' }> | undefined;
  send(command: HandOffCommand): void;
}

describe('the hand-off of a fleet lane across processes', function () {
  // Generous: each process starts tsx, and a machine shared with other work may be slow to schedule them.
  this.timeout(180_000);
  const redis = redisFixture('handoff');
  const children: ChildProcess[] = [];
  // A process a spec left running is killed before the prefix is cleared.
  redis.closers.push(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });

  async function workers(count: number, config: HandOffWorkerConfig): Promise<Worker[]> {
    const made = Array.from({ length: count }, () => {
      const child = fork(workerFile, [JSON.stringify(config)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      children.push(child);
      let ready = false;
      const worker: Worker & { ready: () => boolean } = {
        child,
        started: [],
        entered: 0,
        closed: undefined,
        send: (command) => child.send(command),
        ready: () => ready,
      };
      child.on('message', (raw) => {
        const message = raw as HandOffMessage;
        if (message.type === 'ready') ready = true;
        else if (message.type === 'entered') worker.entered++;
        else if (message.type === 'started') worker.started.push(message.name);
        else worker.closed = message;
      });
      return worker;
    });
    await until(() => made.every((w) => w.ready()), 'every process started', 120_000);
    return made;
  }

  async function enter(worker: Worker, party: string, count: number, holdMs: number): Promise<void> {
    const before = worker.entered;
    worker.send({ type: 'enter', party, count, holdMs });
    await until(() => worker.entered > before, `${party}'s requests in Redis`, 30_000);
  }

  async function closeAll(list: readonly Worker[]): Promise<void> {
    for (const w of list) if (w.child.exitCode === null && w.child.signalCode === null) w.send({ type: 'close' });
    await Promise.all(list.map((w) => (w.child.exitCode !== null || w.child.signalCode !== null ? undefined : new Promise((resolve) => w.child.once('exit', resolve)))));
  }

  const counted = async (own: string): Promise<{ most: number; running: number; order: string[] }> => ({
    most: Number(await redis.client.get(`${own}most`)),
    running: Number(await redis.client.get(`${own}running`)),
    order: await redis.client.lRange(`${own}order`, 0, -1),
  });

  it('hands permits on in FIFO order within a tenant and round-robin between tenants, each to its own process, never more than the limit', async () => {
    const own = `${redis.prefix}order:`;
    const key = 'tool:order';
    // The first holder is this process's; three processes queue three calls each, one tenant apiece.
    const holder = new RedisLaneStore({ client: redis.client, prefix: own, leaseSeconds: 3 });
    let granted = false;
    const first = holder.enter(key, 1, () => (granted = true), 'h');
    await until(() => granted, 'the first holder granted');
    const list = await workers(3, { prefix: own, key, limit: 1, leaseSeconds: 3 });
    for (const [i, party] of ['a', 'b', 'c'].entries()) await enter(list[i]!, party, 3, 20);
    first.leave();
    await until(() => list.every((w) => w.started.length === 3), 'every body started', 60_000);
    await until(async () => (await redis.client.get(`${own}running`)) === '0', 'every body done');
    await closeAll(list);
    await holder.close();
    const { most, running, order } = await counted(own);
    expect(order, 'the order the bodies started in').to.deep.equal(['a1', 'b1', 'c1', 'a2', 'b2', 'c2', 'a3', 'b3', 'c3']);
    expect(most, 'most bodies at once, fleet-wide').to.equal(1);
    expect(running).to.equal(0);
    expect(list.map((w) => w.started)).to.deep.equal([['a1', 'a2', 'a3'], ['b1', 'b2', 'b3'], ['c1', 'c2', 'c3']]);
    expect(list.map((w) => w.closed?.lost)).to.deep.equal([0, 0, 0]);
  });

  it('never runs more than the limit across 4 processes of 2 tenants each, and runs every call', async () => {
    const own = `${redis.prefix}bound:`;
    const limit = 3;
    const list = await workers(4, { prefix: own, key: 'tool:bound', limit, leaseSeconds: 3 });
    for (const [i, w] of list.entries()) {
      w.send({ type: 'enter', party: `x${i}`, count: 10, holdMs: 3 });
      w.send({ type: 'enter', party: `y${i % 2}`, count: 10, holdMs: 3 });
    }
    await until(() => list.every((w) => w.started.length === 20), 'every body started', 90_000);
    await until(async () => (await redis.client.get(`${own}running`)) === '0', 'every body done');
    await closeAll(list);
    const { most, running, order } = await counted(own);
    expect(order).to.have.length(80);
    expect(most, 'most bodies at once, fleet-wide').to.equal(limit);
    expect(running).to.equal(0);
  });

  it("gives a SIGKILLed process's permits back within one lease, and passes over its places in the queue", async () => {
    const own = `${redis.prefix}kill:`;
    const key = 'tool:kill';
    const leaseSeconds = 1;
    const [victim, waiter] = await workers(2, { prefix: own, key, limit: 2, leaseSeconds });
    // The victim holds both permits, and its tenant waits at the head of the queue with three more.
    await enter(victim!, 'v', 2, -1);
    await until(() => victim!.started.length === 2, 'the victim holding both permits');
    await enter(victim!, 'v', 3, -1);
    await enter(waiter!, 'a', 3, 10);
    const killedAt = Date.now();
    victim!.child.kill('SIGKILL');
    await new Promise((resolve) => victim!.child.once('exit', resolve));
    await redis.client.decrBy(`${own}running`, 2);
    await until(() => waiter!.started.length >= 1, "the live process's first body", 30_000);
    const reclaimedAfter = Date.now() - killedAt;
    await until(() => waiter!.started.length === 3, "the live process's bodies", 30_000);
    await until(async () => (await redis.client.get(`${own}running`)) === '0', 'every body done');
    await closeAll([waiter!]);
    const { most, order } = await counted(own);
    expect(order, 'the bodies, in order: the dead process never started another').to.deep.equal(['v1', 'v2', 'a1', 'a2', 'a3']);
    expect(most).to.equal(2);
    expect(reclaimedAfter, `ms from the kill to the first live body (lease ${leaseSeconds * 1000} ms)`).to.be.at.most(leaseSeconds * 1000 + 1500);
    expect(waiter!.closed?.lost).to.equal(0);
  });
});

// A lane of limit 1 whose holder and 1,000 waiters (one tenant, at the head of its queue) all
// belong to a process that died: their leases ended a second ago, by Redis's clock.
async function seedDeadLane(client: NodeRedis, keys: readonly string[], key: string): Promise<void> {
  const [H, W, Q, P, R, M] = keys as [string, string, string, string, string, string];
  const [time] = (await client.sendCommand(['TIME'])) as [string];
  const past = Number(time) * 1000 - 1000;
  const multi = client.multi();
  multi.hSet(M, { limit: '1', key, seq: '1000' });
  multi.zAdd(H, { score: past, value: 'dead:h' });
  multi.hSet(P, 'dead:h', '#1');
  for (let i = 0; i < 1000; i++) {
    const id = `dead:${i}`;
    const entry = `00000001d${String(i).padStart(16, '0')}${id}`;
    multi.zAdd(Q, { score: 0, value: entry });
    multi.hSet(P, id, entry);
    multi.zAdd(W, { score: past, value: id });
  }
  multi.zAdd(R, { score: 0, value: 'd' });
  await multi.execAsPipeline();
}

describe('the hand-off in Redis', function () {
  this.timeout(30_000);
  const redis = redisFixture('handoff-redis');

  it('wakes only the process a grant is for', async () => {
    const connections = [0, 1, 2, 3].map(() => new CountingConnection(nodeRedisConnection(redis.client)));
    const made = connections.map((connection) => new RedisLaneStore({ client: connection, prefix: redis.prefix, leaseSeconds: 3 }));
    redis.stores.push(...made);
    const ids = new Map<string, number>();
    const held: Array<() => void> = [];
    let grants = 0;
    const ask = (store: number): void => {
      const permit = made[store]!.enter('tool:wake', 1, () => {
        grants++;
        held.push(() => permit.leave());
      });
      ids.set((permit as unknown as { id: string }).id, store);
    };
    ask(0);
    await until(() => grants === 1, 'the first grant');
    for (const store of [1, 2, 3]) for (let i = 0; i < 2; i++) ask(store);
    await Promise.all(made.map((s) => s.idle()));
    // Each holder leaves once granted, one after another: six hand-offs, each to one process.
    for (let n = 1; n <= 6; n++) {
      held.shift()!();
      await until(() => grants === n + 1, `grant ${n + 1}`);
    }
    held.shift()!();
    await Promise.all(made.map((s) => s.idle()));
    for (const [store, connection] of connections.entries()) {
      const heardIds = connection.heard.flatMap((message) => message.split(' ').filter((_, i) => i >= 2 && i % 2 === 0));
      expect(heardIds.map((id) => ids.get(id)), `the grants store ${store}'s subscriber heard`).to.satisfy((owners: number[]) => owners.every((owner) => owner === store));
      // Each waiting store heard its own two grants (the leave's answer may bring one first, on its own process).
      if (store > 0) expect(heardIds.length, `grants heard by store ${store}`).to.be.within(1, 2);
    }
  });

  it('sweeps a lane a bounded step per change, passing over dead waiters, and grants its live waiter all the same', async () => {
    const key = 'tool:sweep';
    const base = laneBase(redis.prefix, key);
    const keys = keysOf(base);
    const [H, W] = keys as [string, string];
    await seedDeadLane(redis.client, keys, key);
    // A live request: its change reclaims and passes over a bounded number, and says to come back at once.
    const answer = (await redis.client.evalSha(acquireScript.sha1, { keys, arguments: [...requestArgs(), 'live:1', 'l', '1', '30000', `${base}:g`, '1', key] }).catch(() =>
      redis.client.eval(acquireScript.source, { keys, arguments: [...requestArgs(), 'live:1', 'l', '1', '30000', `${base}:g`, '1', key] }),
    )) as string[];
    expect(answer.slice(-2), 'the live request queued').to.deep.equal(['w', '']);
    expect(answer[1], 'the earliest lease end, said to be now').to.equal(answer[0]);
    const left = await redis.client.zCard(W);
    // At most 100 reclaimed, and 100 passed over by each of the acquire's two drains.
    expect(left, 'waiters left after one change').to.be.within(1001 - 300, 1000);
    // Refreshes go on until the live request holds; no dead one was ever granted.
    let runs = 0;
    for (;;) {
      runs++;
      const out = (await redis.client.eval(refreshScript.source, { keys, arguments: [...requestArgs(), '30000', `${base}:g`, '1', 'live:1'] })) as string[];
      expect(await redis.client.zRange(H, 0, -1)).to.satisfy((holders: string[]) => holders.every((id) => id === 'live:1'));
      if (String(out[out.length - 1]).startsWith('h')) break;
      expect(runs).to.be.below(20);
    }
    expect(runs, 'changes it took').to.be.at.least(3);
    expect(await redis.client.zCard(W)).to.equal(0);
    await redis.client.eval(`return redis.call('DEL', unpack(KEYS))`, { keys });
  });

  it("grants a store's live waiter behind 1,000 dead ones by itself, long before its heartbeat", async () => {
    const key = 'tool:sweep-store';
    const keys = keysOf(laneBase(redis.prefix, key));
    await seedDeadLane(redis.client, keys, key);
    // A 60 s lease: the heartbeat would come 20 s later.
    const store = new RedisLaneStore({ client: redis.client, prefix: redis.prefix, leaseSeconds: 60 });
    redis.stores.push(store);
    let granted = false;
    const permit = store.enter(key, 1, () => (granted = true), 'l');
    await until(() => granted, 'the live request granted', 10_000);
    permit.leave();
    await store.idle();
    expect(await redis.client.exists(keys)).to.equal(0);
  });
});
