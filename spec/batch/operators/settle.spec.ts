import { expect } from 'chai';
import { EMPTY, lastValueFrom, mergeMap, of, Subject, takeUntil, throwError, toArray } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { settle, type CallActivity, type CallRecord, type Outcome, type SettleAnswer, type SettleStep, type StopReason } from '../../../lib/batch/index.js';
import { call } from '../helpers.js';
import { byId, decided, labelled, recordsOf, resultOf } from './records.js';

// What an output guardrail makes of a result it refuses.
function refused(outcome: Outcome, why = 'leaks a card number'): Outcome {
  const { index, callId, tool, dispatched } = outcome;
  return { index, callId, tool, dispatched, kind: 'error', error: { name: 'ToolRejectedError', message: why } };
}

describe('settle', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('settles one record at a time, in the order they come: the next is handed to the step once the one before it is out', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const { records } = decided('abc');
      const answers = {
        a: cold('        ---(x|)', { x: refused(records[0]!.outcome!) }),
        b: cold('           --(y|)', { y: records[1]!.outcome! }),
        c: cold('             -(z|)', { z: records[2]!.outcome! }),
      };
      const source = hot('  -abc----|', byId(records));
      const subs = '        ^-------!';
      const expected = '    ----a-bc|';
      const step: SettleStep = (outcome) => answers[outcome.callId as keyof typeof answers];
      expectObservable(source.pipe(settle(step), labelled)).toBe(expected, { a: 'a!ToolRejectedError', b: 'b=b', c: 'c=c' });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(answers.a.subscriptions).toBe('-^--!    ');
      expectSubscriptions(answers.b.subscriptions).toBe('----^-!  ');
      expectSubscriptions(answers.c.subscriptions).toBe('------^! ');
    });
  });

  // How a step may answer for call a (its result 'a'), and what goes out.
  const answers: Array<{ title: string; answer: (outcome: Outcome) => SettleAnswer; label: string }> = [
    { title: 'an outcome, at once', answer: (outcome) => refused(outcome), label: 'a!ToolRejectedError' },
    { title: 'the same outcome', answer: (outcome) => outcome, label: 'a=a' },
    { title: 'a Promise', answer: (outcome) => Promise.resolve(refused(outcome)), label: 'a!ToolRejectedError' },
    { title: 'an Observable: its first value', answer: (outcome) => of(refused(outcome), outcome), label: 'a!ToolRejectedError' },
    { title: 'an Observable that ends without a value: the outcome as it was', answer: () => EMPTY, label: 'a=a' },
  ];
  for (const { title, answer, label } of answers) {
    it(`takes the step's answer as the outcome, exactly once: ${title}`, async () => {
      const { records } = decided('ab');
      const labels = await lastValueFrom(of(...records).pipe(settle((outcome) => (outcome.callId === 'a' ? answer(outcome) : outcome)), labelled, toArray()));
      expect(labels).to.deep.equal([label, 'b=b']);
    });
  }

  it('waits for a Promise answer before handing the step the next outcome', async () => {
    const { records } = decided('abc');
    const told: string[] = [];
    const step: SettleStep = async (outcome) => {
      told.push(`settle ${outcome.callId}`);
      // The first answer is the slowest: the next call is still handed over only after it.
      await new Promise((resolve) => setTimeout(resolve, outcome.callId === 'a' ? 5 : 0));
      told.push(`settled ${outcome.callId}`);
      return outcome;
    };
    const labels = await lastValueFrom(of(...records).pipe(settle(step), labelled, toArray()));
    expect(labels).to.deep.equal(['a=a', 'b=b', 'c=c']);
    expect(told).to.deep.equal(['settle a', 'settled a', 'settle b', 'settled b', 'settle c', 'settled c']);
  });

  it('tells watchers each call as settled with its final outcome, after the ended one the batch decided', () => {
    const seen: string[] = [];
    const onActivity = (a: CallActivity) => (a.type === 'ended' || a.type === 'settled') && seen.push(`${a.type} ${a.callId} ${a.outcome}`);
    const { records } = decided('ab', { onActivity });
    of(...records)
      .pipe(settle((outcome) => (outcome.callId === 'b' ? refused(outcome) : outcome)))
      .subscribe();
    expect(seen).to.deep.equal(['ended a result', 'ended b result', 'settled a result', 'settled b error']);
    expect(records[1]!.outcome!.kind).to.equal('error');
  });

  it('tells settled without a step too, and lets the records through as they are', () => {
    const seen: string[] = [];
    const { records } = decided('ab', { onActivity: (a) => a.type === 'settled' && seen.push(`${a.callId} ${a.outcome}`) });
    const out: unknown[] = [];
    of(...records).pipe(settle()).subscribe((record) => out.push(record));
    expect(out).to.deep.equal(records);
    expect(seen).to.deep.equal(['a result', 'b result']);
  });

  it('stops a batch that fails fast when a step turns an outcome into a failure, once that outcome has gone out', () => {
    const { batch, records } = decided('ab', { failFast: true });
    const order: string[] = [];
    const stopped = records.map(() => false);
    of(...records)
      .pipe(settle((outcome) => (outcome.callId === 'a' ? refused(outcome) : outcome)))
      .subscribe((record) => {
        order.push(record.call.callId);
        stopped[record.index] = batch.stopped !== undefined;
      });
    expect(order).to.deep.equal(['a', 'b']);
    // Not yet stopped when a went out: it went out first.
    expect(stopped).to.deep.equal([false, true]);
    const reason = batch.stopped as Extract<StopReason, { kind: 'failed' }>;
    expect(reason).to.deep.include({ kind: 'failed', callId: 'a', why: 'call a (lookup) failed: leaks a card number' });
  });

  it('does not stop a batch that fails fast for the outcome of a call the batch itself stopped, nor one that does not fail fast', () => {
    const stop: StopReason = { kind: 'cancelled', why: 'the user pressed stop' };
    const fast = recordsOf([call('a', () => 'a')], { failFast: true });
    const record = fast.records[0]!;
    record.decide({ index: 0, callId: 'a', tool: 'lookup', dispatched: false, kind: 'error', error: { name: 'CallStoppedError', message: 'never dispatched' }, stopped: stop });
    of(record).pipe(settle()).subscribe();
    expect(fast.batch.stopped).to.equal(undefined);
    const slow = decided('a');
    of(...slow.records).pipe(settle((outcome) => refused(outcome))).subscribe();
    expect(slow.batch.stopped).to.equal(undefined);
  });

  it('errors when the step throws, or its answer errors: a step is the runner\'s own code', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const thrown = decided('ab').records;
      const throwing: SettleStep = (outcome) => {
        if (outcome.callId === 'b') throw new TypeError('no serialiser');
        return outcome;
      };
      expectObservable(cold('a-b|', byId(thrown)).pipe(settle(throwing), labelled)).toBe('a-#', { a: 'a=a' }, new TypeError('no serialiser'));
      const errored = decided('ab').records;
      const erroring: SettleStep = (outcome) => (outcome.callId === 'a' ? throwError(() => new RangeError('hook failed')) : outcome);
      expectObservable(cold('a-b|', byId(errored)).pipe(settle(erroring), labelled)).toBe('#', undefined, new RangeError('hook failed'));
    });
  });

  it('ignores records that pass without an outcome', () => {
    testScheduler.run(({ hot, expectObservable }) => {
      const { records } = recordsOf([call('a', () => 'a')]);
      const record = records[0]!;
      const source = hot('  -a-a|', { a: record });
      testScheduler.schedule(() => record.decide(resultOf(record, 'a')), 2);
      expectObservable(source.pipe(settle(), labelled)).toBe('---a|', { a: 'a=a' });
    });
  });

  it('waits for the answer being settled before completing', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const { records } = decided('a');
      const answer = cold('  ----(x|)', { x: records[0]!.outcome! });
      const expected = '     ----(a|)';
      expectObservable(cold('(a|)', byId(records)).pipe(settle(() => answer), labelled)).toBe(expected, { a: 'a=a' });
      expectSubscriptions(answer.subscriptions).toBe('^---!');
    });
  });

  it('stops settling when unsubscribed early: the answer being waited for is left', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const { records } = decided('ab');
      const answer = cold('   -----(x|)', { x: records[0]!.outcome! });
      const source = hot('  -a-b-|', byId(records));
      const subs = '        ^--!   ';
      const unsub = '       ^--!   ';
      expectObservable(source.pipe(settle(() => answer), labelled), unsub).toBe('---');
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(answer.subscriptions).toBe('-^-!');
    });
  });

  it('does not break unsubscription chains', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const { records } = decided('abc');
      const answer = (id: 'a' | 'b' | 'c') => cold('-(x|)', { x: records['abc'.indexOf(id)]!.outcome! });
      const answers = { a: answer('a'), b: answer('b'), c: answer('c') };
      const source = hot('  -a-b-c-|', byId(records));
      const subs = '        ^----!   ';
      const unsub = '       ^----!   ';
      const expected = '    --a-b-   ';
      const result = source.pipe(
        mergeMap((record) => of(record)),
        settle((outcome) => answers[outcome.callId as 'a' | 'b' | 'c']),
        mergeMap((record) => of(record)),
        labelled,
      );
      expectObservable(result, unsub).toBe(expected, { a: 'a=a', b: 'b=b' });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(answers.c.subscriptions).toBe([]);
    });
  });

  it('settles a synchronous source', () => {
    testScheduler.run(({ expectObservable }) => {
      const { records } = decided('abc');
      const result = of(...records).pipe(
        settle((outcome) => (outcome.callId === 'b' ? refused(outcome) : outcome)),
        labelled,
      );
      expectObservable(result).toBe('(abc|)', { a: 'a=a', b: 'b!ToolRejectedError', c: 'c=c' });
    });
  });

  it('passes on an error from its source, and leaves the answer it was waiting for', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const { records } = decided('ab');
      const answer = cold('   --(x|)', { x: records[0]!.outcome! });
      const source = hot('  -a-b#', byId(records));
      const subs = '        ^---!';
      expectObservable(source.pipe(settle(() => answer), labelled)).toBe('---a#', { a: 'a=a' });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(answer.subscriptions).toBe(['-^-!', '---^!']);
    });
  });

  it('completes when its source completes while a record is in its step (a consumer that ends the source on an outcome)', () => {
    const { records } = decided('ab');
    const source = new Subject<CallRecord>();
    const stop = new Subject<void>();
    const seen: string[] = [];
    source
      .pipe(
        takeUntil(stop),
        settle((outcome) => outcome),
      )
      .subscribe({
        next: (record) => {
          seen.push(record.call.callId);
          // Still inside the step of the record just out: the source ends here.
          stop.next();
        },
        complete: () => seen.push('complete'),
      });
    source.next(records[0]!);
    expect(seen).to.deep.equal(['a', 'complete']);
  });
});

