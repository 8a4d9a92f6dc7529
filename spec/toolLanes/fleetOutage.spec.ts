// ToolLanes on a RedisLaneStore when Redis goes away, or the store loses a call's lease: what
// each call's Promise says, and that a report the store cannot send reaches nobody (not
// RxJS's unhandled-error hook, which by default throws it outside the library and ends the
// process). Counted from the bodies' side and from the Promises; Redis is reached through a
// proxy that can hold what is sent.
import { expect } from 'chai';
import { createClient } from 'redis';
import { config } from 'rxjs';
import { CallStoppedError, ToolLanes } from '../../lib/index.js';
import { RedisLaneStore } from '../../lib/redis.js';
import { REDIS_HOST, RedisProxy, redisFixture, sleep, until } from '../lanes/redis/server.js';
import { settledOf } from './helpers.js';

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

  it('rejects a running call whose lease was lost with a CallStoppedError whose cause is the LaneLostError, idempotent or not', async () => {
    const store = redis.store({ leaseSeconds: 0.6, timeoutSeconds: 0.1 });
    const lanes = new ToolLanes({ concurrency: { perTool: { book: 2 } }, lanes: store });
    const request = lanes.request({ requestId: 'r' });
    let started = 0;
    let aborted = 0;
    const body = (ctx: ToolLanes.Context): Promise<string> =>
      new Promise((resolve) => {
        started++;
        ctx.signal.addEventListener('abort', () => {
          aborted++;
          resolve('too late');
        });
      });
    const settled = [settledOf(request.run({ tool: 'book', callId: 'safe', idempotent: true }, body)), settledOf(request.run({ tool: 'book', callId: 'risky' }, body))];
    await until(() => started === 2, 'both bodies running');
    // Every lease of the lane gone from Redis: the next refresh finds both lost.
    await redis.client.del(`${redis.prefix}{tool:book}:h`);
    const errors = (await Promise.all(settled)).map((one) => ('error' in one ? (one.error as CallStoppedError) : undefined));
    expect(aborted, 'both bodies told to stop').to.equal(2);
    expect(errors.map((error) => [error instanceof CallStoppedError, error?.stopClass, error?.dispatched])).to.deep.equal([
      [true, 'safe_to_call_again', true],
      [true, 'indeterminate', true],
    ]);
    for (const error of errors) {
      expect(error!.cause, `${error!.callId}'s cause`).to.be.instanceOf(Error).and.to.include({ name: 'LaneLostError' });
      expect((error!.cause as Error).message).to.match(/its lease on tool:book was lost/);
    }
  });
});
