import { expect } from 'chai';
import { mergeMap, of } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { inCallOrder, inLanes, type CallRecord } from '../../../lib/batch/index.js';
import { call } from '../helpers.js';
// Records whose outcomes are decided already (`decided`): the order they arrive in is the marble's.
import { byId, decided, labelled, recordsOf, resultOf } from './records.js';

const outcomes = { a: 'a=a', b: 'b=b', c: 'c=c', d: 'd=d' };

describe('inCallOrder', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  const orders: Array<{ title: string; source: string; expected: string }> = [
    { title: 'in call order already', source: '  -a-b-c---|', expected: '-a-b-c---|' },
    { title: 'in reverse', source: '             -c-b-a----|', expected: '-----(abc)|' },
    { title: 'the first last', source: '         -c-b---a----|', expected: '-------(abc)|' },
    { title: 'the last first', source: '         -c-a-b---|', expected: '---a-(bc)|' },
  ];
  for (const order of orders) {
    it(`emits in call order whatever order the calls finished in: ${order.title}`, () => {
      testScheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
        const source = hot(order.source.trim(), byId(decided('abc').records));
        expectObservable(source.pipe(inCallOrder(), labelled)).toBe(order.expected, outcomes);
        expectSubscriptions(source.subscriptions).toBe(`^${'-'.repeat(order.source.trim().length - 2)}!`);
      });
    });
  }

  it('streams: each outcome goes out as soon as every earlier call has one, the prefix it completed with it', () => {
    testScheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('  -b-d-a---c---|', byId(decided('abcd').records));
      const subs = '        ^------------!';
      const expected = '    -----(ab)(cd)|';
      expectObservable(source.pipe(inCallOrder(), labelled)).toBe(expected, outcomes);
      expectSubscriptions(source.subscriptions).toBe(subs);
    });
  });

  it('ignores records that pass without an outcome (a body that started)', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('-----(a|)'), b: cold('---(b|)'), c: cold('-(c|)') };
      const { records } = recordsOf([call('a', bodies.a), call('b', bodies.b), call('c', bodies.c)]);
      // inLanes emits each record as it starts (ignored here) and as it ends.
      const source = cold('  (abc|)', byId(records));
      const expected = '     -----(abc|)';
      expectObservable(source.pipe(inLanes(), inCallOrder(), labelled)).toBe(expected, outcomes);
      expectSubscriptions(bodies.c.subscriptions).toBe('^!');
    });
  });

  it('emits a record when it has its outcome, not when it first passed without one', () => {
    testScheduler.run(({ hot, expectObservable }) => {
      const { records } = recordsOf([call('a', () => 'a')]);
      const record = records[0]!;
      const source = hot('  -a-a|', { a: record });
      testScheduler.schedule(() => record.decide(resultOf(record, 'a')), 2);
      expectObservable(source.pipe(inCallOrder(), labelled)).toBe('---a|', outcomes);
    });
  });

  it('errors, rather than completing quietly, when its source completes with a call of the batch left without an outcome', () => {
    testScheduler.run(({ hot, expectObservable }) => {
      const [a, , c] = recordsOf([...'abc'].map((id) => call(id, () => id))).records;
      for (const record of [a!, c!]) record.decide(resultOf(record, record.call.callId, true));
      const source = hot('  -a-c-|', { a, c });
      const expected = '    -a---#';
      expectObservable(source.pipe(inCallOrder(), labelled)).toBe(expected, outcomes, new Error('internal: the batch ended with call #1 unsettled'));
    });
  });

  it('completes at once for an empty batch', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      expectObservable(cold<CallRecord>('--|').pipe(inCallOrder())).toBe('--|');
    });
  });

  it('stops listening when unsubscribed early, and lets go of what it held', () => {
    testScheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('  -c-b-a-|', byId(decided('abc').records));
      const subs = '        ^---!   ';
      const unsub = '       ^---!   ';
      expectObservable(source.pipe(inCallOrder(), labelled), unsub).toBe('----', outcomes);
      expectSubscriptions(source.subscriptions).toBe(subs);
    });
  });

  it('does not break unsubscription chains', () => {
    testScheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('  -b-a---c-d-|', byId(decided('abcd').records));
      const subs = '        ^--------!  ';
      const unsub = '       ^--------!  ';
      const expected = '    ---(ab)c-   ';
      const result = source.pipe(
        mergeMap((record) => of(record)),
        inCallOrder(),
        mergeMap((record) => of(record)),
        labelled,
      );
      expectObservable(result, unsub).toBe(expected, outcomes);
      expectSubscriptions(source.subscriptions).toBe(subs);
    });
  });

  it('reorders a synchronous source', () => {
    testScheduler.run(({ expectObservable }) => {
      const [a, b, c] = decided('abc').records;
      expectObservable(of(c!, a!, b!).pipe(inCallOrder(), labelled)).toBe('(abc|)', outcomes);
    });
  });

  it('passes on an error from its source', () => {
    testScheduler.run(({ hot, expectObservable, expectSubscriptions }) => {
      const source = hot('  -a-c-#', byId(decided('abc').records));
      const subs = '        ^----!';
      expectObservable(source.pipe(inCallOrder(), labelled)).toBe('-a---#', outcomes);
      expectSubscriptions(source.subscriptions).toBe(subs);
    });
  });
});
