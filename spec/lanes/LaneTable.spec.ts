import { expect } from 'chai';
import { catchError, EMPTY, map, merge, of, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { inLane, LaneTable, type LaneChange } from '../../lib/lanes/index.js';

describe('LaneTable', () => {
  it('makes a lane on first use and drops it when idle', () => {
    const table = new LaneTable();
    const a = table.enter('tenant:acme', 2, () => undefined);
    expect(table.get('tenant:acme')).to.deep.equal({ key: 'tenant:acme', limit: 2, holders: 1, waiters: 0 });
    a.leave();
    expect(table.size).to.equal(0);
    expect(table.get('tenant:acme')).to.equal(undefined);
  });

  it('keeps no lane alive for tenants that came and went', () => {
    const table = new LaneTable();
    for (let i = 0; i < 10_000; i++) table.enter(`tenant:t${i}`, 1, () => undefined).leave();
    expect(table.size).to.equal(0);
  });

  it("tells an object's granted() when handed one instead of a function, at once or once a permit frees", () => {
    const table = new LaneTable();
    const told: string[] = [];
    const first = table.enter('tool:x', 1, { granted: () => told.push('first') });
    const second = table.enter('tool:x', 1, { granted: () => told.push('second') });
    expect(told).to.deep.equal(['first']);
    expect(second.holding).to.equal(false);
    first.leave();
    expect(told).to.deep.equal(['first', 'second']);
    expect(second.holding).to.equal(true);
    second.leave();
    expect(table.size).to.equal(0);
  });

  it('reports every change on changes$', () => {
    const table = new LaneTable();
    const seen: string[] = [];
    const subscription = table.changes$.subscribe((c: LaneChange) => seen.push(`${c.change} ${c.key} ${c.holders}/${c.waiters}`));
    const a = table.enter('tool:x', 1, () => undefined);
    const b = table.enter('tool:x', 1, () => undefined);
    a.leave();
    b.leave();
    subscription.unsubscribe();
    expect(seen).to.deep.equal([
      'granted tool:x 1/0',
      'queued tool:x 1/1',
      'released tool:x 0/1',
      'granted tool:x 1/0',
      'released tool:x 0/0',
    ]);
  });
});

describe('inLane', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('runs at most limit sources at once, FIFO', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const table = new LaneTable();
      const a = cold('---a|');
      const b = cold('---b|');
      const c = cold('---c|');
      const through = (source: Observable<string>): Observable<string> => source.pipe(inLane(table, 'tool:x', 2));
      expectObservable(merge(through(a), through(b), through(c))).toBe('---(ab)c|');
      expectSubscriptions(a.subscriptions).toBe('^---!');
      expectSubscriptions(b.subscriptions).toBe('^---!');
      expectSubscriptions(c.subscriptions).toBe('----^---!');
    });
  });

  it('gives the permit back when the work errors', () => {
    const table = new LaneTable();
    testScheduler.run(({ cold, expectObservable }) => {
      const failing = cold('--#').pipe(inLane(table, 'tool:x', 1), catchError(() => EMPTY));
      const next = cold('--n|').pipe(inLane(table, 'tool:x', 1));
      expectObservable(merge(failing, next)).toBe('----n|');
    });
    expect(table.size).to.equal(0);
  });

  it('gives the permit back on unsubscribe, and withdraws a waiter that unsubscribes', () => {
    const table = new LaneTable();
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const held = cold('-----h|');
      const waiting = cold('--w|');
      const third = cold('--t|');
      expectObservable(held.pipe(inLane(table, 'tool:x', 1)), '^--!').toBe('---');
      expectObservable(waiting.pipe(inLane(table, 'tool:x', 1)), '^-!').toBe('--');
      expectObservable(third.pipe(inLane(table, 'tool:x', 1))).toBe('-----t|');
      expectSubscriptions(held.subscriptions).toBe('^--!');
      expectSubscriptions(waiting.subscriptions).toBe([]);
      expectSubscriptions(third.subscriptions).toBe('---^--!');
    });
    expect(table.size).to.equal(0);
  });

  it('does not break unsubscription chains', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const table = new LaneTable();
      const source = cold('----a|');
      const result = source.pipe(inLane(table, 'tool:x', 1), map((x) => x));
      expectObservable(result, '^-!').toBe('---');
      expectSubscriptions(source.subscriptions).toBe('^-!');
    });
  });

  it('handles a synchronous source, giving the permit back before the next asks', () => {
    const table = new LaneTable();
    const seen: string[] = [];
    for (const x of ['a', 'b', 'c']) {
      of(x)
        .pipe(inLane(table, 'turn', 1))
        .subscribe((v) => seen.push(`${v} ${table.get('turn')?.holders ?? 0}`));
    }
    expect(seen).to.deep.equal(['a 1', 'b 1', 'c 1']);
    expect(table.size).to.equal(0);
  });
});
