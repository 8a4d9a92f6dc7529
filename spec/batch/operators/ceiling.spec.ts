import { expect } from 'chai';
import { identity, mergeMap, of, share } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { ceiling, inLanes, untilStopped, type CeilingLimits, type StopReason } from '../../../lib/batch/index.js';
import { InvocationAbortedError } from '../../../lib/batch/callBody.js';
import { ConcurrencyConfig } from '../../../lib/config/index.js';
import { call } from '../helpers.js';
import { byId, labelled, recordsOf } from './records.js';

// One frame is one virtual ms: a ceiling of 0.003 seconds is three frames.
describe('ceiling', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('fails a call that outran its tool\'s ceiling alone, timed from dispatch rather than from queueing', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('-----(a|)'), b: cold('-----(b|)') };
      const { records } = recordsOf([call('a', bodies.a, { tool: 'slow' }), call('b', bodies.b)]);
      // b waits three frames for the turn lane (it starts in a's permit before a's failure goes
      // on): timed from then, its six frames are not up when it ends.
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 1 });
      const limits = { perToolSeconds: { slow: 0.003, lookup: 0.006 } };
      const source = cold('  (ab|)', byId(records));
      const expected = '     a--(bA)-(B|)';
      expectObservable(source.pipe(inLanes({ concurrency }), ceiling(limits), labelled)).toBe(expected, {
        a: 'a>',
        A: 'a!ToolTimedOutError',
        b: 'b>',
        B: 'b=b',
      });
      expectSubscriptions(bodies.a.subscriptions).toBe('^--!     ');
      expectSubscriptions(bodies.b.subscriptions).toBe('---^----!');
    });
  });

  it('aborts the signal of a body that outran its ceiling, naming the tool and the ceiling', () => {
    const signals: AbortSignal[] = [];
    testScheduler.run(({ cold, expectObservable }) => {
      const body = cold('-----(a|)');
      const { records } = recordsOf([call('a', (context) => (signals.push(context.signal), body), { tool: 'search' })]);
      const source = cold('  (a|)', byId(records));
      expectObservable(source.pipe(inLanes(), ceiling({ perToolSeconds: { search: 0.002 } }), labelled)).toBe('a-(A|)', { a: 'a>', A: 'a!ToolTimedOutError' });
    });
    expect(signals[0]!.reason).to.be.instanceOf(InvocationAbortedError);
    expect((signals[0]!.reason as Error).message).to.equal('search outran its 0.002s ceiling');
  });

  it('stops the whole batch when a call runs past toolCallSeconds, its siblings classified', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('-----(a|)'), b: cold('-(b|)'), c: cold('-----(c|)') };
      const { batch, records } = recordsOf([call('a', bodies.a), call('b', bodies.b), call('c', bodies.c, { idempotent: true })]);
      const source = hot('  ab-c---|', byId(records));
      const subs = '        ^---!    ';
      const expected = '    abBc(AC|)';
      expectObservable(source.pipe(inLanes(), ceiling({ toolCallSeconds: 0.004 }), untilStopped(), labelled)).toBe(expected, {
        a: 'a>',
        A: 'a?',
        b: 'b>',
        B: 'b=b',
        c: 'c>',
        C: 'c!CallStoppedError',
      });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(bodies.a.subscriptions).toBe('^---!');
      expectSubscriptions(bodies.c.subscriptions).toBe('---^!');
      testScheduler.schedule(() => {
        const stopped = batch.stopped as Extract<StopReason, { kind: 'deadline' }>;
        expect(stopped.kind).to.equal('deadline');
        expect(stopped.callId).to.equal('a');
        expect(stopped.error.name).to.equal('DeadlineExceededError');
      }, 5);
    });
  });

  // One call of five frames, under its own ceiling and the batch's toolCallSeconds.
  const both: Array<{ title: string; limits: CeilingLimits; expected: string; outcome: string; stopped: boolean }> = [
    { title: 'equal: the call\'s own ceiling wins, and the batch goes on', limits: { perToolSeconds: { lookup: 0.003 }, toolCallSeconds: 0.003 }, expected: 'a--(A|)', outcome: 'a!ToolTimedOutError', stopped: false },
    { title: 'its own shorter: it fails alone', limits: { perToolSeconds: { lookup: 0.002 }, toolCallSeconds: 0.003 }, expected: 'a-(A|)', outcome: 'a!ToolTimedOutError', stopped: false },
    { title: 'its own longer: the deadline stops the batch first', limits: { perToolSeconds: { lookup: 0.004 }, toolCallSeconds: 0.003 }, expected: 'a--(A|)', outcome: 'a?', stopped: true },
    { title: 'another tool\'s: the deadline stops the batch', limits: { perToolSeconds: { search: 0.001 }, toolCallSeconds: 0.003 }, expected: 'a--(A|)', outcome: 'a?', stopped: true },
    { title: 'its own alone', limits: { perToolSeconds: { lookup: 0.003 } }, expected: 'a--(A|)', outcome: 'a!ToolTimedOutError', stopped: false },
    { title: 'none that binds it', limits: { perToolSeconds: { search: 0.001 } }, expected: 'a----(A|)', outcome: 'a=a', stopped: false },
  ];
  for (const limit of both) {
    it(`times a call by its own ceiling and toolCallSeconds: ${limit.title}`, () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const body = cold('-----(a|)');
        const { batch, records } = recordsOf([call('a', body)]);
        const result = cold('(a|)', byId(records)).pipe(inLanes(), ceiling(limit.limits), untilStopped(), labelled);
        expectObservable(result).toBe(limit.expected, { a: 'a>', A: limit.outcome });
        testScheduler.schedule(() => expect(batch.stopped !== undefined).to.equal(limit.stopped), 10);
      });
    });
  }

  it('passes over the ceilings of calls that ended first, and fires the next one due', () => {
    testScheduler.run(({ hot, cold, expectObservable }) => {
      const bodies = { a: cold('-(a|)'), b: cold('-----(b|)') };
      // a has no ceiling of its own: toolCallSeconds times it, and is due at frame 4, after it ended.
      const { batch, records } = recordsOf([call('a', bodies.a, { tool: 'fetch' }), call('b', bodies.b)]);
      const source = hot('  a-b--|', byId(records));
      const expected = '    aAb--(B|)';
      const limits = { perToolSeconds: { lookup: 0.003 }, toolCallSeconds: 0.004 };
      expectObservable(source.pipe(inLanes(), ceiling(limits), labelled)).toBe(expected, { a: 'a>', A: 'a=a', b: 'b>', B: 'b!ToolTimedOutError' });
      testScheduler.schedule(() => expect(batch.stopped).to.equal(undefined), 10);
    });
  });

  it('is the identity without limits', () => {
    expect(ceiling()).to.equal(identity);
    expect(ceiling({})).to.equal(identity);
    expect(ceiling({ perToolSeconds: {} })).to.equal(identity);
    expect(ceiling({ perToolSeconds: { lookup: 1 } })).not.to.equal(identity);
  });

  it('times nothing more once unsubscribed early: its timers end with it', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const body = cold('-----(a|)');
      const { records } = recordsOf([call('a', body)]);
      const source = hot('  -a|', byId(records));
      // The calls run on for another subscriber, after the ceiling's has left.
      const dispatched = source.pipe(inLanes(), share());
      const unsub = '       ^-!';
      expectObservable(dispatched.pipe(ceiling({ perToolSeconds: { lookup: 0.003 } }), labelled), unsub).toBe('-a-', { a: 'a>' });
      expectObservable(dispatched.pipe(labelled)).toBe('-a----(A|)', { a: 'a>', A: 'a=a' });
      expectSubscriptions(body.subscriptions).toBe('-^----!');
    });
  });

  it('does not break unsubscription chains', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('-----(a|)'), b: cold('-----(b|)') };
      const { records } = recordsOf([call('a', bodies.a), call('b', bodies.b)]);
      const source = hot('  -a-b---|', byId(records));
      const subs = '        ^-----!  ';
      const unsub = '       ^-----!  ';
      const expected = '    -a-bA-   ';
      const result = source.pipe(
        inLanes(),
        mergeMap((record) => of(record)),
        ceiling({ perToolSeconds: { lookup: 0.003 } }),
        mergeMap((record) => of(record)),
        labelled,
      );
      expectObservable(result, unsub).toBe(expected, { a: 'a>', A: 'a!ToolTimedOutError', b: 'b>' });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(bodies.a.subscriptions).toBe('-^--!   ');
      expectSubscriptions(bodies.b.subscriptions).toBe('---^--! ');
    });
  });

  it('times a synchronous source of synchronous bodies, whose ceilings are all passed over', () => {
    testScheduler.run(({ expectObservable }) => {
      const { batch, records } = recordsOf(['a', 'b'].map((id) => call(id, () => id)));
      const result = of(...records).pipe(inLanes(), ceiling({ perToolSeconds: { lookup: 0.001 }, toolCallSeconds: 0.001 }), labelled);
      expectObservable(result).toBe('(aAbB|)', { a: 'a>', A: 'a=a', b: 'b>', B: 'b=b' });
      testScheduler.schedule(() => expect(batch.stopped).to.equal(undefined), 5);
    });
  });

  it('passes on an error from its source', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const body = cold('-----(a|)');
      const { batch, records } = recordsOf([call('a', body)]);
      const source = hot('  -a-#', byId(records));
      const subs = '        ^--!';
      expectObservable(source.pipe(inLanes(), ceiling({ toolCallSeconds: 0.003 }), labelled)).toBe('-a-#', { a: 'a>' });
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(body.subscriptions).toBe('-^-!');
      // Its deadline, due at frame 4, went with it.
      testScheduler.schedule(() => expect(batch.stopped).to.equal(undefined), 10);
    });
  });
});
