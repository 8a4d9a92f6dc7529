// RedisLaneStore against a real Redis: the grant rule is the in-process Lane's (a differential
// property), wake-ups come by pub/sub and a lost one is caught by the heartbeat, a dead holder's
// permit comes back within one lease, every key of a lane shares one hash tag, and the fleet
// snapshot reads the lanes of every process.
import { expect } from 'chai';
import fc from 'fast-check';
import { lastValueFrom, NEVER, of } from 'rxjs';
import { ConfigError, LaneLostError } from '../../../lib/errors.js';
import { inLane, Lane, nodeRedisConnection, RedisLaneStore, type LaneChange, type Permit } from '../../../lib/lanes/index.js';
import { acquireScript, leaveScript } from '../../../lib/lanes/redis/scripts.js';
import { CountingConnection, ioredis, keysUnder, nodeRedis, redisFixture, requestArgs, sleep, until } from './server.js';

describe('RedisLaneStore', function () {
  this.timeout(30_000);
  const redis = redisFixture('store');
  // Clients made by a spec for a second process are closed at the end (redis.closers).
  const { prefix, stores, closers } = redis;
  const store = (options: Partial<ConstructorParameters<typeof RedisLaneStore>[0]> = {}): RedisLaneStore => redis.store(options);

  describe('the grant rule', () => {
    // Steps of a random single-process sequence: a request for a party, or a leave of the request
    // made n-th (mod how many there are): a withdrawal if it waits, a release if it holds.
    const steps = fc.array(fc.oneof(fc.record({ enter: fc.constantFrom('a', 'b', 'c', '') }), fc.record({ leave: fc.nat(40) })), { maxLength: 30 });

    it('grants in exactly the order the in-process Lane does, for random sequences of enters, withdrawals and releases', async () => {
      const fleet = store();
      let run = 0;
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 1, max: 3 }), steps, async (limit, sequence) => {
          const key = `tool:differential-${run++}`;
          const lane = new Lane(key, limit);
          const expected: number[] = [];
          const actual: number[] = [];
          const inProcess: Permit[] = [];
          const shared: Permit[] = [];
          for (const step of sequence) {
            if ('enter' in step) {
              const n = inProcess.length;
              inProcess.push(lane.enter(() => expected.push(n), step.enter));
              shared.push(fleet.enter(key, limit, () => actual.push(n), step.enter));
            } else if (inProcess.length > 0) {
              const n = step.leave % inProcess.length;
              inProcess[n]!.leave();
              shared[n]!.leave();
            }
            // Each step is taken once Redis has answered the last: the same state, step by step.
            await fleet.idle();
            expect(actual).to.deep.equal(expected);
            expect(shared.map((p) => p.holding)).to.deep.equal(inProcess.map((p) => p.holding));
          }
          for (const permit of shared) permit.leave();
          await fleet.idle();
        }),
        { numRuns: 60 },
      );
      expect(await keysUnder(redis.client, `${prefix}{tool:differential`)).to.deep.equal([]);
    });

    it('serves parties round-robin across processes: a small party beside a big one gets every other permit', async () => {
      const big = store();
      const second = await nodeRedis();
      closers.push(() => second.close());
      const small = new RedisLaneStore({ client: second, prefix, leaseSeconds: 3 });
      stores.push(small);
      const order: string[] = [];
      const held: Permit[] = [];
      const ask = (from: RedisLaneStore, party: string, n: number): void => {
        const permit = from.enter('tool:fair', 1, () => order.push(`${party}${n}`), party);
        held.push(permit);
      };
      ask(big, 'big', 0);
      await big.idle();
      for (let n = 1; n <= 6; n++) ask(big, 'big', n);
      await big.idle();
      for (let n = 0; n < 2; n++) ask(small, 'small', n);
      await small.idle();
      // Each grant is given back as soon as it comes; the next goes to whoever the rule says.
      for (let granted = 1; granted < 9; granted++) {
        await until(() => order.length === granted, `grant ${granted}`);
        held.find((p) => p.holding)!.leave();
      }
      await until(() => order.length === 9, 'the last grant');
      held.find((p) => p.holding)!.leave();
      expect(order).to.deep.equal(['big0', 'big1', 'small0', 'big2', 'small1', 'big3', 'big4', 'big5', 'big6']);
    });
  });

  describe('wake-ups', () => {
    it("wakes another process's waiter by pub/sub: the waiter sends nothing until it is granted", async () => {
      const holder = store();
      const counting = new CountingConnection(nodeRedisConnection(redis.client));
      const waiter = new RedisLaneStore({ client: counting, prefix, leaseSeconds: 30 });
      stores.push(waiter);
      const held = holder.enter('tool:wake', 1, () => undefined);
      await holder.idle();
      let granted = false;
      const waiting = waiter.enter('tool:wake', 1, () => (granted = true));
      await waiter.idle();
      // Let the subscription settle: its sync is a script of its own.
      await sleep(50);
      await waiter.idle();
      const before = counting.scripts;
      held.leave();
      await until(() => granted, 'the wake-up');
      expect(waiting.holding).to.equal(true);
      expect(counting.scripts - before, 'scripts the waiter sent before its grant').to.equal(0);
      waiting.leave();
      await waiter.idle();
    });

    it('catches a wake-up that never came at the next heartbeat', async () => {
      const holder = store();
      const counting = new CountingConnection(nodeRedisConnection(redis.client));
      counting.dropWakeUps = true;
      const waiter = new RedisLaneStore({ client: counting, prefix, leaseSeconds: 0.6 });
      stores.push(waiter);
      const held = holder.enter('tool:missed', 1, () => undefined);
      await holder.idle();
      let granted = false;
      const waiting = waiter.enter('tool:missed', 1, () => (granted = true));
      await waiter.idle();
      await sleep(50);
      held.leave();
      await holder.idle();
      await until(() => granted, 'the grant, from the heartbeat');
      expect(counting.dropped, 'wake-ups dropped').to.be.greaterThan(0);
      expect(waiting.fence).to.match(/^\d+$/);
      waiting.leave();
      await waiter.idle();
    });

    it("gives a dead holder's permit to a waiter when its lease ends, not a heartbeat later", async () => {
      // A process that took the permit and died: its lease ends 400 ms after it asked.
      const keys = ['h', 'w', 'q', 'p', 'r', 'm', 'd', 'e'].map((k) => `${prefix}{tool:dead}:${k}`);
      const asked = Date.now();
      await redis.client.eval(acquireScript.source, { keys, arguments: [...requestArgs(), 'dead:1', '', '1', '400', `${prefix}{tool:dead}:g`, '1', 'tool:dead'] });
      // A waiter whose heartbeat comes only every 10 s.
      const waiter = store({ leaseSeconds: 30 });
      let grantedAt = 0;
      const waiting = waiter.enter('tool:dead', 1, () => (grantedAt = Date.now()));
      await until(() => grantedAt > 0, 'the reclaimed permit', 5000);
      expect(grantedAt - asked, 'ms from the dead holder asking to the grant').to.be.within(395, 400 + 1000);
      waiting.leave();
      await waiter.idle();
    });
  });

  describe('leases', () => {
    it('reports a permit whose lease ran out and went to another process as lost, and a place in the queue likewise', async () => {
      const lossy = store({ leaseSeconds: 0.6 });
      const told: string[] = [];
      const held = lossy.enter('tool:lease', 1, { granted: () => told.push('granted'), lost: (error) => told.push(`lost: ${error.message}`) });
      const queued = lossy.enter('tool:lease', 1, { granted: () => told.push('second granted'), lost: (error) => told.push(`second lost: ${error.message}`) });
      await lossy.idle();
      expect(told).to.deep.equal(['granted']);
      // As if this process had been paused past its leases: another process reclaimed them (what
      // its reclaim does: the waiter's place withdrawn, the holder's permit given back).
      const keys = ['h', 'w', 'q', 'p', 'r', 'm', 'd', 'e'].map((k) => `${prefix}{tool:lease}:${k}`);
      for (const permit of [queued, held]) {
        const { id } = permit as unknown as { id: string };
        await redis.client.eval(leaveScript.source, { keys, arguments: [...requestArgs(), id, `${prefix}{tool:lease}:g`, '1'] });
      }
      const other = store();
      let otherGranted = false;
      const taken = other.enter('tool:lease', 1, () => (otherGranted = true));
      await until(() => otherGranted, "the other process's grant");
      await until(() => told.length === 3, 'the losses, at the next heartbeat');
      expect(told.slice(1).sort()).to.deep.equal([
        'lost: its lease on tool:lease was lost (the lease ran out before it was refreshed and went to another request: this process was paused, or could not reach Redis, for longer than the 0.6 s lease)',
        'second lost: its place in the queue of tool:lease was lost (the lease ran out before it was refreshed and went to another request: this process was paused, or could not reach Redis, for longer than the 0.6 s lease)',
      ]);
      expect(held.holding).to.equal(false);
      // Leaving a lost permit does nothing: the other process keeps the one it was given.
      held.leave();
      queued.leave();
      await lossy.idle();
      expect((await other.snapshot(['tool:lease']))[0]).to.include({ holders: 1, waiters: 0 });
      taken.leave();
      await other.idle();
    });

    it('keeps a lease refreshed for as long as the permit is held, many leases long', async () => {
      const keeper = store({ leaseSeconds: 0.3 });
      let lost = false;
      const held = keeper.enter('tool:kept', 1, { granted: () => undefined, lost: () => (lost = true) });
      await sleep(1200);
      expect(lost).to.equal(false);
      expect(held.holding).to.equal(true);
      const other = store();
      let granted = false;
      const waiting = other.enter('tool:kept', 1, () => (granted = true));
      await sleep(200);
      expect(granted, 'a waiter granted a permit whose holder is alive').to.equal(false);
      held.leave();
      await until(() => granted, 'the grant once the holder leaves');
      waiting.leave();
      await other.idle();
    });

    it('gives fencing tokens that grow with every grant of a lane, even after the lane was idle and forgotten', async () => {
      const fenced = store();
      const fences: bigint[] = [];
      for (let i = 0; i < 3; i++) {
        const permit = fenced.enter('tool:fence', 1, () => undefined);
        await fenced.idle();
        fences.push(BigInt(permit.fence!));
        permit.leave();
        await fenced.idle();
      }
      expect(await keysUnder(redis.client, `${prefix}{tool:fence}`), 'keys of the idle lane').to.deep.equal([]);
      expect(fences[1]! > fences[0]! && fences[2]! > fences[1]!, `fences ${fences.join(', ')}`).to.equal(true);
    });
  });

  describe('inLane', () => {
    it('runs an Observable inside a fleet lane, and fails it with the reason when its lease is lost', async () => {
      const lanes = store({ leaseSeconds: 0.6 });
      const ran = await lastValueFrom(of('ran').pipe(inLane(lanes, 'tool:operator', 1)));
      expect(ran).to.equal('ran');
      const failed = lastValueFrom(NEVER.pipe(inLane(lanes, 'tool:operator', 1))).catch((error: Error) => error);
      await until(async () => ((await lanes.snapshot(['tool:operator']))[0]?.holders ?? 0) === 1, 'the permit held');
      const keys = ['h', 'w', 'q', 'p', 'r', 'm', 'd', 'e'].map((k) => `${prefix}{tool:operator}:${k}`);
      const [id] = await redis.client.zRange(keys[0]!, 0, 0);
      await redis.client.eval(leaveScript.source, { keys, arguments: [...requestArgs(), id!, `${prefix}{tool:operator}:g`, '1'] });
      const error = await failed;
      expect(error).to.be.instanceOf(LaneLostError);
      expect((error as LaneLostError).lane).to.equal('tool:operator');
    });
  });

  describe('keys', () => {
    it('keeps every key of a lane under one hash tag, a key with braces in it too, and lets an abandoned lane expire', async () => {
      const tagged = store();
      const key = 'args:book:{"room":"{a}"}';
      const permit = tagged.enter(key, 1, () => undefined);
      const waiting = tagged.enter(key, 1, () => undefined);
      await tagged.idle();
      const keys = await keysUnder(redis.client, `${prefix}{args:book:`);
      expect(keys).to.have.length(8);
      const tags = new Set(keys.map((name) => /\{([^}]*)\}/.exec(name)![1]));
      expect([...tags]).to.deep.equal(['args:book:%7B"room":"%7Ba%7D"%7D']);
      for (const name of keys) expect(await redis.client.pTTL(name), `${name} expires`).to.be.within(1, 3000 * 2);
      permit.leave();
      waiting.leave();
      await tagged.idle();
      expect(await keysUnder(redis.client, `${prefix}{args:book:`)).to.deep.equal([]);
    });

    it('runs its scripts again after Redis forgot them (NOSCRIPT)', async () => {
      const forgetful = store();
      await redis.client.scriptFlush();
      const permit = forgetful.enter('tool:flushed', 1, () => undefined);
      await forgetful.idle();
      expect(permit.holding).to.equal(true);
      permit.leave();
      await forgetful.idle();
    });
  });

  describe('views', () => {
    it("shows this process's lanes in occupancy() and changes$, and the fleet's in snapshot()", async () => {
      const one = store();
      const second = ioredis();
      closers.push(() => second.quit());
      const two = new RedisLaneStore({ client: second, prefix, leaseSeconds: 3 });
      stores.push(two);
      const changes: Array<LaneChange['change']> = [];
      const watching = one.changes$.subscribe((c) => changes.push(c.change));
      const a = one.enter('tenant:view', 1, () => undefined, 'acme');
      await one.idle();
      const b = two.enter('tenant:view', 1, () => undefined, 'globex');
      await two.idle();
      const c = one.enter('tenant:view', 1, () => undefined, 'acme');
      await Promise.all([one.idle(), two.idle()]);
      expect(one.occupancy()).to.deep.equal([{ key: 'tenant:view', limit: 1, holders: 1, waiters: 1 }]);
      expect(two.occupancy()).to.deep.equal([{ key: 'tenant:view', limit: 1, holders: 0, waiters: 1 }]);
      const [lane] = await one.snapshot(['tenant:view', 'tenant:nobody']);
      expect(lane).to.deep.equal({ key: 'tenant:view', limit: 1, holders: 1, waiters: 2, parties: ['globex', 'acme'] });
      expect((await two.snapshot()).map((l) => l.key)).to.include('tenant:view');
      for (const p of [a, b, c]) p.leave();
      await Promise.all([one.idle(), two.idle()]);
      watching.unsubscribe();
      expect(changes).to.deep.equal(['queued', 'granted', 'queued', 'released', 'withdrawn']);
    });
  });

  describe('options', () => {
    const cases: Array<{ title: string; options: Record<string, unknown>; field: string }> = [
      { title: 'a client that is not one', options: { client: {} }, field: 'client' },
      { title: 'a prefix with a brace', options: { prefix: 'a{b' }, field: 'prefix' },
      { title: 'a lease of zero', options: { leaseSeconds: 0 }, field: 'leaseSeconds' },
      { title: 'a timeout longer than a third of the lease', options: { leaseSeconds: 3, timeoutSeconds: 2 }, field: 'timeoutSeconds' },
      { title: 'an unknown whenUnreachable', options: { whenUnreachable: 'retry' }, field: 'whenUnreachable' },
      { title: 'a negative rateJitterMs', options: { rateJitterMs: -1 }, field: 'rateJitterMs' },
      { title: 'an option it does not have', options: { leaseMs: 100 }, field: 'leaseMs' },
    ];
    for (const c of cases) {
      it(`refuses ${c.title}, naming the field`, () => {
        let thrown: unknown;
        try {
          new RedisLaneStore({ client: redis.client, ...c.options } as ConstructorParameters<typeof RedisLaneStore>[0]);
        } catch (error) {
          thrown = error;
        }
        expect(thrown).to.be.instanceOf(ConfigError);
        expect((thrown as ConfigError).field).to.equal(c.field);
      });
    }
  });
});
