import { expect } from 'chai';
import { lastValueFrom, merge, mergeMap, of, throwError, toArray } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { inLanes, type BatchCall, type CallActivity, type LanePlan } from '../../../lib/batch/index.js';
import { ConcurrencyConfig } from '../../../lib/config/index.js';
import { LaneTable } from '../../../lib/lanes/index.js';
import { InvocationAbortedError } from '../../../lib/batch/callBody.js';
import { call } from '../helpers.js';
import { byId, labelled, recordsOf, resultOf } from './records.js';

// What a record reads as when it starts (`a`: `a>`) and when it ends (`A`: `a=a`).
const values = (...ids: string[]): Record<string, string> =>
  Object.fromEntries(ids.flatMap((id) => [[id, `${id}>`], [id.toUpperCase(), `${id}=${id}`]]));

describe('inLanes', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('dispatches calls as they come when no lane binds, emitting each as it starts and as it ends', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('-----(a|)'), b: cold('-(b|)'), c: cold('--(c|)') };
      const { records } = recordsOf(Object.entries(bodies).map(([id, body]) => call(id, body)));
      const source = hot('  -a-b-c|   ', byId(records));
      const subs = '        ^-----!   ';
      const expected = '    -a-bBcA(C|)';
      expectObservable(source.pipe(inLanes(), labelled)).toBe(expected, values('a', 'b', 'c'));
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(bodies.a.subscriptions).toBe('-^----!   ');
      expectSubscriptions(bodies.b.subscriptions).toBe('---^!     ');
      expectSubscriptions(bodies.c.subscriptions).toBe('-----^-!  ');
    });
  });

  // Three calls of one batch, each five frames long, where a lane of the plan holds c back
  // until a ends: its permit goes straight to c, which starts before a's outcome goes on (a
  // call's permits go back before its outcome travels downstream) and before b, which ends in
  // the same frame, is heard.
  const lanes: Array<{ title: string; plan: (lanes: LaneTable) => LanePlan; calls: BatchCall[]; lane: string }> = [
    {
      title: 'the turn lane (maxConcurrentTools)',
      plan: () => ({ concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }) }),
      calls: [call('a', () => undefined), call('b', () => undefined), call('c', () => undefined)],
      lane: 'turn',
    },
    {
      title: 'a tool lane (perTool)',
      plan: (table) => ({ shared: { lanes: table, concurrency: new ConcurrencyConfig({ perTool: { search: 1 } }) } }),
      calls: [call('a', () => undefined, { tool: 'search' }), call('b', () => undefined, { tool: 'fetch' }), call('c', () => undefined, { tool: 'search' })],
      lane: 'tool:search',
    },
    {
      title: 'a tenant lane (perTenant)',
      plan: (table) => ({ shared: { lanes: table, concurrency: new ConcurrencyConfig({ perTenant: 2 }) }, tenant: 'acme' }),
      calls: [call('a', () => undefined), call('b', () => undefined), call('c', () => undefined)],
      lane: 'tenant:acme',
    },
    {
      title: 'the identical-arguments lane of a call that is not parallel-safe',
      plan: (table) => ({ shared: { lanes: table, concurrency: new ConcurrencyConfig() } }),
      calls: [
        call('a', () => undefined, { tool: 'booking', parallelSafe: false, args: { room: 7, night: 'fri' } }),
        call('b', () => undefined, { tool: 'booking', parallelSafe: false, args: { room: 8, night: 'fri' } }),
        call('c', () => undefined, { tool: 'booking', parallelSafe: false, args: { night: 'fri', room: 7 } }),
      ],
      lane: 'args:booking:{"night":"fri","room":7}',
    },
  ];
  for (const lane of lanes) {
    it(`takes its concurrency from ${lane.title}`, () => {
      const table = new LaneTable();
      const queued: string[] = [];
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const bodies = { a: cold('-----(a|)'), b: cold('-----(b|)'), c: cold('-----(c|)') };
        const calls = lane.calls.map((c) => ({ ...c, invoke: () => bodies[c.callId as 'a' | 'b' | 'c'] }));
        const onActivity = (activity: CallActivity) => activity.type === 'queued' && queued.push(`${activity.callId}@${activity.lane}`);
        const { records } = recordsOf(calls, { onActivity });
        const source = cold('  (abc|)', byId(records));
        const expected = '     (ab)-(cAB)(C|)';
        expectObservable(source.pipe(inLanes(lane.plan(table)), labelled)).toBe(expected, values('a', 'b', 'c'));
        expectSubscriptions(bodies.a.subscriptions).toBe('^----!     ');
        expectSubscriptions(bodies.b.subscriptions).toBe('^----!     ');
        expectSubscriptions(bodies.c.subscriptions).toBe('-----^----!');
      });
      expect(queued).to.deep.equal([`c@${lane.lane}`]);
      expect(table.size).to.equal(0);
    });
  }

  it('shares its lanes across subscriptions: a tenant waits for its own calls in other batches, another tenant does not', () => {
    const table = new LaneTable();
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const shared = { lanes: table, concurrency: new ConcurrencyConfig({ perTenant: 1 }) };
      const bodies = { a: cold('-----(a|)'), b: cold('-----(b|)'), c: cold('-----(c|)') };
      const acme1 = recordsOf([call('a', bodies.a)]).records;
      const acme2 = recordsOf([call('b', bodies.b)]).records;
      const zenith = recordsOf([call('c', bodies.c)]).records;
      const result = merge(
        cold('(a|)', byId(acme1)).pipe(inLanes({ shared, tenant: 'acme' })),
        cold('(b|)', byId(acme2)).pipe(inLanes({ shared, tenant: 'acme' })),
        cold('(c|)', byId(zenith)).pipe(inLanes({ shared, tenant: 'zenith' })),
      );
      expectObservable(result.pipe(labelled)).toBe('(ac)-(bAC)(B|)', values('a', 'b', 'c'));
      expectSubscriptions(bodies.b.subscriptions).toBe('-----^----!');
      expectSubscriptions(bodies.c.subscriptions).toBe('^----!     ');
    });
    expect(table.size).to.equal(0);
  });

  it('ends a refused call at once, never dispatched and without its lanes, so it holds back nobody', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('-(a|)'), b: cold('-(b|)'), c: cold('-----(c|)') };
      const { records } = recordsOf([
        call('a', bodies.a),
        call('b', bodies.b, { refused: { name: 'ToolArgumentsError', message: 'expected string at args.q' } }),
        call('c', bodies.c),
      ]);
      records[0]!.refuse({ name: 'ToolRejectedError', message: 'not approved' });
      const source = cold('  (abc|)', byId(records));
      const expected = '     (ABc)(C|)';
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 1 });
      expectObservable(source.pipe(inLanes({ concurrency }), labelled)).toBe(expected, {
        A: 'a!ToolRejectedError',
        B: 'b!ToolArgumentsError',
        c: 'c>',
        C: 'c=c',
      });
      expectSubscriptions(bodies.a.subscriptions).toBe([]);
      expectSubscriptions(bodies.b.subscriptions).toBe([]);
      expectSubscriptions(bodies.c.subscriptions).toBe('^----!');
    });
  });

  it('passes on a record already decided (a cache hit) as it is: no lanes, no body', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('-----(a|)'), b: cold('-(b|)') };
      const { records } = recordsOf([call('a', bodies.a), call('b', bodies.b)]);
      records[1]!.decide(resultOf(records[1]!, 'cached'));
      const source = hot('  -a-b-|  ', byId(records));
      const expected = '    -a-B--(A|)';
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 1 });
      expectObservable(source.pipe(inLanes({ concurrency }), labelled)).toBe(expected, { a: 'a>', A: 'a=a', B: 'b=cached' });
      expectSubscriptions(bodies.a.subscriptions).toBe('-^----!');
      expectSubscriptions(bodies.b.subscriptions).toBe([]);
    });
  });

  it('ends every call where it stands when unsubscribed: bodies unsubscribed, their signals aborted, permits back', () => {
    const table = new LaneTable();
    const signals: AbortSignal[] = [];
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('-----(a|)'), b: cold('-----(b|)') };
      const { records } = recordsOf(
        (['a', 'b'] as const).map((id) =>
          call(id, (context) => {
            signals.push(context.signal);
            return bodies[id];
          }),
        ),
      );
      const shared = { lanes: table, concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) };
      const source = cold('  (ab|)', byId(records));
      const unsub = '        ^-!   ';
      expectObservable(source.pipe(inLanes({ shared }), labelled), unsub).toBe('a--', { a: 'a>' });
      expectSubscriptions(bodies.a.subscriptions).toBe('^-!');
      expectSubscriptions(bodies.b.subscriptions).toBe([]);
    });
    expect(signals).to.have.length(1);
    expect(signals[0]!.aborted).to.equal(true);
    expect(signals[0]!.reason).to.be.instanceOf(InvocationAbortedError);
    expect(table.size).to.equal(0);
  });

  it('subscribes an Observable body, awaits a Promise body, and fails a body that throws or rejects alone', async () => {
    const { records } = recordsOf([
      call('a', () => 'sync'),
      call('b', () => Promise.resolve('promised')),
      call('c', of('first', 'second')),
      call('d', () => {
        throw new RangeError('sync throw');
      }),
      call('e', () => Promise.reject(new TypeError('rejected'))),
      call('f', throwError(() => new SyntaxError('errored'))),
    ]);
    const labels = await lastValueFrom(of(...records).pipe(inLanes(), labelled, toArray()));
    const ended = labels.filter((text) => !text.endsWith('>'));
    expect(ended).to.have.members(['a=sync', 'b=promised', 'c=first', 'd!RangeError', 'e!TypeError', 'f!SyntaxError']);
    expect(labels.filter((text) => text.endsWith('>'))).to.deep.equal(['a>', 'b>', 'c>', 'd>', 'e>', 'f>']);
  });

  it('refuses a concurrency that is not a ConcurrencyConfig, when the operator is made', () => {
    const concurrency = { maxConcurrentTools: 2 } as unknown as ConcurrencyConfig;
    expect(() => inLanes({ concurrency })).to.throw(TypeError, 'inLanes: plan.concurrency must be a ConcurrencyConfig');
  });

  it('stops dispatching and ends the calls in flight when unsubscribed early', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('-----(a|)'), b: cold('-----(b|)'), c: cold('-----(c|)') };
      const { records } = recordsOf(Object.entries(bodies).map(([id, body]) => call(id, body)));
      const source = hot('  -a-b-c-|', byId(records));
      const subs = '        ^---!    ';
      const unsub = '       ^---!    ';
      expectObservable(source.pipe(inLanes(), labelled), unsub).toBe('-a-b', values('a', 'b'));
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(bodies.a.subscriptions).toBe('-^--!');
      expectSubscriptions(bodies.b.subscriptions).toBe('---^!');
      expectSubscriptions(bodies.c.subscriptions).toBe([]);
    });
  });

  it('does not break unsubscription chains', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const bodies = { a: cold('--(a|)'), b: cold('-----(b|)') };
      const { records } = recordsOf(Object.entries(bodies).map(([id, body]) => call(id, body)));
      const source = hot('  -a-b----|', byId(records));
      const subs = '        ^-----!   ';
      const unsub = '       ^-----!   ';
      const expected = '    -a-(bA)-  ';
      const result = source.pipe(
        mergeMap((record) => of(record)),
        inLanes(),
        mergeMap((record) => of(record)),
        labelled,
      );
      expectObservable(result, unsub).toBe(expected, values('a', 'b'));
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(bodies.a.subscriptions).toBe('-^-!      ');
      expectSubscriptions(bodies.b.subscriptions).toBe('---^--!   ');
    });
  });

  it('dispatches a synchronous source of synchronous bodies, each call ending before the next starts', () => {
    testScheduler.run(({ expectObservable }) => {
      const { records } = recordsOf(['a', 'b', 'c'].map((id) => call(id, () => id)));
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 1 });
      expectObservable(of(...records).pipe(inLanes({ concurrency }), labelled)).toBe('(aAbBcC|)', values('a', 'b', 'c'));
    });
  });

  it('passes on an error from its source, ending the calls in flight and giving their permits back', () => {
    const table = new LaneTable();
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const body = cold('-----(a|)');
      const { records } = recordsOf([call('a', body, { tool: 'search' })]);
      const shared = { lanes: table, concurrency: new ConcurrencyConfig({ perTool: { search: 1 } }) };
      const source = hot('  -a-#', byId(records));
      const subs = '        ^--!';
      expectObservable(source.pipe(inLanes({ shared }), labelled)).toBe('-a-#', values('a'));
      expectSubscriptions(source.subscriptions).toBe(subs);
      expectSubscriptions(body.subscriptions).toBe('-^-!');
    });
    expect(table.size).to.equal(0);
  });
});
