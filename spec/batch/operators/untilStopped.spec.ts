import { expect } from 'chai';
import { mergeMap, of, Subject, type Subscribable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { BatchScope, CallRecord, inLanes, untilStopped, type Outcome, type StopReason } from '../../../lib/batch/index.js';
import { ConcurrencyConfig } from '../../../lib/config/index.js';
import { call } from '../helpers.js';
import { byId, labelled, recordsOf } from './records.js';

const cancel: StopReason = { kind: 'cancelled', why: 'the user pressed stop' };
const reasons = { s: cancel, t: { kind: 'cancelled', why: 'a second stop' } as StopReason };

// What a classified outcome says.
function said(record: CallRecord): string {
  const outcome = record.outcome as Outcome;
  if (outcome.kind === 'result') return `result ${String(outcome.result)}`;
  return outcome.kind === 'error' ? outcome.error.message : outcome.message;
}

describe('untilStopped', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('classifies every call without an outcome once stop$ fires: never dispatched, in flight and idempotent, or indeterminate', () => {
    let made!: ReturnType<typeof recordsOf>;
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('-(a|)'), b: cold('----------(b|)'), c: cold('----------(c|)'), d: cold('-(d|)') };
      made = recordsOf([call('a', bodies.a), call('b', bodies.b), call('c', bodies.c, { idempotent: true }), call('d', bodies.d, { idempotent: true })]);
      const source = hot('  a-b-c-d|    ', byId(made.records));
      const subs = '        ^------!    ';
      const stop$ = hot('   --------s   ', reasons);
      const stopSubs = '    ^-------!   ';
      const expected = '    aAb-c---(BCD|)';
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2 });
      expectObservable(source.pipe(inLanes({ concurrency }), untilStopped(stop$), labelled)).toBe(expected, {
        a: 'a>',
        A: 'a=a',
        b: 'b>',
        B: 'b?',
        c: 'c>',
        C: 'c!CallStoppedError',
        D: 'd!CallStoppedError',
      });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(stop$.subscriptions).toBe(stopSubs);
      expectSubscriptions(bodies.b.subscriptions).toBe('--^-----!');
      expectSubscriptions(bodies.c.subscriptions).toBe('----^---!');
      expectSubscriptions(bodies.d.subscriptions).toBe([]);
    });
    expect(made.records.map(said)).to.deep.equal([
      'result a',
      'lookup was in flight when the batch stopped (the user pressed stop). The side effect may have landed',
      'lookup was in flight when the batch stopped (the user pressed stop). Safe to call again',
      'never dispatched: the user pressed stop',
    ]);
    expect(made.batch.stopped).to.equal(cancel);
  });

  it('takes the first stop only', () => {
    let made!: ReturnType<typeof recordsOf>;
    testScheduler.run(({ hot, cold, expectObservable }) => {
      made = recordsOf([call('a', cold('--------(a|)'))]);
      const stop$ = hot('   --(st)', reasons);
      const expected = '    a-(A|)';
      const result = cold('(a|)', byId(made.records)).pipe(inLanes(), untilStopped(stop$), labelled);
      expectObservable(result).toBe(expected, { a: 'a>', A: 'a?' });
    });
    expect(made.batch.stopped).to.equal(cancel);
    expect(said(made.records[0]!)).to.equal('lookup was in flight when the batch stopped (the user pressed stop). The side effect may have landed');
  });

  it('stops the batch at its first failure when it fails fast (FAIL_RUN), after that failure has gone on', () => {
    let made!: ReturnType<typeof recordsOf>;
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('----#', undefined, new RangeError('out of stock')), b: cold('----------(b|)'), c: cold('-(c|)') };
      made = recordsOf([call('a', bodies.a), call('b', bodies.b), call('c', bodies.c)], { failFast: true });
      const source = hot('  a-bc|     ', byId(made.records));
      const expected = '    a-b-(ABC|)';
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2 });
      expectObservable(source.pipe(inLanes({ concurrency }), untilStopped(), labelled)).toBe(expected, {
        a: 'a>',
        A: 'a!RangeError',
        b: 'b>',
        B: 'b?',
        C: 'c!CallStoppedError',
      });
      expectSubscriptions(bodies.b.subscriptions).toBe('--^-!');
      // a's permit went back before the stop took effect: c, queued for it, never started.
      expectSubscriptions(bodies.c.subscriptions).toBe([]);
    });
    const stopped = made.batch.stopped as Extract<StopReason, { kind: 'failed' }>;
    expect(stopped.kind).to.equal('failed');
    expect(stopped.callId).to.equal('a');
    expect(said(made.records[2]!)).to.equal('never dispatched: call a (lookup) failed: out of stock');
  });

  it('keeps going after a failure when the batch does not fail fast', () => {
    testScheduler.run(({ hot, cold, expectObservable }) => {
      const bodies = { a: cold('--#', undefined, new RangeError('out of stock')), b: cold('----(b|)') };
      const { records } = recordsOf([call('a', bodies.a), call('b', bodies.b)]);
      const source = hot('  ab|    ', byId(records));
      const expected = '    abA--(B|)';
      expectObservable(source.pipe(inLanes(), untilStopped(), labelled)).toBe(expected, { a: 'a>', A: 'a!RangeError', b: 'b>', B: 'b=b' });
    });
  });

  const before: Array<{ title: string; batch: () => BatchScope }> = [
    {
      title: 'stopped by hand',
      batch: () => {
        const batch = new BatchScope();
        batch.stop(cancel);
        return batch;
      },
    },
    { title: 'made with a stop$ that had already fired', batch: () => new BatchScope({ stop$: of(cancel) }) },
  ];
  for (const early of before) {
    it(`dispatches nothing when given the batch itself, ${early.title} before it started`, () => {
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const batch = early.batch();
        const bodies = { a: cold('-(a|)'), b: cold('-(b|)') };
        const records = [batch.record(call('a', bodies.a), 0), batch.record(call('b', bodies.b), 1)];
        const source = cold('  (ab|)', byId(records));
        const expected = '     (AB|)';
        expectObservable(source.pipe(inLanes(), untilStopped(batch), labelled)).toBe(expected, { A: 'a!CallStoppedError', B: 'b!CallStoppedError' });
        expectSubscriptions(bodies.a.subscriptions).toBe([]);
        expectSubscriptions(bodies.b.subscriptions).toBe([]);
      });
    });
  }

  it('hears a stop the batch was made with, while it runs, when given the batch', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const stop$ = hot('   ---s   ', reasons);
      const stopSubs = '    ^--!   ';
      const batch = new BatchScope({ stop$ });
      const body = cold('-----(a|)');
      const records = [batch.record(call('a', body, { idempotent: true }), 0)];
      const expected = '    a--(A|)';
      expectObservable(cold('(a|)', byId(records)).pipe(inLanes(), untilStopped(batch), labelled)).toBe(expected, { a: 'a>', A: 'a!CallStoppedError' });
      expectSubscriptions(stop$.subscriptions).toBe(stopSubs);
      expectSubscriptions(body.subscriptions).toBe('^--!');
    });
  });

  it('stops listening to stop$ once every call has its outcome', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const body = cold('--(a|)');
      const { records } = recordsOf([call('a', body)]);
      const stop$ = hot('   ------s', reasons);
      const stopSubs = '    ^-!    ';
      expectObservable(cold('(a|)', byId(records)).pipe(inLanes(), untilStopped(stop$), labelled)).toBe('a-(A|)', { a: 'a>', A: 'a=a' });
      expectSubscriptions(stop$.subscriptions).toBe(stopSubs);
    });
  });

  it('does not hear a stop that comes as the batch completes: the batch is over', () => {
    const stop$ = new Subject<StopReason>();
    const { batch, records } = recordsOf([call('a', () => 'a')]);
    of(...records)
      .pipe(inLanes(), untilStopped(stop$))
      .subscribe({ complete: () => stop$.next(cancel) });
    expect(batch.stopped).to.equal(undefined);
    expect(stop$.observed).to.equal(false);
  });

  it('hands a stop heard before the batch was known to the batch, which holds it and classifies by it: the first call never started', () => {
    const invoked: string[] = [];
    const body = (id: string) => () => (invoked.push(id), id);
    const { batch, records } = recordsOf([call('a', body('a')), call('b', body('b'))]);
    const seen: string[] = [];
    // Both stops come as untilStopped listens, before its source (and so the batch) is known.
    // The batch meets the stop with the first call's start, before its body is invoked.
    of(...records)
      .pipe(inLanes(), untilStopped(of(cancel, reasons.t)))
      .subscribe((news) => {
        if (news instanceof CallRecord) seen.push(`${news.call.callId}: ${said(news)}`);
      });
    expect(batch.stopped).to.equal(cancel);
    batch.stop(reasons.t);
    expect(batch.stopped).to.equal(cancel);
    // Neither body ran, so neither call is said to have been in flight; both were classified by the one stop.
    expect(invoked).to.deep.equal([]);
    expect(seen).to.deep.equal(['a: never dispatched: the user pressed stop', 'b: never dispatched: the user pressed stop']);
    expect(records.map((record) => record.outcome?.dispatched)).to.deep.equal([false, false]);
  });

  it('takes its stop from anything with a subscribe(observer), and leaves it when done', () => {
    const listeners = new Set<unknown>();
    const stop$: Subscribable<StopReason> = {
      subscribe(observer) {
        listeners.add(observer);
        return { unsubscribe: () => listeners.delete(observer) };
      },
    };
    const { records } = recordsOf([call('a', () => 'a')]);
    const labels: string[] = [];
    of(...records)
      .pipe(inLanes(), untilStopped(stop$), labelled)
      .subscribe((text) => {
        labels.push(text);
        labels.push(`listening ${listeners.size}`);
      });
    expect(labels).to.deep.equal(['a>', 'listening 1', 'a=a', 'listening 1']);
    expect(listeners.size).to.equal(0);
  });

  it('lets go of its source and of stop$ when unsubscribed early', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const body = cold('-----(a|)');
      const { records } = recordsOf([call('a', body)]);
      const source = hot('  -a----|', byId(records));
      const subs = '        ^--!    ';
      const stop$ = hot('   ------s ', reasons);
      const unsub = '       ^--!    ';
      expectObservable(source.pipe(inLanes(), untilStopped(stop$), labelled), unsub).toBe('-a-', { a: 'a>' });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(stop$.subscriptions).toBe(subs);
      expectSubscriptions(body.subscriptions).toBe('-^-!');
    });
  });

  it('does not break unsubscription chains', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const body = cold('-----(a|)');
      const { records } = recordsOf([call('a', body)]);
      const source = hot('  -a----|', byId(records));
      const subs = '        ^---!   ';
      const stop$ = hot('   ------s ', reasons);
      const unsub = '       ^---!   ';
      const result = source.pipe(
        inLanes(),
        mergeMap((record) => of(record)),
        untilStopped(stop$),
        mergeMap((record) => of(record)),
        labelled,
      );
      expectObservable(result, unsub).toBe('-a--', { a: 'a>' });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(stop$.subscriptions).toBe(subs);
      expectSubscriptions(body.subscriptions).toBe('-^--!');
    });
  });

  it('passes a synchronous source through, and classifies one whose stop came first', () => {
    testScheduler.run(({ expectObservable }) => {
      const quick = recordsOf(['a', 'b'].map((id) => call(id, () => id)));
      expectObservable(of(...quick.records).pipe(inLanes(), untilStopped(), labelled)).toBe('(aAbB|)', { a: 'a>', A: 'a=a', b: 'b>', B: 'b=b' });
      const stopped = recordsOf(['a', 'b'].map((id) => call(id, () => id)), { stop$: of(cancel) });
      expectObservable(of(...stopped.records).pipe(inLanes(), untilStopped(stopped.batch), labelled)).toBe('(AB|)', { A: 'a!CallStoppedError', B: 'b!CallStoppedError' });
    });
  });

  it('passes on an error from its source, and lets go of stop$', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const body = cold('-----(a|)');
      const { records } = recordsOf([call('a', body)]);
      const source = hot('  -a-#', byId(records));
      const subs = '        ^--!';
      const stop$ = hot('   -----s', reasons);
      expectObservable(source.pipe(inLanes(), untilStopped(stop$), labelled)).toBe('-a-#', { a: 'a>' });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(stop$.subscriptions).toBe(subs);
      expectSubscriptions(body.subscriptions).toBe('-^-!');
    });
  });
});
