// Fleet-wide rate lanes on a real Redis: three runner processes (rateWorker.ts) call one tool
// under perToolRate, their bodies stamping their starts by Redis's clock; the stamps, read as a
// counter of admitted calls, never exceed the rate in any window. Two stores in this process
// share a pause through Redis. A rate lane holds no permit (at most one reserved admission per
// process), so a killed process holds nothing back.
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { asyncScheduler } from 'rxjs';
import { nodeRedisConnection, RedisLaneStore, type LanePauseNotice, type Permit, type RedisConnection } from '../../../lib/lanes/index.js';
import { forkedFleet, mostInWindow, stampsUnder } from './forkedFleet.js';
import { clearPrefix, nodeRedis, sleep, until, type NodeRedis } from './server.js';
import type { RateWorkerConfig, RateWorkerMessage } from './rateWorker.js';

const workerFile = fileURLToPath(new URL('./rateWorker.ts', import.meta.url));

// Asks `store`'s rate lane `key` for an admission for a call whose body starts as soon as it is
// admitted (`admitted` told first): its reservation is spent then, as a batch spends it.
function startsAtOnce(store: RedisLaneStore, key: string, rate: { limit: number; perSeconds: number } | undefined, admitted: (permit: Permit) => void): Permit {
  let permit: Permit | undefined;
  let early = false;
  const go = (): void => {
    permit!.started?.();
    admitted(permit!);
  };
  permit = store.enterRate(key, rate, () => {
    if (permit === undefined) early = true;
    else go();
  }, 'acme', asyncScheduler);
  if (early) go();
  return permit;
}

// The scripts sent through a connection, split by their answers: an admission's is text (admitted,
// reserved, or how long to wait); a report's (a start, a late call, one given back, a lease renewed) is 1.
class ScriptCounting implements RedisConnection {
  asks = 0;
  reports = 0;
  constructor(private readonly inner: RedisConnection) {}

  async evalsha(sha1: string, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    return this.counted(await this.inner.evalsha(sha1, keys, args));
  }

  async eval(script: string, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    return this.counted(await this.inner.eval(script, keys, args));
  }

  subscriber(onReady: () => void): ReturnType<RedisConnection['subscriber']> {
    return this.inner.subscriber(onReady);
  }

  private counted(reply: unknown): unknown {
    if (typeof reply === 'string') this.asks++;
    else this.reports++;
    return reply;
  }
}

