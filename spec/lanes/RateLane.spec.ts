import { expect } from 'chai';
import { defer, merge, mergeMap, of, timer, type Observable, type SchedulerLike } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import fc from 'fast-check';
import { inLane, LaneTable, RatedStore, RateLane, type LaneChange, type LaneNotice, type Permit, type Rate, type RateDecider, type RatePermit } from '../../lib/lanes/index.js';

// One admission every 10 frames (virtual ms), no burst.
const tenPerTenth: Rate = { limit: 1, perSeconds: 0.01 };

// Enters a rate lane with `enter` for a call whose body starts as soon as it is admitted
// (`admitted` told first): its admission is spent then, as a batch spends it.
function startsAtOnce(enter: (onGrant: () => void) => Permit, admitted: () => void): Permit {
  let permit: Permit | undefined;
  let early = false;
  permit = enter(() => {
    admitted();
    if (permit === undefined) early = true;
    else permit.started?.();
  });
  if (early) permit.started?.();
  return permit;
}

// The most starts (sorted times) in any window of `span` frames, half open; two starts exactly
// `span` apart, but for the rounding of fractional frames, are in two windows.
function mostInWindow(starts: readonly number[], span: number): number {
  let most = 0;
  for (let i = 0, j = 0; i < starts.length; i++) {
    while (starts[i]! - starts[j]! >= span - 1e-9) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe('RateLane (virtual time)', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  // The test scheduler's clock, whose timers each run `lag()` frames late, as a busy process's do.
  function lateScheduler(lag: () => number): SchedulerLike {
    return { now: () => testScheduler.now(), schedule: (work, delay, state) => testScheduler.schedule(work as never, (delay ?? 0) + lag(), state) };
  }

  // Each source runs once admitted by rate lane `key` of `table`, as `party`.
  function admitted<T>(table: LaneTable, rate: Rate | undefined, party: string, source: Observable<T>, key = 'rate:tool:search'): Observable<T> {
    return source.pipe(inLane(new RatedStore(table, rate, testScheduler), key, 1, { party }));
  }

  it('admits at its steady rate: one per interval, the first at once', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const table = new LaneTable();
      const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((id) => cold(`(${id}|)`));
      const all = merge(...[a!, b!, c!, d!].map((s) => admitted(table, tenPerTenth, 'acme', s)));
      expectObservable(all).toBe('a 9ms b 9ms c 9ms (d|)');
      expectSubscriptions(a!.subscriptions).toBe('(^!)');
      expectSubscriptions(d!.subscriptions).toBe('30ms (^!)');
    });
  });

  it('with a limit of one a window, follows a call its late timer let go by the next a whole window later', () => {
    // Every timer of this clock runs 3 frames late, as a busy process's do.
    const late = lateScheduler(() => 3);
    const lane = new RateLane('rate:tool:search', tenPerTenth, late);
    const at: number[] = [];
    testScheduler.run(() => {
      for (let i = 0; i < 4; i++) startsAtOnce((go) => lane.enter(go), () => at.push(testScheduler.now()));
    });
    // Counted from their slots (0, 10, 20, 30) the late ones would go at 13, 23, 33: the call at 13
    // and the one at 23 would then share a window of 10 frames with one more. The window after each
    // start holds it alone: the rate thins by the lag, as it must at one a window.
    expect(at).to.deep.equal([0, 13, 26, 39]);
  });

  it('keeps its slots when its own timer runs late: a late start does not thin the rate', () => {
    // Two a window of 20 frames, every timer 3 frames late.
    testScheduler.run(({ cold, expectObservable }) => {
      const late = lateScheduler(() => 3);
      const table = new LaneTable();
      const ids = ['a', 'b', 'c', 'd', 'e', 'f'];
      const sources = ids.map((id) => cold(`(${id}|)`));
      const all = merge(...sources.map((s) => s.pipe(inLane(new RatedStore(table, { limit: 2, perSeconds: 0.02 }, late), 'rate:tool:search', 1))));
      // One every 10 frames. b goes at 13 (its slot 10, its timer late) and is
      // counted from 10, so c's slot stays 20 (it goes at 23). d's slot, 30, would put it in the
      // window of 20 after b's start (13): it waits for 33, and goes at 36; and so on. Counted from
      // when each went, they would go at 0, 13, 26, 39, 52, 65.
      expectObservable(all).toBe('a 12ms b 9ms c 12ms d 9ms e 12ms (f|)');
    });
  });

  it('loses the lag of its late timers once a window, not once a call', () => {
    // Ten a window of 100 frames (one every 10), every timer 3 frames late.
    const lane = new RateLane('rate:tool:search', { limit: 10, perSeconds: 0.1 }, lateScheduler(() => 3));
    const at: number[] = [];
    testScheduler.run(() => {
      for (let i = 0; i < 30; i++) startsAtOnce((go) => lane.enter(go), () => at.push(testScheduler.now()));
    });
    // Each window of 100 frames after the first start holds 10 starts: the lag of 3 frames is lost
    // once a window (the start that the window of a late one holds back), not once a call.
    const second = [103, 116, 126, 136, 146, 156, 166, 176, 186, 196];
    expect(at).to.deep.equal([0, 13, 23, 33, 43, 53, 63, 73, 83, 93, ...second, 206, ...second.slice(1).map((t) => t + 103)]);
    expect(mostInWindow(at, 100)).to.equal(10);
  });

  it('counts a late start from its slot only up to half an interval: beyond the burst, starts are never closer', () => {
    // One every 10 frames; the second timer runs 30 frames late, the rest on time.
    let timers = 0;
    const lane = new RateLane('rate:tool:search', { limit: 10, perSeconds: 0.1 }, lateScheduler(() => (++timers === 1 ? 30 : 0)));
    const at: number[] = [];
    testScheduler.run(() => {
      for (let i = 0; i < 4; i++) startsAtOnce((go) => lane.enter(go), () => at.push(testScheduler.now()));
    });
    // b's slot was 10; it went at 40, counted from 35: c follows 5 frames later, then every 10.
    expect(at).to.deep.equal([0, 40, 45, 55]);
  });

  it('counts a call that starts after its admission (in a later lane) from its start, as before', () => {
    const lane = new RateLane('rate:tool:search', { limit: 10, perSeconds: 0.1 }, lateScheduler(() => 3));
    const at: number[] = [];
    testScheduler.run(() => {
      for (let i = 0; i < 3; i++) {
        // Each admitted call starts 2 frames after its admission (a later lane held it).
        const permit: RatePermit = lane.enter(() => void testScheduler.schedule(() => (at.push(testScheduler.now()), permit.started()), 2));
      }
    });
    // Admitted at 0, 15 (slot 12, late), 30: each start is counted from when it came.
    expect(at).to.deep.equal([2, 17, 32]);
  });

  it('never lets a window of perSeconds hold more than limit + burst - 1 starts, nor more than burst within half an interval, however late its timers run (property)', () => {
    fc.assert(
      fc.property(
        fc.record({
          limit: fc.integer({ min: 1, max: 8 }),
          burst: fc.integer({ min: 1, max: 3 }),
          perSeconds: fc.constantFrom(0.04, 0.1),
          lags: fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 20 }),
          // When each call arrives (frames), and whether its body starts in the tick it is admitted,
          // a few frames later, or never (it leaves 3 frames after its admission).
          calls: fc.array(fc.record({ at: fc.integer({ min: 0, max: 300 }), after: fc.constantFrom(0, 0, 0, 1, 7, -1) }), { minLength: 1, maxLength: 60 }),
        }),
        ({ limit, burst, perSeconds, lags, calls }) => {
          const scheduler = new TestScheduler(() => undefined);
          let timers = 0;
          const late: SchedulerLike = { now: () => scheduler.now(), schedule: (work, delay, state) => scheduler.schedule(work as never, (delay ?? 0) + lags[timers++ % lags.length]!, state) };
          const lane = new RateLane('rate:tool:search', { limit, perSeconds, burst }, late);
          const starts: number[] = [];
          scheduler.run(() => {
            for (const call of calls) {
              scheduler.schedule(() => {
                if (call.after === 0) {
                  startsAtOnce((go) => lane.enter(go), () => starts.push(scheduler.now()));
                  return;
                }
                const permit: RatePermit = lane.enter(() => {
                  if (call.after < 0) scheduler.schedule(() => permit.leave(), 3);
                  else scheduler.schedule(() => (starts.push(scheduler.now()), permit.started()), call.after);
                });
              }, call.at);
            }
          });
          expect(starts).to.have.length(calls.filter((call) => call.after >= 0).length);
          expect(mostInWindow(starts, perSeconds * 1000)).to.be.at.most(limit + burst - 1);
          // Beyond the burst, two starts are at least half an interval apart.
          expect(mostInWindow(starts, (perSeconds * 1000) / limit / 2)).to.be.at.most(burst);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('lets the head go at a time a fleet\'s server reserved, without asking again; one that left hands it on', () => {
    const asked: number[] = [];
    const decider: RateDecider = { ask: (lane) => (asked.push(testScheduler.now()), lane.reserved(10)) };
    const lane = new RateLane('rate:tool:search', tenPerTenth, testScheduler, undefined, decider);
    const at: Array<[string, number]> = [];
    testScheduler.run(() => {
      const a = lane.enter(() => at.push(['a', testScheduler.now()]));
      lane.enter(() => at.push(['b', testScheduler.now()]));
      // a leaves before its reserved admission comes: b, next in the queue, goes in its place at 10.
      testScheduler.schedule(() => a.leave(), 4);
    });
    expect(at).to.deep.equal([['b', 10]]);
    // Asked once for b's admission (made for a) and once more for nobody: the queue was empty after b.
    expect(asked).to.deep.equal([0]);
  });

  it("does not use a fleet's answer to a question asked before a pause began: it asks again", () => {
    const asked: number[] = [];
    // The server answers 5 frames after each question, admitting (it has not heard of the pause).
    const decider: RateDecider = { ask: (lane) => (asked.push(testScheduler.now()), testScheduler.schedule(() => lane.decided(0), 5)) };
    const lane = new RateLane('rate:tool:search', tenPerTenth, testScheduler, undefined, decider);
    const at: number[] = [];
    testScheduler.run(() => {
      lane.enter(() => at.push(testScheduler.now()));
      testScheduler.schedule(() => lane.pause(20), 2);
    });
    // The answer at 5 was to the question of 0, before the pause of 2: not used, asked again at 5.
    expect(asked).to.deep.equal([0, 5]);
    expect(at).to.deep.equal([10]);
  });

  it('gives up a reserved admission when the head leaves with nobody behind it, its timer cleared', () => {
    const decider: RateDecider = { ask: (lane) => lane.reserved(10) };
    const lane = new RateLane('rate:tool:search', tenPerTenth, testScheduler, undefined, decider);
    let granted = 0;
    testScheduler.run(() => {
      const a = lane.enter(() => granted++);
      testScheduler.schedule(() => a.leave(), 4);
      testScheduler.schedule(() => expect(testScheduler.actions.length).to.equal(0), 5);
    });
    expect(granted).to.equal(0);
    expect(lane.waiters).to.equal(0);
  });

  it('learns its pace from its pauses: what it admitted between two over the time between their ends, evenly spaced after', () => {
    const lane = new RateLane('rate:tool:partner', undefined, testScheduler);
    lane.learn();
    const at: Array<[string, number]> = [];
    const admit = (id: string): void => void startsAtOnce((go) => lane.enter(go), () => at.push([id, testScheduler.now()]));
    testScheduler.run(() => {
      // Nothing learned yet: every call at once. The first pause (until 10) only starts the count.
      for (const id of ['a', 'b']) admit(id);
      lane.pause(10);
      // Five admitted as the pause ends, one of them refused (it sets off the next pause, at 20 until
      // 50): 4 calls went through in 40 ms, 100 a second, one every 10 ms.
      testScheduler.schedule(() => ['c', 'd', 'e', 'f', 'g'].forEach(admit), 10);
      testScheduler.schedule(() => lane.pause(30), 20);
      testScheduler.schedule(() => ['h', 'i', 'j'].forEach(admit), 21);
    });
    expect(at).to.deep.equal([['a', 0], ['b', 0], ['c', 10], ['d', 10], ['e', 10], ['f', 10], ['g', 10], ['h', 50], ['i', 60], ['j', 70]]);
    expect(lane.occupancy()).to.include({ key: 'rate:tool:partner', limit: 100, perSeconds: 1, burst: 1, learned: true });
  });

  it('grows a learned pace by one call a second for each second without a pause, and keeps it while idle', () => {
    const table = new LaneTable();
    const at: number[] = [];
    testScheduler.run(() => {
      table.learnRate('rate:tool:partner', testScheduler);
      const admit = (): void => void startsAtOnce((go) => table.enterRate('rate:tool:partner', undefined, go, '', testScheduler), () => at.push(testScheduler.now()));
      table.pause('rate:tool:partner', 0.01, 'slow down', testScheduler);
      // Three calls between the pauses' ends (10 and 1,010), one refused: 2 a second, one every 500 ms.
      testScheduler.schedule(() => (admit(), admit(), admit()), 10);
      testScheduler.schedule(() => table.pause('rate:tool:partner', 0.01, 'slow down', testScheduler), 1000);
      // A quiet second later (the lane idle, not forgotten), the pace has grown to 3 a second.
      testScheduler.schedule(() => (admit(), admit(), admit()), 2100);
    });
    expect(at.map(Math.round)).to.deep.equal([10, 10, 10, 2100, 2433, 2767]);
  });

  it('admits up to its burst at once, then at the steady rate', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const table = new LaneTable();
      // Two per 20 ms (one per 10), up to three at once.
      const rate: Rate = { limit: 2, perSeconds: 0.02, burst: 3 };
      const all = merge(...['a', 'b', 'c', 'd', 'e'].map((id) => admitted(table, rate, 'acme', cold(`(${id}|)`))));
      expectObservable(all).toBe('(abc) 5ms d 9ms (e|)');
    });
  });

  it('spaces calls evenly by default (burst 1): never more than limit in any window of perSeconds', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const table = new LaneTable();
      // Three a frame-window of 30: one every 10 frames, the first at once, even after a quiet start.
      const rate: Rate = { limit: 3, perSeconds: 0.03 };
      const all = merge(...['a', 'b', 'c', 'd'].map((id) => admitted(table, rate, 'acme', cold(`(${id}|)`))));
      expectObservable(timer(5).pipe(mergeMap(() => all))).toBe('5ms a 9ms b 9ms c 9ms (d|)');
    });
  });

  it('refills while nobody asks: after a quiet spell a full burst goes at once again', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const table = new LaneTable();
      const rate: Rate = { limit: 2, perSeconds: 0.02, burst: 2 };
      const early = merge(admitted(table, rate, 'acme', cold('(a|)')), admitted(table, rate, 'acme', cold('(b|)')));
      const late = merge(admitted(table, rate, 'acme', cold('(c|)')), admitted(table, rate, 'acme', cold('(d|)')));
      expectObservable(merge(early, timer(50).pipe(mergeMap(() => late)))).toBe('(ab) 46ms (cd|)');
    });
  });

  it('admits one tenant\'s calls first come, first served', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const table = new LaneTable();
      const all = merge(...['a', 'b', 'c'].map((id) => admitted(table, tenPerTenth, 'acme', cold(`(${id}|)`))));
      expectObservable(all).toBe('a 9ms b 9ms (c|)');
    });
  });

  it('serves tenants round-robin: a long queue of one does not hold back another', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const table = new LaneTable();
      const big = ['a', 'b', 'c', 'd'].map((id) => admitted(table, tenPerTenth, 'big', cold(`(${id}|)`)));
      const small = ['x', 'y'].map((id) => admitted(table, tenPerTenth, 'small', cold(`(${id}|)`)));
      // a at once, b waits its time with c and d queued behind it; x comes after c, not after d.
      expectObservable(merge(...big, ...small)).toBe('a 9ms b 9ms c 9ms x 9ms d 9ms (y|)');
    });
  });

  it('never starts a call stopped while it waits, and gives its slot to the next', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const table = new LaneTable();
      const [a, b, c] = ['a', 'b', 'c'].map((id) => cold(`(${id}|)`));
      expectObservable(admitted(table, tenPerTenth, 'acme', a!)).toBe('(a|)');
      expectObservable(admitted(table, tenPerTenth, 'acme', b!), '^----!').toBe('');
      expectObservable(admitted(table, tenPerTenth, 'acme', c!)).toBe('10ms (c|)');
      expectSubscriptions(b!.subscriptions).toBe([]);
      expectSubscriptions(c!.subscriptions).toBe('10ms (^!)');
    });
  });

  it('a stop while waiting withdraws the request: nobody is left waiting', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const table = new LaneTable();
      const changes: string[] = [];
      table.changes$.subscribe((change: LaneChange) => changes.push(`${change.change}:${change.waiters}`));
      expectObservable(admitted(table, tenPerTenth, 'acme', cold('(a|)'))).toBe('(a|)');
      expectObservable(admitted(table, tenPerTenth, 'acme', cold('(b|)')), '^--!').toBe('');
      testScheduler.schedule(() => expect(table.occupancy()[0]).to.include({ key: 'rate:tool:search', waiters: 0 }), 5);
      testScheduler.schedule(() => expect(changes).to.deep.equal(['granted:0', 'queued:1', 'withdrawn:0']), 50);
    });
  });

  it('after a pause admits nothing until it ends, then one at the steady rate (no burst)', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const table = new LaneTable();
      const notices: LaneNotice[] = [];
      table.pauses$.subscribe((notice) => notices.push(notice));
      const rate: Rate = { limit: 3, perSeconds: 0.03 };
      // a is admitted at frame 0 and its partner says "slow down for 40 ms"; b to e ask at frame 1.
      const slowDown = defer(() => {
        table.pause('rate:tool:search', 0.04, 'partner answered 429', testScheduler);
        return of('a');
      });
      const first = admitted(table, rate, 'acme', slowDown);
      const rest = ['b', 'c', 'd', 'e'].map((id) => admitted(table, rate, 'acme', cold(`(${id}|)`)));
      expectObservable(merge(first, timer(1).pipe(mergeMap(() => merge(...rest))))).toBe('a 39ms b 9ms c 9ms d 9ms (e|)');
      testScheduler.schedule(() => expect(notices).to.deep.include({ type: 'lane-paused', key: 'rate:tool:search', seconds: 0.04, until: 40, reason: 'partner answered 429', at: 0 }), 1);
    });
  });

  it('a pause that comes before the lane has a rate still holds, and ends at the steady rate', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const table = new LaneTable();
      table.pause('rate:tool:search', 0.02, 'slow down', testScheduler);
      const all = merge(...['a', 'b'].map((id) => admitted(table, { limit: 2, perSeconds: 0.02 }, 'acme', cold(`(${id}|)`))));
      expectObservable(all).toBe('20ms a 9ms (b|)');
    });
  });

  it('a pause on a lane with no rate holds its calls until it ends, then lets them all go', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const table = new LaneTable();
      table.pause('rate:tool:search', 0.02, 'slow down', testScheduler);
      const all = merge(...['a', 'b'].map((id) => admitted(table, undefined, 'acme', cold(`(${id}|)`))));
      expectObservable(all).toBe('20ms (ab|)');
    });
  });

  it('takes a lane with no rate and no pause at once, holding nothing', () => {
    const table = new LaneTable();
    const store = new RatedStore(table, undefined, testScheduler);
    const permit = store.enter('rate:tool:search', 1, () => undefined, 'acme');
    expect(permit.holding).to.equal(true);
    expect(table.occupancy()).to.deep.equal([]);
  });

  it('reports a rate lane in occupancy while it matters, and forgets it once idle', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const table = new LaneTable();
      expectObservable(merge(admitted(table, tenPerTenth, 'acme', cold('(a|)')), admitted(table, tenPerTenth, 'acme', cold('(b|)')))).toBe('a 9ms (b|)');
      testScheduler.schedule(() => expect(table.occupancy()).to.deep.equal([{ key: 'rate:tool:search', limit: 1, perSeconds: 0.01, burst: 1, holders: 0, waiters: 1 }]), 5);
      testScheduler.schedule(() => expect(table.occupancy()).to.deep.equal([]), 20);
    });
  });

  it('refuses a rate that is not one, naming the figure', () => {
    expect(() => new RateLane('r', { limit: 0, perSeconds: 1 }, testScheduler)).to.throw(TypeError, 'Expected a rate limit from 1 up, got 0');
    expect(() => new RateLane('r', { limit: 1, perSeconds: 0 }, testScheduler)).to.throw(TypeError, "Expected a rate's perSeconds above 0, got 0");
    expect(() => new RateLane('r', { limit: 1, perSeconds: 1, burst: 1.5 }, testScheduler)).to.throw(TypeError, "Expected a rate's burst from 1 up, got 1.5");
  });

  it('lets 100,000 waiters go in queue order when a pause ends, without recursing', () => {
    const lane = new RateLane('r', undefined, testScheduler);
    lane.pause(10);
    const order: number[] = [];
    for (let i = 0; i < 100_000; i++) lane.enter(() => order.push(i));
    expect(order).to.have.length(0);
    testScheduler.flush();
    expect(order).to.have.length(100_000);
    expect(order.every((n, i) => n === i)).to.equal(true);
    expect(lane.waiters).to.equal(0);
  });
});
