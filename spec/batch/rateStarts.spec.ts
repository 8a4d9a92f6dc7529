// A rate lane bounds body starts, whatever lanes stand behind it: counted from the bodies' side
// (the frame each body is invoked), in virtual time. An admitted call that waits in a later lane
// (tenant, turn, tool, adaptive, identical arguments) keeps its slot and spends it when its body
// starts; one that leaves without starting (a budget refused it, it was stopped) gives it back.
import { expect } from 'chai';
import fc from 'fast-check';
import { defer, map, merge, timer, type Observable } from 'rxjs';
import { mergeMap } from 'rxjs/operators';
import { TestScheduler } from 'rxjs/testing';
import { runBatch, type BatchCall, type Outcome, type StopReason } from '../../lib/batch/index.js';
import { ConcurrencyConfig } from '../../lib/config/index.js';
import { LaneTable } from '../../lib/lanes/index.js';
import { call } from './helpers.js';

/** The most starts any window [t, t + ms) holds. */
export function mostInWindow(starts: readonly number[], ms: number): number {
  const sorted = [...starts].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= ms) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

describe('a rate lane counts body starts, whatever lanes stand behind it (virtual time)', () => {
  let testScheduler: TestScheduler;
  // When each body started, by call id, as the bodies see it.
  let starts: Array<[string, number]>;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
    starts = [];
  });

  // A body that notes when it is invoked and answers its id after `ms`.
  function body(id: string, ms: number): Observable<string> {
    return defer(() => {
      starts.push([id, testScheduler.now()]);
      return timer(ms).pipe(map(() => id));
    });
  }

  function search(id: string, ms: number, extra: Partial<BatchCall> = {}): BatchCall {
    return call(id, body(id, ms), { tool: 'search', ...extra });
  }

  // Two searches a second: one every 500 ms.
  const twoASecond = { search: { limit: 2, perSeconds: 1 } };

  function run(batches: () => Observable<Outcome>): void {
    testScheduler.run(() => {
      batches().subscribe();
    });
  }

  const startTimes = (): number[] => starts.map(([, at]) => at);

  it('2 a second behind a tool lane of 1: no second holds more than 2 starts (calls admitted while the lane was busy do not start back to back)', () => {
    const config = new ConcurrencyConfig({ perToolRate: twoASecond, perTool: { search: 1 } });
    const table = new LaneTable();
    // a runs a second; b, c, d are quick. Admitted at 0, 500, 1000, 1500 and counted then, b, c and d
    // would start at 1000, 1010 and 1500: three in one second.
    run(() => runBatch([search('a', 1000), search('b', 10), search('c', 10), search('d', 10)], { concurrency: config, shared: { lanes: table, concurrency: config }, scheduler: testScheduler }));
    expect(starts).to.deep.equal([['a', 0], ['b', 1000], ['c', 1500], ['d', 2000]]);
    expect(mostInWindow(startTimes(), 1000)).to.be.at.most(2);
    // Nothing held, nobody waiting, no admission outstanding: only the bucket refilling.
    expect(table.occupancy()).to.deep.equal([{ key: 'rate:tool:search', limit: 2, perSeconds: 1, burst: 1, holders: 0, waiters: 0 }]);
  });

  it('the same with every body a second long: the tool lane alone spaces them', () => {
    const config = new ConcurrencyConfig({ perToolRate: twoASecond, perTool: { search: 1 } });
    run(() => runBatch(['a', 'b', 'c', 'd'].map((id) => search(id, 1000)), { concurrency: config, shared: { lanes: new LaneTable(), concurrency: config }, scheduler: testScheduler }));
    expect(startTimes()).to.deep.equal([0, 1000, 2000, 3000]);
  });

  // A fetch of the same tenant holds the later lane for a second; the searches wait behind it.
  const behind = [
    { title: 'a tenant lane', config: { perTenant: 1 } },
    { title: 'a turn lane (maxConcurrentTools)', config: { maxConcurrentTools: 1 } },
  ];
  for (const c of behind) {
    it(`behind ${c.title}: admitted searches start no closer than the rate allows`, () => {
      const config = new ConcurrencyConfig({ perToolRate: twoASecond, ...c.config });
      const calls = [call('x', body('x', 1000), { tool: 'fetch' }), search('a', 10), search('b', 10), search('c', 10)];
      run(() => runBatch(calls, { concurrency: config, shared: { lanes: new LaneTable(), concurrency: config }, scheduler: testScheduler }));
      expect(starts).to.deep.equal([['x', 0], ['a', 1000], ['b', 1500], ['c', 2000]]);
    });
  }

  it('behind an adaptive tool lane', () => {
    const config = new ConcurrencyConfig({ perToolRate: twoASecond, perToolAdaptive: { search: { min: 1, max: 1 } } });
    run(() => runBatch([search('a', 1000), search('b', 10), search('c', 10), search('d', 10)], { concurrency: config, shared: { lanes: new LaneTable(), concurrency: config }, scheduler: testScheduler }));
    expect(starts).to.deep.equal([['a', 0], ['b', 1000], ['c', 1500], ['d', 2000]]);
  });

  it('behind an identical-arguments lane (parallelSafe: false), across runs', () => {
    const config = new ConcurrencyConfig({ perToolRate: twoASecond });
    const shared = { lanes: new LaneTable(), concurrency: config };
    const same = { parallelSafe: false, args: { q: 'rates' } };
    run(() => merge(...[search('a', 1000, same), search('b', 10, same), search('c', 10, same), search('d', 10, same)].map((one) => runBatch([one], { shared, scheduler: testScheduler }))));
    expect(starts).to.deep.equal([['a', 0], ['b', 1000], ['c', 1500], ['d', 2000]]);
  });

  it('with a burst of 2: no window holds more than the burst and the refills', () => {
    const config = new ConcurrencyConfig({ perToolRate: { search: { limit: 2, perSeconds: 1, burst: 2 } }, perTool: { search: 1 } });
    run(() => runBatch([search('a', 1000), search('b', 10), search('c', 10), search('d', 10), search('e', 10)], { concurrency: config, shared: { lanes: new LaneTable(), concurrency: config }, scheduler: testScheduler }));
    // Counted at admission, b, c and d would start at 1000, 1010 and 1020: three within 21 ms.
    expect(startTimes()).to.deep.equal([0, 1000, 1010, 1500, 2000]);
    for (const w of [1, 100, 499, 500, 999, 1000, 2000]) expect(mostInWindow(startTimes(), w), `window ${w}`).to.be.at.most(2 + Math.floor(w / 500));
  });

  it('a call a budget refuses after its rate admitted it gives its slot back: the next one goes at once', () => {
    // The tenant's rate covers its searches and fetches; its budget covers 3 of cost.
    const config = new ConcurrencyConfig({ perTenantRate: { acme: { limit: 2, perSeconds: 1 } }, perTenantBudget: { cost: 3, perSeconds: 100 } });
    const table = new LaneTable({ now: () => testScheduler.now() });
    const outcomes: Outcome[] = [];
    testScheduler.run(() => {
      const calls = [search('a', 10, { cost: 1 }), search('b', 10, { cost: 1 }), call('c', body('c', 10), { tool: 'fetch', cost: 5 }), search('d', 10, { cost: 1 })];
      runBatch(calls, { concurrency: config, shared: { lanes: table, concurrency: config }, tenant: 'acme', scheduler: testScheduler }).subscribe((o) => outcomes.push(o));
    });
    // c, admitted at 1000, costs more than is left: refused, it never starts, and d takes its slot at 1000, not 1500.
    expect(starts).to.deep.equal([['a', 0], ['b', 500], ['d', 1000]]);
    expect(outcomes.map((o) => [o.callId, o.kind, o.dispatched])).to.deep.equal([['a', 'result', true], ['b', 'result', true], ['c', 'error', false], ['d', 'result', true]]);
  });

  it('a call stopped while it waits in a later lane after its admission gives its slot back: the next one is admitted then', () => {
    // The tenant's rate (2 a second) is shared by its searches and its fetches.
    const config = new ConcurrencyConfig({ perTenantRate: { acme: { limit: 2, perSeconds: 1 } }, perTool: { search: 1 } });
    const shared = { lanes: new LaneTable(), concurrency: config };
    run(() => {
      const stop$ = timer(600).pipe(map((): StopReason => ({ kind: 'cancelled', why: 'the run was cancelled' })));
      const x = runBatch([search('x', 1000)], { shared, tenant: 'acme', scheduler: testScheduler });
      // a is admitted at 500 and waits for x's tool permit; its run is cancelled at 600.
      const a = runBatch([search('a', 10)], { shared, tenant: 'acme', stop$, scheduler: testScheduler });
      const f = timer(550).pipe(mergeMap(() => runBatch([call('f', body('f', 10), { tool: 'fetch' })], { shared, tenant: 'acme', scheduler: testScheduler })));
      return merge(x, a, f);
    });
    // f, waiting behind a's slot, goes as a's slot comes back; a never starts.
    expect(starts).to.deep.equal([['x', 0], ['f', 600]]);
  });

  it('holds no concurrency permit while a call waits on the clock: another tool of its tenant runs meanwhile', () => {
    const config = new ConcurrencyConfig({ perToolRate: twoASecond, perTool: { search: 1 }, perTenant: 3 });
    const shared = { lanes: new LaneTable(), concurrency: config };
    const seen: Array<Array<[string, number]>> = [];
    run(() => {
      // a runs a second; b is admitted at 500 and waits for the tool lane holding a tenant permit;
      // c waits for the clock (b has the slot) holding nothing, so the fetch at 600 finds a tenant permit free.
      const searches = runBatch([search('a', 1000), search('b', 10), search('c', 10)], { shared, tenant: 'acme', scheduler: testScheduler });
      const f = timer(600).pipe(mergeMap(() => runBatch([call('f', body('f', 10), { tool: 'fetch' })], { shared, tenant: 'acme', scheduler: testScheduler })));
      testScheduler.schedule(() => seen.push(shared.lanes.occupancy().map((lane) => [lane.key, lane.holders] as [string, number])), 550);
      return merge(searches, f);
    });
    expect(starts).to.deep.equal([['a', 0], ['f', 600], ['b', 1000], ['c', 1500]]);
    expect(seen[0]).to.deep.include.members([['tenant:acme', 2], ['tool:search', 1]]);
  });

  it('property: with random lanes behind it and random bodies, no window holds more starts than the rate allows', () => {
    const arbitrary = fc.record({
      limit: fc.integer({ min: 1, max: 4 }),
      burst: fc.integer({ min: 1, max: 3 }),
      perTool: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
      perTenant: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
      maxConcurrentTools: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
      calls: fc.array(fc.record({ tool: fc.constantFrom('search', 'fetch'), ms: fc.integer({ min: 0, max: 300 }), at: fc.integer({ min: 0, max: 400 }), batch: fc.integer({ min: 0, max: 2 }) }), { minLength: 1, maxLength: 12 }),
    });
    fc.assert(
      fc.property(arbitrary, ({ limit, burst, perTool, perTenant, maxConcurrentTools, calls }) => {
        starts = [];
        testScheduler = new TestScheduler((actual, expected) => {
          expect(actual).to.deep.equal(expected);
        });
        // limit a tenth of a second: one every 100 / limit ms.
        const config = new ConcurrencyConfig({
          perToolRate: { search: { limit, perSeconds: 0.1, burst } },
          ...(perTool === undefined ? {} : { perTool: { search: perTool, fetch: perTool } }),
          ...(perTenant === undefined ? {} : { perTenant }),
          ...(maxConcurrentTools === undefined ? {} : { maxConcurrentTools }),
        });
        const shared = { lanes: new LaneTable(), concurrency: config };
        const searchStarts: number[] = [];
        testScheduler.run(() => {
          const batches = [0, 1, 2].map((n) => {
            const mine = calls.map((c, i) => ({ ...c, id: `c${i}` })).filter((c) => c.batch === n);
            if (mine.length === 0) return undefined;
            const at = Math.min(...mine.map((c) => c.at));
            const made = mine.map((c) =>
              call(c.id, defer(() => {
                if (c.tool === 'search') searchStarts.push(testScheduler.now());
                return timer(c.ms).pipe(map(() => c.id));
              }), { tool: c.tool }),
            );
            return timer(at).pipe(mergeMap(() => runBatch(made, { concurrency: config, shared, tenant: 'acme', scheduler: testScheduler })));
          });
          merge(...batches.filter((b): b is Observable<Outcome> => b !== undefined)).subscribe();
        });
        const interval = 100 / limit;
        for (const w of [1, interval / 2, interval, 2 * interval, 100]) {
          expect(mostInWindow(searchStarts, w), `window ${w}`).to.be.at.most(burst + Math.floor(w / interval));
        }
        expect(searchStarts.length).to.equal(calls.filter((c) => c.tool === 'search').length);
        // Every permit back, nobody waiting, no admission left outstanding.
        for (const lane of shared.lanes.occupancy()) expect([lane.holders, lane.waiters, 'reserved' in lane]).to.deep.equal([0, 0, false]);
      }),
      { numRuns: 200 },
    );
  });
});