describe('fleet rate lanes on a RedisLaneStore', function () {
  this.timeout(90_000);
  const fleet = forkedFleet<RateWorkerConfig, RateWorkerMessage>('rate', workerFile);
  const { prefix } = fleet;
  let client: NodeRedis;
  let other: NodeRedis;

  before(async () => {
    client = fleet.client;
    other = await nodeRedis();
  });

  after(async () => {
    await other?.close();
  });

  it('admits at most burst + limit calls in any window of perSeconds across 3 processes, and spaces the rest', async () => {
    // 10 a second (one every 100 ms), 2 at once; 3 processes x 3 runs x 4 calls = 36 calls.
    const rate = { limit: 10, perSeconds: 1, burst: 2 };
    const config: RateWorkerConfig = { prefix, rate, runs: 3, calls: 4 };
    const { done } = await fleet.run([config, config, config]);
    expect(done.flatMap((d) => d.others), 'calls that did not succeed').to.deep.equal([]);
    expect(done.reduce((sum, d) => sum + d.results, 0)).to.equal(36);
    const stamps = await stampsUnder(client, prefix);
    expect(stamps).to.have.length(36);
    // The counter of admitted calls, over every window of one perSeconds starting at a stamp.
    // A body stamps a little after its admission; with 100 ms between admissions, a delay under
    // 100 ms cannot squeeze one more into the window.
    const most = mostInWindow(stamps, rate.perSeconds * 1000);
    expect(most, 'most calls admitted in one window of perSeconds, fleet-wide').to.be.at.most(rate.burst + rate.limit);
    // The bound bit: 36 calls at 10 a second take at least (36 - 2) x 100 ms, less the stamps' jitter.
    expect(stamps[stamps.length - 1]! - stamps[0]!, 'ms from the first admission to the last').to.be.at.least((36 - rate.burst) * 100 - 100);
  });

  it('counts body starts behind a fleet-wide tool lane: calls admitted while it was busy do not start back to back', async () => {
    // 4 a second (one every 255 ms with the default jitter), one call of the tool at once across
    // 2 processes x 1 run x 4 calls; one process's first body holds the tool lane 900 ms, the others 10 ms.
    const rate = { limit: 4, perSeconds: 1, burst: 1 };
    const base = { prefix: `${prefix}starts:`, rate, runs: 1, calls: 4, perTool: 1, bodyMs: 10 };
    const pair = await fleet.ready([{ ...base, firstMs: 900 }, base]);
    pair[0]!.go();
    // The second process starts once the first holds the tool lane.
    await sleep(100);
    pair[1]!.go();
    const { done } = await fleet.finish(pair);
    expect(done.flatMap((d) => d.others), 'calls that did not succeed').to.deep.equal([]);
    const stamps = await stampsUnder(client, `${prefix}starts:`);
    expect(stamps).to.have.length(8);
    const most = mostInWindow(stamps, 1000);
    // Counted at admission, the calls admitted while the first body ran would start within a few ms of each other.
    expect(most, `most body starts in one second, fleet-wide (starts ${stamps.map((s) => s - stamps[0]!).join(', ')} ms)`).to.be.at.most(rate.limit);
    await clearPrefix(client, `${prefix}starts:`);
  });

  it('sends nothing more for a call that starts as it is admitted: one script per admission', async () => {
    const counting = new ScriptCounting(nodeRedisConnection(client));
    const store = new RedisLaneStore({ client: counting, prefix: `${prefix}ontime:`, leaseSeconds: 5 });
    try {
      // 50 a second, 8 calls whose bodies start the moment the lane lets them go.
      const rate = { limit: 50, perSeconds: 1 };
      let admitted = 0;
      await Promise.all(Array.from({ length: 8 }, () => new Promise<void>((resolve) => startsAtOnce(store, 'rate:tool:ontime', rate, () => (admitted++, resolve())))));
      await store.idle();
      await sleep(50);
      await store.idle();
      expect(admitted).to.equal(8);
      expect(counting.reports, 'scripts sent beyond the admissions (starts, late calls, give-backs)').to.equal(0);
      expect(counting.asks, 'admission scripts').to.be.at.least(8);
    } finally {
      await store.close();
      await clearPrefix(client, `${prefix}ontime:`);
    }
  });

  it('reports a call held in a fleet tool lane past its grace as late: the next admission, in another process, waits for its start', async () => {
    const at = `${prefix}late:`;
    const counting = new ScriptCounting(nodeRedisConnection(client));
    const one = new RedisLaneStore({ client: counting, prefix: at, leaseSeconds: 5 });
    const two = new RedisLaneStore({ client: other, prefix: at, leaseSeconds: 5 });
    try {
      // 10 a second: one every 102 ms with the default rateJitterMs.
      const rate = { limit: 10, perSeconds: 1 };
      // A body holds the fleet's tool lane of 1 for 400 ms (taken through the other store, so
      // that one's connection carries only its rate lane's scripts).
      const blocker = two.enter('tool:late', 1, () => undefined);
      await two.idle();
      expect(blocker.holding).to.equal(true);
      // Call x is admitted, then waits in the tool lane: its body starts once the blocker leaves.
      let xStarted = 0;
      let xAdmitted = 0;
      let toolPermit: Permit | undefined;
      const x = one.enterRate('rate:tool:late', rate, () => {
        xAdmitted = performance.now();
        toolPermit = two.enter('tool:late', 1, () => {
          x.started?.();
          xStarted = performance.now();
        });
      }, 'acme', asyncScheduler);
      await until(() => xAdmitted > 0, 'x admitted', 5_000);
      // Past x's grace (and its report's round trip), call y asks from the other store.
      await sleep(60);
      let yAdmitted = 0;
      const y = startsAtOnce(two, 'rate:tool:late', rate, () => (yAdmitted = performance.now()));
      await sleep(400 - 60);
      blocker.leave();
      await until(() => xStarted > 0 && yAdmitted > 0, 'x started and y admitted', 5_000);
      // Counted at x's admission, y would go 102 ms after it, long before x's body starts.
      expect(yAdmitted - xStarted, `ms from x's start to y's admission (x admitted at 0, started at ${Math.round(xStarted - xAdmitted)})`).to.be.at.least(95);
      await one.idle();
      expect(counting.reports, "one's reports: x late, then x started").to.equal(2);
      toolPermit?.leave();
      x.leave();
      y.leave();
    } finally {
      await one.close();
      await two.close();
      await clearPrefix(client, at);
    }
  });

  it("shares a pause through Redis: another process's store waits it out, and hears of it for a tool with no rate", async () => {
    const one = new RedisLaneStore({ client, prefix, leaseSeconds: 5 });
    const two = new RedisLaneStore({ client: other, prefix, leaseSeconds: 5 });
    try {
      const heard: LanePauseNotice[] = [];
      two.pauses$.subscribe((notice) => heard.push(notice));
      // Two starts listening for the fleet's pauses on its first use.
      expect(two.paused('rate:tool:plain')).to.equal(false);
      const rate = { limit: 100, perSeconds: 1 };
      let admittedAt = 0;
      // A first admission, so the lane exists in Redis; then one pauses it for 600 ms.
      await new Promise<void>((resolve) => startsAtOnce(one, 'rate:tool:search', rate, () => resolve()));
      // Both stores subscribe to the pause channel on their first use, without waiting: a pause
      // published before two's subscription is in place would never reach it.
      await until(async () => {
        const reply = (await client.sendCommand(['PUBSUB', 'NUMSUB', `${one.prefix}rate-pauses`])) as [string, number];
        return Number(reply[1]) >= 2;
      }, 'both stores subscribed to the pause channel', 5_000);
      const pausedAt = performance.now();
      one.pause('rate:tool:search', 0.6, 'search answered 429', asyncScheduler);
      one.pause('rate:tool:plain', 0.6, 'plain answered 429', asyncScheduler);
      await until(() => two.paused('rate:tool:plain'), 'the other store hearing of the pause', 5_000);
      let permit: Permit | undefined;
      await new Promise<void>((resolve) => {
        permit = startsAtOnce(two, 'rate:tool:search', rate, () => {
          admittedAt = performance.now();
          resolve();
        });
      });
      expect(permit?.holding).to.equal(true);
      expect(admittedAt - pausedAt, 'ms from the pause to the next admission in another store').to.be.at.least(550);
      expect(heard.map((n) => n.key)).to.include('rate:tool:plain');
    } finally {
      await one.close();
      await two.close();
    }
  });

  it("learns a pace across the fleet: what went through between two pauses' ends, kept in Redis, spacing every process's admissions", async () => {
    const one = new RedisLaneStore({ client, prefix, leaseSeconds: 5 });
    const two = new RedisLaneStore({ client: other, prefix, leaseSeconds: 5 });
    const key = 'rate:tool:learned';
    const hash = `${prefix}{${key}}:rate`;
    const admit = (store: RedisLaneStore): Promise<{ at: number; permit: Permit }> =>
      new Promise((resolve) => {
        startsAtOnce(store, key, undefined, (permit) => resolve({ at: performance.now(), permit }));
      });
    try {
      one.learnRate(key, asyncScheduler);
      two.learnRate(key, asyncScheduler);
      // Nothing learned yet: every call at once. A first pause only starts the count.
      one.pause(key, 0.05, 'full', asyncScheduler);
      await until(async () => Number(await client.hGet(hash, 'cycle')) === 1, 'the first pause in Redis');
      await sleep(80);
      const first = await Promise.all([admit(one), admit(one), admit(two), admit(two), admit(two)]);
      expect(Math.max(...first.map((a) => a.at)) - Math.min(...first.map((a) => a.at)), 'ms between the first five admissions').to.be.below(50);
      // One of the five was refused: the next pause teaches the pace, 4 through over the time between the pauses' ends.
      two.pause(key, 0.2, 'full', asyncScheduler);
      await until(async () => Number(await client.hGet(hash, 'cycle')) === 2, 'the second pause in Redis');
      const [through, ms, pace] = (await client.hmGet(hash, ['through', 'ms', 'pace'])).map(Number);
      expect(through).to.equal(4);
      expect(pace).to.be.closeTo((4 * 1000) / ms!, 0.01);
      // A call of that cycle that never started takes its part back.
      first[0]!.permit.report!('unstarted');
      await until(async () => Number(await client.hGet(hash, 'through')) === 3, 'the call not through taken back');
      const learned = Number(await client.hGet(hash, 'pace'));
      expect(learned).to.be.closeTo((3 * 1000) / ms!, 0.01);
      // After the pause, both processes' admissions are spaced at the learned pace.
      const next = [await admit(one), await admit(two), await admit(one)];
      // Spaced by Redis, on its clock: the slot each admission was given (a process's timer may fire late for one and not the next).
      const slots = next.map(({ permit }) => (permit as unknown as { slot: number }).slot);
      const slotGaps = slots.slice(1).map((slot, i) => slot - slots[i]!);
      for (const gap of slotGaps) expect(gap, 'ms between admissions at the learned pace, by the server').to.be.at.least(0.99 * (1000 / learned));
    } finally {
      await one.close();
      await two.close();
    }
  });

  it('leaves room for a late send: admissions spaced as if each window were rateJitterMs longer', async () => {
    const store = new RedisLaneStore({ client, prefix, leaseSeconds: 5, rateJitterMs: 50 });
    try {
      // 10 a second, one at a time: 100 ms apart at the rate, 105 with 50 ms of jitter left over a second.
      const rate = { limit: 10, perSeconds: 1 };
      // Read on Redis's clock, the slot each admission was given: this process's timers may fire late for one and not the next.
      const slots: number[] = [];
      await Promise.all(Array.from({ length: 3 }, () => new Promise<void>((resolve) => startsAtOnce(store, 'rate:tool:jitter', rate, (permit) => (slots.push((permit as unknown as { slot: number }).slot), resolve())))));
      slots.sort((a, b) => a - b);
      for (let i = 1; i < slots.length; i++) expect(slots[i]! - slots[i - 1]!, 'ms between two admissions, by the server').to.be.at.least(104);
    } finally {
      await store.close();
    }
  });
});
