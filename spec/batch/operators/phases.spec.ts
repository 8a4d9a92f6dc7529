import { expect } from 'chai';
import { concat, concatAll, concatMap, from, map, merge, mergeMap, of, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { BatchScope, phases, type BatchCall, type CallRecord } from '../../../lib/batch/index.js';
import { call } from '../helpers.js';

// A record as phases makes it: its call and the number it was given.
const numbered = (record: CallRecord): string => `${record.call.callId}${record.index}`;
const numberedPhases = map((phase$: Observable<CallRecord>) => phase$.pipe(map(numbered)));

describe('phases', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  const calls: Record<string, BatchCall> = {
    a: call('a', () => 'a'),
    b: call('b', () => 'b'),
    c: call('c', () => 'c'),
    d: call('d', () => 'd'),
    s: call('s', () => 's', { parallelSafe: false }),
    t: call('t', () => 't', { parallelSafe: false }),
  };

  it('puts consecutive parallel-safe calls in one phase, and a parallelSafe:false call in a phase alone', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const source = hot('  -a-b-s-c-t-d-|', calls);
      const subs = '        ^------------!';
      const expected = '    -x---y-z-u-v-|';
      expectObservable(source.pipe(phases(), numberedPhases)).toBe(expected, {
        x: cold('a-b-|', { a: 'a0', b: 'b1' }),
        y: cold('(s|)', { s: 's2' }),
        z: cold('c-|', { c: 'c3' }),
        u: cold('(t|)', { t: 't4' }),
        v: cold('d-|', { d: 'd5' }),
      });
      expectSubscriptions(source.subscriptions).toBe(subs);
    });
  });

  it('lets a phase receive calls while it runs: a streamed turn starts its first calls before the rest arrive', () => {
    testScheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('  -a---b---c-|', calls);
      const subs = '        ^----------!';
      const expected = '    -a---b---c-|';
      expectObservable(source.pipe(phases(), concatAll(), map(numbered))).toBe(expected, { a: 'a0', b: 'b1', c: 'c2' });
      expectSubscriptions(source.subscriptions).toBe(subs);
    });
  });

  it('holds the records of a phase until its turn comes, then passes them at once', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const source = hot('  -a-s-c-|', calls);
      // Each phase runs three frames past its last record, as its calls would.
      const work = cold('       ---|');
      const expected = '    -a----s--c--|';
      const result = source.pipe(
        phases(),
        concatMap((phase$) => concat(phase$.pipe(map(numbered)), work)),
      );
      expectObservable(result).toBe(expected, { a: 'a0', s: 's1', c: 'c2' });
      expectSubscriptions(work.subscriptions).toBe(['---^--!', '------^--!', '---------^--!']);
    });
  });

  it('numbers records in arrival order, each in the batch it was given, one batch per subscription', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const batches: BatchScope[] = [];
      const source = cold('  a-b-s|', calls);
      const result = source.pipe(
        phases(() => {
          const batch = new BatchScope();
          batches.push(batch);
          return batch;
        }),
        concatAll(),
        map((record) => `${numbered(record)}/${batches.indexOf(record.batch)}`),
      );
      expectObservable(result).toBe('     a-b-s|', { a: 'a0/0', b: 'b1/0', s: 's2/0' });
      expectObservable(result).toBe('     a-b-s|', { a: 'a0/1', b: 'b1/1', s: 's2/1' });
    });
  });

  it('tells the batch how many calls it has once the source completes', () => {
    const batch = new BatchScope();
    const seen: Array<number | undefined> = [];
    from([calls.a!, calls.s!, calls.b!])
      .pipe(
        phases(() => batch),
        concatMap((phase$) => phase$),
      )
      .subscribe({ next: () => seen.push(batch.expected), complete: () => seen.push(batch.expected) });
    expect(seen).to.deep.equal([undefined, undefined, undefined, 3]);
    expect(batch.records.map(numbered)).to.deep.equal(['a0', 's1', 'b2']);
  });

  it('takes records made elsewhere as they are, still counting them in arrival order', () => {
    const batch = new BatchScope();
    const made = batch.record(calls.a!, 0);
    const records: CallRecord[] = [];
    of<Array<BatchCall | CallRecord>>(made, calls.b!)
      .pipe(
        phases(() => batch),
        concatAll(),
      )
      .subscribe((record) => records.push(record));
    expect(records[0]).to.equal(made);
    expect(records.map(numbered)).to.deep.equal(['a0', 'b1']);
  });

  it('refuses a second reader of a phase while the first reads it', () => {
    testScheduler.run(({ hot, expectObservable }) => {
      const source = hot('  -a-|', calls);
      const twice = source.pipe(
        phases(),
        mergeMap((phase$) => merge(phase$.pipe(map(numbered)), phase$)),
      );
      expectObservable(twice).toBe('-#', undefined, new Error('a phase can be read once'));
    });
  });

  it('stops reading its source when unsubscribed early', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const source = hot('  -a-b-s-c-|', calls);
      const subs = '        ^-----!   ';
      const unsub = '       ^-----!   ';
      const expected = '    -x---y-   ';
      expectObservable(source.pipe(phases(), numberedPhases), unsub).toBe(expected, {
        x: cold('a-b-|', { a: 'a0', b: 'b1' }),
        y: cold('(s|)', { s: 's2' }),
      });
      expectSubscriptions(source.subscriptions).toBe(subs);
    });
  });

  it('does not break unsubscription chains', () => {
    testScheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('  -a-b-s-c-|', calls);
      const subs = '        ^-------! ';
      const unsub = '       ^-------! ';
      const expected = '    -a-b-s-c- ';
      const result = source.pipe(
        mergeMap((value) => of(value)),
        phases(),
        mergeMap((phase$) => phase$),
        map(numbered),
        mergeMap((value) => of(value)),
      );
      expectObservable(result, unsub).toBe(expected, { a: 'a0', b: 'b1', s: 's2', c: 'c3' });
      expectSubscriptions(source.subscriptions).toBe(subs);
    });
  });

  it('groups a synchronous source', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const result = from([calls.a!, calls.b!, calls.s!, calls.c!]).pipe(phases(), numberedPhases);
      expectObservable(result).toBe('(xyz|)', {
        x: cold('(ab|)', { a: 'a0', b: 'b1' }),
        y: cold('(s|)', { s: 's2' }),
        z: cold('(c|)', { c: 'c3' }),
      });
    });
  });

  it('passes on an error from its source', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const source = hot('  -a-b-#', calls);
      const subs = '        ^----!';
      const expected = '    -x---#';
      expectObservable(source.pipe(phases(), numberedPhases)).toBe(expected, { x: cold('a-b-', { a: 'a0', b: 'b1' }) });
      expectSubscriptions(source.subscriptions).toBe(subs);
    });
  });
});
