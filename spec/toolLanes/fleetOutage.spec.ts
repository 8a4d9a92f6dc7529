// ToolLanes on a RedisLaneStore when Redis goes away, or the store loses a call's lease: what
// each call's Promise says, and that a report the store cannot send reaches nobody (not
// RxJS's unhandled-error hook, which by default throws it outside the library and ends the
// process). Counted from the bodies' side and from the Promises; Redis is reached through a
// proxy that can hold what is sent.
import { expect } from 'chai';
import { createClient } from 'redis';
import { config } from 'rxjs';
import { ToolLanes } from '../../lib/index.js';
import { RedisLaneStore } from '../../lib/redis.js';
import { REDIS_HOST, RedisProxy, redisFixture, sleep } from '../lanes/redis/server.js';

describe('ToolLanes on a RedisLaneStore, when Redis or a lease goes away', function () {
  this.timeout(20_000);
  const redis = redisFixture('toollanes-outage');
  let unhandled: unknown[];
  let before: typeof config.onUnhandledError;

  beforeEach(() => {
    unhandled = [];
    before = config.onUnhandledError;
    config.onUnhandledError = (error) => unhandled.push(error);
  });

  afterEach(() => {
    config.onUnhandledError = before;
  });

  // A store whose Redis is reached through a proxy that can hold what is sent (Redis hangs).
  async function heldStore(name: string): Promise<{ proxy: RedisProxy; store: RedisLaneStore }> {
    const proxy = new RedisProxy();
    const port = await proxy.listen();
    const client = createClient({ socket: { host: REDIS_HOST, port, reconnectStrategy: false } });
    client.on('error', () => undefined);
    await client.connect();
    redis.closers.push(async () => {
      client.destroy();
      await proxy.close();
    });
    const store = new RedisLaneStore({ client, prefix: `${redis.prefix}${name}:`, leaseSeconds: 1.2, timeoutSeconds: 0.2 });
    redis.stores.push(store);
    return { proxy, store };
  }

  it('reports nothing when an adaptive lane cannot tell Redis how its call went because Redis stopped answering', async () => {
    const { proxy, store } = await heldStore('adaptive');
    const lanes = new ToolLanes({ concurrency: { perToolAdaptive: { search: { min: 1, max: 4, initial: 2 } } }, lanes: store });
    const result = await lanes.run({ tool: 'search' }, () => {
      // Redis hangs while the body runs: the holder's report, sent as it ends, gets no answer.
      proxy.hold();
      return 'found';
    });
    expect(result).to.equal('found');
    await store.idle();
    await sleep(50);
    expect(unhandled.map(String)).to.deep.equal([]);
    proxy.pass();
  });

  it("reports nothing when a budget cannot charge a body's reported cost because Redis stopped answering", async () => {
    const { proxy, store } = await heldStore('budget');
    const lanes = new ToolLanes({ concurrency: { perTenantBudget: { cost: 100, perSeconds: 60 } }, lanes: store });
    const result = await lanes.run({ tool: 'book', cost: 1 }, (ctx) => {
      proxy.hold();
      ctx.reportCost(3);
      return 'booked';
    }, { tenant: 'acme' });
    expect(result).to.equal('booked');
    await store.idle();
    await sleep(50);
    expect(unhandled.map(String)).to.deep.equal([]);
    proxy.pass();
  });
});
