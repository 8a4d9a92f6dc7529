// Rate lanes in a batch, in virtual time: taken before any concurrency permit, paused by a
// partner's "slow down" (RateLimitedError), and a call stopped while it waits never starts.
import { expect } from 'chai';
import { merge, throwError, timer } from 'rxjs';
import { mergeMap } from 'rxjs/operators';
import { TestScheduler } from 'rxjs/testing';
import { runBatch, type BatchCall, type Outcome } from '../../lib/batch/index.js';
import { ConcurrencyConfig } from '../../lib/config/index.js';
import { RateLimitedError } from '../../lib/errors.js';
import { LaneTable, type LaneOccupancy } from '../../lib/lanes/index.js';
import { briefly, call } from './helpers.js';

describe('rate lanes in a batch (virtual time)', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  // One search every 10 frames, at most one call of the tenant at once.
  const config = new ConcurrencyConfig({ perToolRate: { search: { limit: 1, perSeconds: 0.01 } }, perTenant: 1 });

  it('waits for its rate lane before it holds any permit: a call of another tool runs meanwhile', () => {
    const table = new LaneTable();
    const seen: LaneOccupancy[][] = [];
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('--(a|)'), b: cold('--(b|)'), c: cold('--(c|)') };
      const calls = [call('a', bodies.a, { tool: 'search' }), call('b', bodies.b, { tool: 'search' }), call('c', bodies.c, { tool: 'fetch' })];
      const batch = runBatch(calls, { concurrency: config, shared: { lanes: table, concurrency: config }, tenant: 'acme', scheduler: testScheduler });
      // a runs first; b waits for the clock holding no tenant permit, so c runs when a ends (the
      // outcomes go out in call order, so c's waits for b's).
      expectObservable(batch.pipe(briefly)).toBe('--a---------(bc|)', { a: 'a=a', b: 'b=b', c: 'c=c' });
      expectSubscriptions(bodies.c.subscriptions).toBe('--^-!');
      expectSubscriptions(bodies.b.subscriptions).toBe('----------^-!');
      testScheduler.schedule(() => seen.push(table.occupancy()), 5);
    });
    expect(seen[0]).to.deep.equal([{ key: 'rate:tool:search', limit: 1, perSeconds: 0.01, burst: 1, holders: 0, waiters: 1 }]);
  });

  it('bounds a tool across batches that share the store, each call admitted at the steady rate', () => {
    const table = new LaneTable();
    const shared = { lanes: table, concurrency: config };
    testScheduler.run(({ cold, expectObservable }) => {
      const one = runBatch([call('a', cold('(a|)'), { tool: 'search' }), call('b', cold('(b|)'), { tool: 'search' })], { shared, tenant: 'acme', scheduler: testScheduler });
      const two = runBatch([call('x', cold('(x|)'), { tool: 'search' })], { shared, tenant: 'zenith', scheduler: testScheduler });
      expectObservable(merge(one, two).pipe(briefly)).toBe('a 9ms b 9ms (x|)', { a: 'a=a', b: 'b=b', x: 'x=x' });
    });
  });

  it('serves tenants round-robin on a shared rate lane, first come first served within one', () => {
    const table = new LaneTable();
    const shared = { lanes: table, concurrency: new ConcurrencyConfig({ perToolRate: { search: { limit: 1, perSeconds: 0.01 } } }) };
    testScheduler.run(({ cold, expectObservable }) => {
      const big = runBatch(['a', 'b', 'c', 'd'].map((id) => call(id, cold(`(${id}|)`), { tool: 'search' })), { shared, tenant: 'big', scheduler: testScheduler });
      const small = runBatch([call('x', cold('(x|)'), { tool: 'search' })], { shared, tenant: 'small', scheduler: testScheduler });
      // The batch hands its outcomes on in call order; the times say when each was admitted.
      expectObservable(merge(big, small).pipe(briefly)).toBe('a 9ms b 9ms c 9ms x 9ms (d|)', { a: 'a=a', b: 'b=b', c: 'c=c', d: 'd=d', x: 'x=x' });
    });
  });

  it('never starts a call stopped while it waits for its rate lane, and leaves everything', () => {
    const table = new LaneTable();
    testScheduler.run(({ cold, hot, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('--(a|)'), b: cold('--(b|)') };
      const stop$ = hot('-----s', { s: { kind: 'cancelled' as const, why: 'the run was cancelled' } });
      const calls = [call('a', bodies.a, { tool: 'search' }), call('b', bodies.b, { tool: 'search' })];
      const batch = runBatch(calls, { shared: { lanes: table, concurrency: config }, tenant: 'acme', stop$, scheduler: testScheduler });
      const outcomes: Outcome[] = [];
      expectObservable(batch.pipe(mergeMap((o) => (outcomes.push(o), [o.callId])))).toBe('--a--(b|)');
      expectSubscriptions(bodies.b.subscriptions).toBe([]);
      testScheduler.schedule(() => {
        expect(outcomes[1]).to.include({ kind: 'error', dispatched: false });
        expect((outcomes[1] as Extract<Outcome, { kind: 'error' }>).error.message).to.match(/^never dispatched/);
        expect(table.occupancy()).to.deep.equal([]);
      }, 20);
    });
  });

  it('a RateLimitedError fails its own call and pauses the tool: calls waiting for it wait on, they do not fail', () => {
    const table = new LaneTable();
    testScheduler.run(({ cold, expectObservable }) => {
      const calls: BatchCall[] = [
        call('a', () => timer(1).pipe(mergeMap(() => throwError(() => new RateLimitedError('search answered 429', 0.05)))), { tool: 'search' }),
        call('b', cold('-(b|)'), { tool: 'search' }),
      ];
      const batch = runBatch(calls, { shared: { lanes: table, concurrency: config }, tenant: 'acme', scheduler: testScheduler });
      // The pause runs from frame 1 to 51: b, due at 10, waits until 51, then runs one frame.
      expectObservable(batch.pipe(briefly)).toBe('-a 50ms (b|)', { a: 'a!RateLimitedError', b: 'b=b' });
    });
  });

  it('pauses a tool with no rate lane too: a later call to it waits out the pause', () => {
    const table = new LaneTable();
    const plain = new ConcurrencyConfig();
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const shared = { lanes: table, concurrency: plain };
      const first = runBatch([call('a', () => timer(1).pipe(mergeMap(() => throwError(() => new RateLimitedError('slow down', 0.02)))), { tool: 'fetch' })], { shared, scheduler: testScheduler });
      const later = cold('-----(b|)');
      const second = timer(5).pipe(mergeMap(() => runBatch([call('b', later, { tool: 'fetch' })], { shared, scheduler: testScheduler })));
      const other = timer(5).pipe(mergeMap(() => runBatch([call('c', cold('(c|)'), { tool: 'search' })], { shared, scheduler: testScheduler })));
      expectObservable(merge(first, second, other).pipe(briefly)).toBe('-a---c 20ms (b|)', { a: 'a!RateLimitedError', b: 'b=b', c: 'c=c' });
      expectSubscriptions(later.subscriptions).toBe('21ms ^----!');
    });
  });

  it('holds a call already waiting in a later lane when its tool is paused: it starts after the pause, not when the permit frees', () => {
    const table = new LaneTable();
    // No rate declared; one search at a time. b waits in the tool lane behind a, which says "slow down" at 2.
    const one = new ConcurrencyConfig({ perTool: { search: 1 } });
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const later = cold('-(b|)');
      const calls: BatchCall[] = [call('a', () => timer(2).pipe(mergeMap(() => throwError(() => new RateLimitedError('slow down', 0.03)))), { tool: 'search' }), call('b', later, { tool: 'search' })];
      const batch = runBatch(calls, { shared: { lanes: table, concurrency: one }, scheduler: testScheduler });
      // Without the hold, b would start at 2, as a's permit came back; the pause runs 2..32.
      expectObservable(batch.pipe(briefly)).toBe('--a 29ms -(b|)', { a: 'a!RateLimitedError', b: 'b=b' });
      expectSubscriptions(later.subscriptions).toBe('32ms ^!');
      testScheduler.schedule(() => expect(table.occupancy()).to.deep.equal([]), 40);
    });
  });

  it('holds a later call of the same streamed turn whose lanes were worked out before the pause', () => {
    const table = new LaneTable();
    const plain = new ConcurrencyConfig();
    testScheduler.run(({ cold, hot, expectObservable, expectSubscriptions }) => {
      const later = cold('(b|)');
      // One phase, written as the model streams it: a's lanes (none) are worked out, and kept for
      // the tool, before a says "slow down" at 1 (a pause of 20); b arrives at 5, in the same phase.
      const a = call('a', () => timer(1).pipe(mergeMap(() => throwError(() => new RateLimitedError('slow down', 0.02)))), { tool: 'fetch' });
      const calls$ = hot<BatchCall>('a----b|', { a, b: call('b', later, { tool: 'fetch' }) });
      const batch = runBatch(calls$, { shared: { lanes: table, concurrency: plain }, scheduler: testScheduler });
      expectObservable(batch.pipe(briefly)).toBe('-a 19ms (b|)', { a: 'a!RateLimitedError', b: 'b=b' });
      expectSubscriptions(later.subscriptions).toBe('21ms (^!)');
    });
  });

  it('an agent that narrows a rate bounds its own turn with it, never widening the shared one', () => {
    const table = new LaneTable();
    const runner = new ConcurrencyConfig({ perToolRate: { search: { limit: 10, perSeconds: 0.01 } } });
    const turn = runner.narrowedTo({ perToolRate: { search: { limit: 1, perSeconds: 0.01 } } });
    testScheduler.run(({ cold, expectObservable }) => {
      const batch = runBatch(['a', 'b', 'c'].map((id) => call(id, cold(`(${id}|)`), { tool: 'search' })), { concurrency: turn, shared: { lanes: table, concurrency: runner }, scheduler: testScheduler });
      expectObservable(batch.pipe(briefly)).toBe('a 9ms b 9ms (c|)', { a: 'a=a', b: 'b=b', c: 'c=c' });
    });
  });

  it('leaves a call with no rate lane alone: no rate step, nothing in the store', () => {
    const table = new LaneTable();
    testScheduler.run(({ cold, expectObservable }) => {
      const batch = runBatch([call('a', cold('(a|)'), { tool: 'fetch' })], { shared: { lanes: table, concurrency: config }, scheduler: testScheduler });
      expectObservable(batch.pipe(briefly)).toBe('(a|)', { a: 'a=a' });
      testScheduler.schedule(() => expect(table.occupancy()).to.deep.equal([]), 1);
    });
  });
});

