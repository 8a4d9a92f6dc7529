// RedisLaneStore through a blip: a request that fails on the way (a reset connection, a Redis
// restarted under the timeout) is sent again on the reconnected client, so no call is refused and
// no queued call is dropped; a repeat never grants twice; and a lease lost because Redis lost its
// data says so. Faults come from a TCP proxy the spec cuts, CLIENT KILL from a second client, and
// a redis-server of the spec's own that it restarts and flushes (never the shared one).
import { expect } from 'chai';
import { createClient } from 'redis';
import { LaneLostError } from '../../../lib/errors.js';
import { LaneMetricNames, RedisLaneStore, type LaneMeter, type LaneStoreNotice, type Permit } from '../../../lib/lanes/index.js';
import { closedPort, clearPrefix, hasRedisServer, nodeRedis, OwnRedis, REDIS_HOST, RedisProxy, requireRedis, sleep, uniquePrefix, until, type NodeRedis } from './server.js';

// A node-redis client that reconnects at once, as a service's would.
async function reconnecting(port: number) {
  const client = createClient({ socket: { host: REDIS_HOST, port, reconnectStrategy: () => 20 } });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

type Client = Awaited<ReturnType<typeof reconnecting>>;

// A caller that records its grant or its loss.
function caller() {
  const seen = { granted: 0, lost: [] as Error[] };
  return { seen, onGrant: { granted: () => seen.granted++, lost: (error: Error) => seen.lost.push(error) } };
}

describe('RedisLaneStore through a blip', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('blip');
  let direct: NodeRedis;
  const stores: RedisLaneStore[] = [];
  const clients: Client[] = [];
  const proxies: RedisProxy[] = [];

  const store = (client: Client | NodeRedis, options: Partial<ConstructorParameters<typeof RedisLaneStore>[0]> = {}) => {
    const made = new RedisLaneStore({ client, prefix, leaseSeconds: 3, ...options });
    stores.push(made);
    return made;
  };
  const throughProxy = async () => {
    const proxy = new RedisProxy();
    proxies.push(proxy);
    const client = await reconnecting(await proxy.listen());
    clients.push(client);
    return { proxy, client };
  };
  const noticesOf = (lanes: RedisLaneStore): LaneStoreNotice[] => {
    const notices: LaneStoreNotice[] = [];
    lanes.notices$.subscribe((notice) => notices.push(notice));
    return notices;
  };
  const holdersInRedis = async (key: string) => (await direct.zRange(`${prefix}{${key}}:h`, 0, -1)).length;

  before(async () => {
    await requireRedis();
    direct = await nodeRedis();
  });

  after(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await Promise.all(clients.map((c) => (c.isOpen ? c.close() : undefined)));
    await Promise.all(proxies.map((p) => p.close()));
    await clearPrefix(direct, prefix);
    await direct.close();
  });

  it('sends a request that failed on a reset connection again on the reconnected client: granted, and nothing refused', async () => {
    const { proxy: other, client } = await throughProxy();
    const lanes = store(client, { leaseSeconds: 9 });
    const notices = noticesOf(lanes);
    other.hold();
    const first = caller();
    const permit = lanes.enter('tool:reset', 2, first.onGrant);
    await until(() => other.held > 0, 'the request to be in flight');
    other.cut();
    other.pass();
    await until(() => permit.holding, 'the grant after the reconnection');
    // The next call right after the blip is asked of Redis, not refused.
    const second = caller();
    const next = lanes.enter('tool:reset', 2, second.onGrant);
    await lanes.idle();
    expect(next.holding).to.equal(true);
    expect([first.seen, second.seen]).to.deep.equal([
      { granted: 1, lost: [] },
      { granted: 1, lost: [] },
    ]);
    expect(notices).to.deep.equal([]);
    expect(await holdersInRedis('tool:reset')).to.equal(2);
    permit.leave();
    next.leave();
    await lanes.idle();
    expect(await holdersInRedis('tool:reset')).to.equal(0);
  });

  it('never grants twice: a request Redis ran whose answer was lost gets, when sent again, the answer its first run recorded', async () => {
    const { proxy, client } = await throughProxy();
    const lanes = store(client, { leaseSeconds: 9 });
    const rival = store(direct);
    proxy.swallow();
    const permit = lanes.enter('tool:once', 1, () => undefined);
    // Redis ran the request (its holder is there) and the answer went nowhere.
    await until(async () => (await holdersInRedis('tool:once')) === 1, 'Redis to grant the request');
    await until(() => proxy.swallowed > 0, 'the answer to be dropped');
    proxy.cut();
    proxy.pass();
    await until(() => permit.holding, 'the grant, from the repeated request');
    const fence = (permit as Permit & { fence?: string }).fence;
    expect(await direct.hGet(`${prefix}{tool:once}:p`, (permit as Permit & { id: string }).id)).to.equal(`#${fence}`);
    expect(await holdersInRedis('tool:once')).to.equal(1);
    // The lane of one is full: another process's request waits.
    const waiting = rival.enter('tool:once', 1, () => undefined);
    await rival.idle();
    expect(waiting.holding).to.equal(false);
    permit.leave();
    await until(() => waiting.holding, 'the rival to be granted once the permit is back');
    waiting.leave();
    await rival.idle();
  });

  it('keeps a call queued during the blip queued: its refresh fails on the way, is sent again, and it is granted when the permit frees', async () => {
    const { proxy, client } = await throughProxy();
    // A short lease: a refresh goes every second.
    const lanes = store(client, { leaseSeconds: 3, timeoutSeconds: 1 });
    const holder = store(direct);
    const notices = noticesOf(lanes);
    const held = holder.enter('tool:queued', 1, () => undefined);
    await holder.idle();
    const queued = caller();
    const permit = lanes.enter('tool:queued', 1, queued.onGrant);
    await lanes.idle();
    expect(permit.holding).to.equal(false);
    // Its wake-up subscription made, the next thing sent is the heartbeat's refresh.
    await sleep(100);
    proxy.hold();
    await until(() => /EVALSHA/i.test(proxy.heldText), 'a refresh to be in flight');
    proxy.cut();
    proxy.pass();
    await sleep(100);
    held.leave();
    await until(() => permit.holding, 'the queued call to be granted');
    expect(queued.seen).to.deep.equal({ granted: 1, lost: [] });
    expect(notices).to.deep.equal([]);
    permit.leave();
    await lanes.idle();
  });

  it('rides out CLIENT KILL of its connection from a second client while requests are in flight', async () => {
    const client = await reconnecting(6379);
    clients.push(client);
    const lanes = store(client, { leaseSeconds: 9 });
    const notices = noticesOf(lanes);
    const id = await client.clientId();
    const refused: Error[] = [];
    let granted = 0;
    const permits: Permit[] = [];
    // Requests keep going out while the connection is killed under them.
    const ask = (): void => {
      permits.push(lanes.enter('tool:killed', 1000, { granted: () => granted++, lost: (error: Error) => refused.push(error) }));
    };
    for (let i = 0; i < 200; i++) ask();
    await direct.sendCommand(['CLIENT', 'KILL', 'ID', String(id)]);
    for (let i = 0; i < 200; i++) ask();
    await until(() => granted === 400 || refused.length > 0, 'every request to be answered');
    expect(refused.map((error) => error.message)).to.deep.equal([]);
    expect(notices).to.deep.equal([]);
    expect(await holdersInRedis('tool:killed')).to.equal(400);
    for (const permit of permits) permit.leave();
    await lanes.idle();
    expect(await holdersInRedis('tool:killed')).to.equal(0);
  });

  it('still refuses calls once Redis stays away past the timeout (the bound of the retries), and asks again as soon as it is back, not at the next heartbeat', async () => {
    const { proxy, client } = await throughProxy();
    // A heartbeat every 10 s; probes while unreachable every quarter second.
    const lanes = store(client, { leaseSeconds: 30, timeoutSeconds: 0.3 });
    const notices = noticesOf(lanes);
    proxy.hold();
    const first = caller();
    lanes.enter('tool:away', 1, first.onGrant);
    await until(() => first.seen.lost.length === 1, 'the request to be given up');
    expect(first.seen.lost[0]).to.be.instanceOf(LaneLostError);
    expect(notices.map((notice) => notice.status)).to.deep.equal(['unreachable']);
    proxy.pass();
    proxy.cut();
    const back = performance.now();
    await until(() => notices.length === 2, 'Redis to answer again');
    expect(notices[1]!.status).to.equal('restored');
    expect(performance.now() - back, 'ms from Redis back to restored').to.be.below(2000);
    const next = caller();
    lanes.enter('tool:away', 1, next.onGrant);
    await lanes.idle();
    expect(next.seen).to.deep.equal({ granted: 1, lost: [] });
  });

  describe('on a redis-server of its own', function () {
    let own: OwnRedis;
    let ownClient: Client;
    before(async function () {
      if (!hasRedisServer()) this.skip();
      own = new OwnRedis(await closedPort());
      await own.start();
      ownClient = await reconnecting(own.port);
    });
    after(async () => {
      if (ownClient?.isOpen) await ownClient.close();
      await own?.stop();
    });

    it('asks Redis again after a restart under the timeout: calls are not refused, and a lease the restart took is lost as "Redis lost its data"', async () => {
      const lanes = store(ownClient, { leaseSeconds: 6 });
      const notices = noticesOf(lanes);
      const running = caller();
      const permit = lanes.enter('tool:restart', 2, running.onGrant);
      await lanes.idle();
      expect(permit.holding).to.equal(true);
      await own.stop();
      await own.start();
      // Asked while the client reconnects: the request waits for it and goes through.
      const after = caller();
      const next = lanes.enter('tool:restart', 2, after.onGrant);
      await until(() => after.seen.granted === 1 || after.seen.lost.length > 0, 'the request after the restart');
      expect(after.seen).to.deep.equal({ granted: 1, lost: [] });
      // The next refresh finds the running call's lease gone with Redis's data.
      await until(() => running.seen.lost.length === 1, 'the lost lease to be reported');
      expect(running.seen.lost[0]!.message).to.match(/its lease on tool:restart was lost \(Redis lost its data/);
      expect(running.seen.lost[0]!.message).not.to.match(/paused/);
      expect(notices.filter((notice) => notice.status === 'unreachable')).to.deep.equal([]);
      next.leave();
      await lanes.idle();
    });

    it('says "Redis lost its data" of a lease and a place in the queue lost to FLUSHALL, and "paused" of one that merely ran out', async () => {
      const lanes = store(ownClient, { leaseSeconds: 3 });
      const held = caller();
      const waiting = caller();
      lanes.enter('tool:flushed', 1, held.onGrant);
      lanes.enter('tool:flushed', 1, waiting.onGrant);
      await lanes.idle();
      expect(held.seen.granted).to.equal(1);
      await ownClient.flushAll();
      await until(() => held.seen.lost.length + waiting.seen.lost.length === 2, 'both losses to be reported');
      expect(held.seen.lost[0]!.message).to.match(/^its lease on tool:flushed was lost \(Redis lost its data/);
      expect(waiting.seen.lost[0]!.message).to.match(/^its place in the queue of tool:flushed was lost \(Redis lost its data/);
      // Now the epoch is the new one: a lease that runs out without a flush is not blamed on Redis.
      const again = caller();
      const permit = lanes.enter('tool:expired', 1, again.onGrant);
      await lanes.idle();
      expect(permit.holding).to.equal(true);
      await ownClient.del(`${prefix}{tool:expired}:h`);
      await until(() => again.seen.lost.length === 1, 'the expired lease to be reported');
      expect(again.seen.lost[0]!.message).to.match(/paused, or could not reach Redis/);
      await clearPrefix(ownClient as unknown as NodeRedis, prefix);
    });

    it("waits for a client reconnecting past node-redis's own command timeout with one attempt, within its timeoutSeconds", async () => {
      // node-redis gives up on a command still unwritten after its commandOptions.timeout (here
      // 50 ms): the store's scripts go without that timer, bounded by the store's timeout alone.
      const quick = createClient({ socket: { host: REDIS_HOST, port: own.port, reconnectStrategy: () => 20 }, commandOptions: { timeout: 50 } });
      quick.on('error', () => undefined);
      await quick.connect();
      clients.push(quick as unknown as Client);
      const retries: number[] = [];
      const meter: LaneMeter = {
        createHistogram: () => ({ record: () => undefined }),
        createCounter: (name) => ({ add: (value) => (name === LaneMetricNames.RETRIES ? retries.push(value) : undefined) }),
        createObservableGauge: () => ({ addCallback: () => undefined, removeCallback: () => undefined }),
      };
      const lanes = store(quick as unknown as Client, { leaseSeconds: 6, meter });
      await own.stop();
      // The client's own commands, asked meanwhile, time out.
      const refused = await quick.get(`${prefix}nothing`).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).to.be.instanceOf(Error);
      const asked = performance.now();
      const slow = caller();
      const permit = lanes.enter('tool:slow', 1, slow.onGrant);
      await sleep(300);
      await own.start();
      await until(() => slow.seen.granted + slow.seen.lost.length > 0, 'the request to be answered');
      expect(slow.seen).to.deep.equal({ granted: 1, lost: [] });
      expect(performance.now() - asked).to.be.above(250);
      // Never given up and sent again.
      expect(retries).to.deep.equal([]);
      permit.leave();
      await lanes.idle();
      await clearPrefix(ownClient as unknown as NodeRedis, prefix);
    });
  });
});