describe('retryRateLimited: an idempotent call refused with "slow down" enters its lanes again once (virtual time)', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  // A body that says "slow down for 20 ms" after one frame on its first attempt, and answers on its second.
  function refusedOnce(): { body: () => unknown; attempts: () => number } {
    let attempts = 0;
    const body = () => {
      attempts++;
      return attempts === 1 ? timer(1).pipe(mergeMap(() => throwError(() => new RateLimitedError('slow down', 0.02)))) : timer(1).pipe(mergeMap(() => ['ok']));
    };
    return { body, attempts: () => attempts };
  }

  const cases = [
    { title: 'runs it again once the pause ends, and it succeeds', idempotent: true, retry: true, expected: '22ms (a|)', value: 'a=ok', attempts: 2 },
    { title: 'fails a call not declared idempotent at once', idempotent: false, retry: true, expected: '-(a|)', value: 'a!RateLimitedError', attempts: 1 },
    { title: 'fails it at once when the config does not opt in', idempotent: true, retry: false, expected: '-(a|)', value: 'a!RateLimitedError', attempts: 1 },
  ];
  for (const c of cases) {
    it(c.title, () => {
      const { body, attempts } = refusedOnce();
      const config = new ConcurrencyConfig({ perTool: { search: 1 }, retryRateLimited: c.retry });
      testScheduler.run(({ expectObservable }) => {
        const batch = runBatch([call('a', body, { tool: 'search', idempotent: c.idempotent })], { concurrency: config, shared: { lanes: new LaneTable(), concurrency: config }, scheduler: testScheduler });
        expectObservable(batch.pipe(briefly)).toBe(c.expected, { a: c.value });
      });
      expect(attempts()).to.equal(c.attempts);
    });
  }

  it('fails a call refused a second time: it enters its lanes again only once', () => {
    let attempts = 0;
    const body = () => {
      attempts++;
      return timer(1).pipe(mergeMap(() => throwError(() => new RateLimitedError('slow down', 0.02))));
    };
    const config = new ConcurrencyConfig({ perTool: { search: 1 }, retryRateLimited: true });
    testScheduler.run(({ expectObservable }) => {
      const batch = runBatch([call('a', body, { tool: 'search', idempotent: true })], { concurrency: config, shared: { lanes: new LaneTable(), concurrency: config }, scheduler: testScheduler });
      // Refused at 1, paused until 21, started again at 21, refused again at 22.
      expectObservable(batch.pipe(briefly)).toBe('22ms (a|)', { a: 'a!RateLimitedError' });
    });
    expect(attempts).to.equal(2);
  });

  it("fails at once a refusal thrown by its body's synchronous part, before it returned an answer", () => {
    let attempts = 0;
    const body = () => {
      attempts++;
      throw new RateLimitedError('slow down', 0.02);
    };
    const table = new LaneTable();
    const config = new ConcurrencyConfig({ perTool: { search: 1 }, retryRateLimited: true });
    testScheduler.run(({ expectObservable }) => {
      const batch = runBatch([call('a', body, { tool: 'search', idempotent: true })], { concurrency: config, shared: { lanes: table, concurrency: config }, scheduler: testScheduler });
      expectObservable(batch.pipe(briefly)).toBe('(a|)', { a: 'a!RateLimitedError' });
    });
    expect(attempts).to.equal(1);
    // It left its tool permit; only the pause its refusal set off is left in the store.
    expect(table.occupancy().map((lane) => [lane.key, lane.holders])).to.deep.equal([['rate:tool:search', 0]]);
  });

  it('holds no concurrency permit while it waits out the pause to enter again', () => {
    const { body } = refusedOnce();
    const table = new LaneTable();
    const config = new ConcurrencyConfig({ perTool: { search: 1 }, retryRateLimited: true });
    const seen: Array<ReturnType<LaneTable['occupancy']>> = [];
    testScheduler.run(({ expectObservable }) => {
      const batch = runBatch([call('a', body, { tool: 'search', idempotent: true })], { concurrency: config, shared: { lanes: table, concurrency: config }, scheduler: testScheduler });
      expectObservable(batch.pipe(briefly)).toBe('22ms (a|)', { a: 'a=ok' });
      testScheduler.schedule(() => seen.push(table.occupancy()), 10);
    });
    // While it waits out the pause it holds nothing of the tool's concurrency lane.
    expect(seen[0]).to.deep.equal([{ key: 'rate:tool:search', limit: 0, perSeconds: 0, burst: 0, holders: 0, waiters: 1, pausedUntil: 21 }]);
  });

  it('keeps its ceiling from its first start: one that runs out while it waits fails it, timed out', () => {
    const { body, attempts } = refusedOnce();
    const config = new ConcurrencyConfig({ perToolSeconds: { search: 0.01 }, retryRateLimited: true });
    testScheduler.run(({ expectObservable }) => {
      const batch = runBatch([call('a', body, { tool: 'search', idempotent: true })], { concurrency: config, shared: { lanes: new LaneTable(), concurrency: config }, scheduler: testScheduler });
      expectObservable(batch.pipe(briefly)).toBe('10ms (a|)', { a: 'a!ToolTimedOutError' });
    });
    expect(attempts()).to.equal(1);
  });

  it('a stop while it waits to enter again classifies it as started (idempotent: safe to call again)', () => {
    const { body } = refusedOnce();
    const config = new ConcurrencyConfig({ retryRateLimited: true });
    testScheduler.run(({ hot, expectObservable }) => {
      const stop$ = hot('-----s', { s: { kind: 'cancelled' as const, why: 'the run was cancelled' } });
      const batch = runBatch([call('a', body, { tool: 'search', idempotent: true })], { concurrency: config, shared: { lanes: new LaneTable(), concurrency: config }, stop$, scheduler: testScheduler });
      expectObservable(batch.pipe(mergeMap((o) => [o.kind === 'error' ? `${o.dispatched}:${/Safe to call again/.test(o.error.message)}` : o.kind]))).toBe('-----(a|)', { a: 'true:true' });
    });
  });
});
