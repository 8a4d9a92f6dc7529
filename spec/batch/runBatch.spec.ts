import { expect } from 'chai';
import { map, merge, NEVER, type Observable, of, throwError, toArray, lastValueFrom, Subject } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { mergeDeltas, runBatch, type CallActivity, type InvokeContext, type Outcome, type StopReason } from '../../lib/batch/index.js';
import { ConcurrencyConfig, DeadlineConfig } from '../../lib/config/index.js';
import { grant, LaneTable, type Loan, type OnGrant } from '../../lib/lanes/index.js';
import { brief, briefly, call } from './helpers.js';

describe('runBatch', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  describe('fan-out inside lanes', () => {
    it('runs four calls at once, finishing in one call\'s time', () => {
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const bodies = ['a', 'b', 'c', 'd'].map((x) => cold(`----(${x}|)`));
        const calls = bodies.map((body, i) => call('abcd'[i]!, body));
        expectObservable(runBatch(calls).pipe(briefly)).toBe('----(abcd|)', { a: 'a=a', b: 'b=b', c: 'c=c', d: 'd=d' });
        for (const body of bodies) expectSubscriptions(body.subscriptions).toBe('^---!');
      });
    });

    it('runs two at a time when the turn lane is 2', () => {
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const bodies = ['a', 'b', 'c', 'd'].map((x) => cold(`----(${x}|)`));
        const calls = bodies.map((body, i) => call('abcd'[i]!, body));
        const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2 });
        expectObservable(runBatch(calls, { concurrency }).pipe(briefly)).toBe('----(ab)(cd|)', { a: 'a=a', b: 'b=b', c: 'c=c', d: 'd=d' });
        expectSubscriptions(bodies[0]!.subscriptions).toBe('^---!');
        expectSubscriptions(bodies[1]!.subscriptions).toBe('^---!');
        expectSubscriptions(bodies[2]!.subscriptions).toBe('----^---!');
        expectSubscriptions(bodies[3]!.subscriptions).toBe('----^---!');
      });
    });

    it('binds a turn lane one permit short of the batch, and queues nobody on one as wide as the batch', () => {
      // Bodies that never answer hold their permits, so a lane that can bind does.
      const held = (maxConcurrentTools: number, perTool?: { lookup: number }) => {
        const lanes: string[] = [];
        const calls = ['a', 'b', 'c'].map((x) => call(x, NEVER));
        const concurrency = new ConcurrencyConfig({ maxConcurrentTools, ...(perTool ? { perTool } : {}) });
        const shared = { lanes: new LaneTable(), concurrency: new ConcurrencyConfig() };
        runBatch(calls, { concurrency, shared, onActivity: (a) => a.type === 'queued' && lanes.push(a.lane) }).subscribe().unsubscribe();
        return lanes;
      };
      expect(held(2)).to.deep.equal(['turn']);
      expect(held(3)).to.deep.equal([]);
      expect(held(10, { lookup: 2 })).to.deep.equal(['turn-tool:lookup']);
      expect(held(10, { lookup: 3 })).to.deep.equal([]);
    });

    it('shares a per-tool lane between two batches', () => {
      const lanes = new LaneTable();
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const concurrency = new ConcurrencyConfig({ perTool: { search: 1 } });
        const shared = { lanes, concurrency };
        const s1 = cold('-----(x|)');
        const s2 = cold('-----(y|)');
        const other = cold('-----(z|)');
        const first = runBatch([call('s1', s1, { tool: 'search' }), call('o', other, { tool: 'fetch' })], { concurrency, shared });
        const second = runBatch([call('s2', s2, { tool: 'search' })], { concurrency, shared });
        expectObservable(merge(first, second).pipe(briefly)).toBe('-----(ab)-(c|)', { a: 's1=x', b: 'o=z', c: 's2=y' });
        expectSubscriptions(s1.subscriptions).toBe('^----!');
        expectSubscriptions(other.subscriptions).toBe('^----!');
        expectSubscriptions(s2.subscriptions).toBe('-----^----!');
      });
      expect(lanes.size).to.equal(0);
    });

    it('works with a store that extends LaneTable and wraps what it is handed, telling it with grant()', () => {
      // A store may be handed a function or an object with granted(): grant() tells either.
      class CountingTable extends LaneTable {
        grants = 0;
        override enter(key: string, limit: number, onGrant: OnGrant, party?: string) {
          return super.enter(key, limit, () => (this.grants++, grant(onGrant)), party);
        }
      }
      const lanes = new CountingTable();
      testScheduler.run(({ cold, expectObservable }) => {
        const concurrency = new ConcurrencyConfig({ perTool: { search: 1 } });
        const calls = ['a', 'b'].map((x) => call(x, cold('---(r|)'), { tool: 'search' }));
        expectObservable(runBatch(calls, { concurrency, shared: { lanes, concurrency } }).pipe(briefly)).toBe('---a--(b|)', { a: 'a=r', b: 'b=r' });
      });
      expect(lanes.grants).to.equal(2);
      expect(lanes.size).to.equal(0);
    });

    it('works with a table whose enter was wrapped on the instance, or behind a proxy', () => {
      const wrapped = new LaneTable();
      const enter = wrapped.enter.bind(wrapped);
      wrapped.enter = (key, limit, onGrant, party) => enter(key, limit, () => grant(onGrant), party);
      const proxied = new Proxy(new LaneTable(), {
        get: (target, property, receiver) =>
          property === 'enter'
            ? (key: string, limit: number, onGrant: OnGrant, party?: string) => target.enter(key, limit, () => grant(onGrant), party)
            : Reflect.get(target, property, receiver),
      });
      for (const lanes of [wrapped, proxied]) {
        new TestScheduler((actual, expected) => {
          expect(actual).to.deep.equal(expected);
        }).run(({ cold, expectObservable }) => {
          const concurrency = new ConcurrencyConfig({ perTool: { search: 1 } });
          const calls = ['a', 'b'].map((x) => call(x, cold('---(r|)'), { tool: 'search' }));
          expectObservable(runBatch(calls, { concurrency, shared: { lanes, concurrency } }).pipe(briefly)).toBe('---a--(b|)', { a: 'a=r', b: 'b=r' });
        });
        expect(lanes.occupancy()).to.deep.equal([]);
      }
    });

    it('shares a tenant lane across batches while another tenant runs freely', () => {
      const lanes = new LaneTable();
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const concurrency = new ConcurrencyConfig({ perTenant: 1 });
        const shared = { lanes, concurrency };
        const a1 = cold('----(1|)');
        const a2 = cold('----(2|)');
        const b1 = cold('----(3|)');
        const b2 = cold('----(4|)');
        const acme1 = runBatch([call('a1', a1)], { concurrency, shared, tenant: 'acme' });
        const acme2 = runBatch([call('a2', a2)], { concurrency, shared, tenant: 'acme' });
        const globex = runBatch([call('b1', b1), call('b2', b2)], { concurrency, shared, tenant: 'globex' });
        expectObservable(merge(acme1, acme2, globex).pipe(briefly)).toBe('----(ab)(cd|)', { a: 'a1=1', b: 'b1=3', c: 'a2=2', d: 'b2=4' });
        expectSubscriptions(a1.subscriptions).toBe('^---!');
        expectSubscriptions(a2.subscriptions).toBe('----^---!');
        expectSubscriptions(b1.subscriptions).toBe('^---!');
        expectSubscriptions(b2.subscriptions).toBe('----^---!');
      });
      expect(lanes.size).to.equal(0);
    });

    it('takes lanes tenant, turn, tool, so crossing calls cannot deadlock', () => {
      // Two tenants, each limited to one call, both calling two tools limited to one call each,
      // in opposite orders. Taking the tool first could leave each call holding what the other needs.
      const lanes = new LaneTable();
      const order: string[] = [];
      lanes.changes$.subscribe((c) => c.change === 'granted' && order.push(c.key));
      testScheduler.run(({ cold, expectObservable }) => {
        const concurrency = new ConcurrencyConfig({ perTenant: 1, perTool: { x: 1, y: 1 } });
        const shared = { lanes, concurrency };
        const acme = runBatch([call('a1', cold('----(1|)'), { tool: 'x' }), call('a2', cold('----(2|)'), { tool: 'y' })], { concurrency, shared, tenant: 'acme' });
        const globex = runBatch([call('g1', cold('----(3|)'), { tool: 'y' }), call('g2', cold('----(4|)'), { tool: 'x' })], { concurrency, shared, tenant: 'globex' });
        expectObservable(merge(acme, globex).pipe(briefly)).toBe('----(ab)(cd|)', { a: 'a1=1', b: 'g1=3', c: 'a2=2', d: 'g2=4' });
      });
      // every grant of a tool lane comes right after its tenant's
      expect(order.slice(0, 4)).to.deep.equal(['tenant:acme', 'tool:x', 'tenant:globex', 'tool:y']);
      expect(lanes.size).to.equal(0);
    });

    it('takes a call\'s own lane after the tool lane, shared by the tools that name it, across batches', () => {
      const lanes = new LaneTable();
      const order: string[] = [];
      lanes.changes$.subscribe((c) => c.change === 'granted' && order.push(c.key));
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const concurrency = new ConcurrencyConfig({ perTool: { x: 4, y: 4 } });
        const shared = { lanes, concurrency };
        const server = { key: 'mcp:files', limit: 2 };
        const c = cold('------(3|)');
        const d = cold('------(4|)');
        const first = runBatch([call('a', cold('------(1|)'), { tool: 'x', lane: server }), call('b', cold('------(2|)'), { tool: 'y', lane: server })], { concurrency, shared });
        const second = runBatch([call('c', c, { tool: 'x', lane: server }), call('d', d, { tool: 'z' })], { concurrency, shared });
        expectObservable(merge(first, second).pipe(briefly)).toBe('------(ab)--(cd|)', { a: 'a=1', b: 'b=2', c: 'c=3', d: 'd=4' });
        // c waits for the server's lane; d, a tool without one, runs at once.
        expectSubscriptions(c.subscriptions).toBe('------^-----!');
        expectSubscriptions(d.subscriptions).toBe('^-----!');
      });
      expect(order.slice(0, 4)).to.deep.equal(['tool:x', 'mcp:files', 'tool:y', 'mcp:files']);
      expect(lanes.size).to.equal(0);
    });

    it('reports a call queued on its own lane by that lane\'s key', () => {
      const seen: string[] = [];
      testScheduler.run(({ cold, flush }) => {
        const lane = { key: 'mcp:files', limit: 1 };
        runBatch([call('a', cold('--(a|)'), { lane }), call('b', cold('--(b|)'), { lane })], { onActivity: (a) => a.type === 'queued' && seen.push(`${a.at} ${a.callId} ${a.lane}`) }).subscribe();
        flush();
      });
      expect(seen).to.deep.equal(['0 b mcp:files']);
    });

    it('adds the agent\'s narrower per-tool bound inside its own turn only', () => {
      const lanes = new LaneTable();
      testScheduler.run(({ cold, expectObservable }) => {
        const runner = new ConcurrencyConfig({ perTool: { search: 4 } });
        const turn = runner.narrowedTo({ perTool: { search: 1 } });
        const narrowed = runBatch([call('n1', cold('-----(1|)'), { tool: 'search' }), call('n2', cold('-----(2|)'), { tool: 'search' })], { concurrency: turn, shared: { lanes, concurrency: runner } });
        const other = runBatch([call('o1', cold('-----(3|)'), { tool: 'search' }), call('o2', cold('-----(4|)'), { tool: 'search' })], { concurrency: runner, shared: { lanes, concurrency: runner } });
        expectObservable(merge(narrowed, other).pipe(briefly)).toBe('-----(abc)(d|)', { a: 'n1=1', b: 'o1=3', c: 'o2=4', d: 'n2=2' });
      });
    });
  });

  describe('phases', () => {
    it('gives a parallelSafe:false call a phase alone', () => {
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const a = cold('--(a|)');
        const b = cold('----(b|)');
        const booking = cold('---(k|)');
        const d = cold('-(d|)');
        const e = cold('-(e|)');
        const calls = [call('a', a), call('b', b), call('k', booking, { tool: 'booking', parallelSafe: false }), call('d', d), call('e', e)];
        expectObservable(runBatch(calls).pipe(briefly)).toBe('--a-b--k(de|)', { a: 'a=a', b: 'b=b', k: 'k=k', d: 'd=d', e: 'e=e' });
        expectSubscriptions(a.subscriptions).toBe('^-!');
        expectSubscriptions(b.subscriptions).toBe('^---!');
        expectSubscriptions(booking.subscriptions).toBe('----^--!');
        expectSubscriptions(d.subscriptions).toBe('-------^!');
        expectSubscriptions(e.subscriptions).toBe('-------^!');
      });
    });

    it('serialises calls to a parallelSafe:false tool with identical arguments across batches', () => {
      const lanes = new LaneTable();
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const concurrency = new ConcurrencyConfig();
        const shared = { lanes, concurrency };
        const first = cold('----(1|)');
        const same = cold('----(2|)');
        const different = cold('----(3|)');
        const book = (id: string, body: Observable<string>, args: unknown) => call(id, body, { tool: 'booking', parallelSafe: false, args });
        const run1 = runBatch([book('b1', first, { room: 7, night: 'fri' })], { shared });
        const run2 = runBatch([book('b2', same, { night: 'fri', room: 7 })], { shared });
        const run3 = runBatch([book('b3', different, { room: 8, night: 'fri' })], { shared });
        expectObservable(merge(run1, run2, run3).pipe(briefly)).toBe('----(ac)(b|)', { a: 'b1=1', b: 'b2=2', c: 'b3=3' });
        expectSubscriptions(same.subscriptions).toBe('----^---!');
      });
      expect(lanes.size).to.equal(0);
    });
  });

  describe('call order', () => {
    it('emits in call order although the calls finish in reverse', () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const calls = [call('a', cold('----(1|)')), call('b', cold('---(2|)')), call('c', cold('--(3|)')), call('d', cold('-(4|)'))];
        expectObservable(runBatch(calls).pipe(briefly)).toBe('----(abcd|)', { a: 'a=1', b: 'b=2', c: 'c=3', d: 'd=4' });
      });
    });

    it('still streams: releases each outcome once every earlier call has settled', () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const calls = [call('a', cold('-(1|)')), call('b', cold('-----(2|)')), call('c', cold('--(3|)'))];
        expectObservable(runBatch(calls).pipe(briefly)).toBe('-a---(bc|)', { a: 'a=1', b: 'b=2', c: 'c=3' });
      });
    });

    it('handles synchronous bodies and an empty batch', async () => {
      const outcomes = await lastValueFrom(runBatch([call('a', () => 1), call('b', () => Promise.resolve(2)), call('c', of(3))]).pipe(briefly, toArray()));
      expect(outcomes).to.deep.equal(['a=1', 'b=2', 'c=3']);
      expect(await lastValueFrom(runBatch([]).pipe(toArray()))).to.deep.equal([]);
    });
  });

  describe('per-call failure', () => {
    it('fails a throwing, rejecting or erroring body alone, keeping its siblings', async () => {
      const outcomes = await lastValueFrom(
        runBatch([
          call('ok', () => 'fine'),
          call('throws', () => {
            throw new RangeError('sync');
          }),
          call('rejects', () => Promise.reject(new Error('async'))),
          call('errors', throwError(() => new TypeError('stream'))),
          call('odd', () => Promise.reject('a bare string')),
        ]).pipe(toArray()),
      );
      expect(outcomes.map(brief)).to.deep.equal(['ok=fine', 'throws!RangeError', 'rejects!Error', 'errors!TypeError', 'odd!Error']);
      const odd = outcomes[4]!;
      expect(odd.kind === 'error' && odd.error.message).to.equal('a bare string');
    });

    it('fails a call that outran its perToolSeconds, counted from dispatch, while its siblings finish', () => {
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const slow = cold('----------(s|)');
        const quick = cold('---(q|)');
        const queued = cold('------(w|)');
        const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2, perToolSeconds: { slow: 0.005, lookup: 0.007 } });
        const calls = [call('s', slow, { tool: 'slow' }), call('q', quick), call('w', queued)];
        // w queues 3ms behind q, then runs 6ms: within its 7ms counted from dispatch
        expectObservable(runBatch(calls, { concurrency }).pipe(briefly)).toBe('-----(ab)(c|)', { a: 's!ToolTimedOutError', b: 'q=q', c: 'w=w' });
        expectSubscriptions(slow.subscriptions).toBe('^----!');
        expectSubscriptions(queued.subscriptions).toBe('---^-----!');
      });
    });

    it('names the tool and its ceiling in ToolTimedOutError, and warns when not idempotent', () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const concurrency = new ConcurrencyConfig({ perToolSeconds: { charge: 0.002, lookup: 0.002 } });
        const calls = [call('c', cold('-----(x|)'), { tool: 'charge' }), call('l', cold('-----(x|)'), { idempotent: true })];
        expectObservable(runBatch(calls, { concurrency }).pipe(map((o) => (o.kind === 'error' ? o.error.message : brief(o))))).toBe('--(ab|)', {
          a: 'charge timed out after 0.002s (its perToolSeconds ceiling). The side effect may have landed',
          b: 'lookup timed out after 0.002s (its perToolSeconds ceiling). Safe to call again',
        });
      });
    });

    it('aborts the body\'s signal when its call times out', () => {
      const signals: AbortSignal[] = [];
      testScheduler.run(({ cold, flush }) => {
        const concurrency = new ConcurrencyConfig({ perToolSeconds: { lookup: 0.001 } });
        runBatch([call('a', ({ signal }: { signal: AbortSignal }) => (signals.push(signal), cold('---x')))], { concurrency }).subscribe();
        flush();
      });
      expect(signals[0]!.aborted).to.equal(true);
    });

    it('does not dispatch a call with rejected arguments, and fails it alone', () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const calls = [call('bad', cold('-(x|)'), { refused: { name: 'ToolArgumentsError', message: 'args.q: expected string, got 42' } }), call('good', cold('-(y|)'))];
        expectObservable(runBatch(calls).pipe(briefly)).toBe('a(b|)', { a: 'bad!ToolArgumentsError', b: 'good=y' });
      });
    });
  });

  describe('stopping', () => {
    const stopAt = (marble: string, reason: StopReason, hot: TestScheduler['createHotObservable']) => hot(marble, { s: reason });

    it('classifies each call by what it had done when the batch stopped', () => {
      testScheduler.run(({ cold, hot, expectObservable, expectSubscriptions }) => {
        const done = cold('-(d|)');
        const idem = cold('-----(i|)');
        const sideEffect = cold('-----(e|)');
        const queued = cold('-(q|)');
        const stop$ = stopAt('---s', { kind: 'cancelled', why: 'the run was cancelled' }, hot.bind(testScheduler) as never);
        const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2 });
        const calls = [
          call('d', done),
          call('i', idem, { idempotent: true }),
          call('e', sideEffect, { tool: 'charge' }),
          call('q', queued),
        ];
        const outcomes$ = runBatch(calls, { concurrency, stop$ });
        expectObservable(outcomes$.pipe(briefly)).toBe('-a-(bcd|)', { a: 'd=d', b: 'i!CallStoppedError', c: 'e?', d: 'q!CallStoppedError' });
        expectSubscriptions(idem.subscriptions).toBe('^--!');
        expectSubscriptions(sideEffect.subscriptions).toBe('-^-!');
        expectSubscriptions(queued.subscriptions).toBe([]);
      });
    });

    it('says never dispatched, safe to call again, or the side effect may have landed', async () => {
      const stop$ = new Subject<StopReason>();
      const calls = [
        call('i', NEVER, { idempotent: true, tool: 'search' }),
        call('e', NEVER, { tool: 'charge' }),
        call('q', NEVER),
      ];
      const outcomes = lastValueFrom(runBatch(calls, { concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }), stop$ }).pipe(toArray()));
      stop$.next({ kind: 'cancelled', why: 'the user pressed stop' });
      const [i, e, q] = await outcomes;
      expect(i).to.deep.include({ kind: 'error', dispatched: true });
      expect(i!.kind === 'error' && i!.error.message).to.equal('search was in flight when the batch stopped (the user pressed stop). Safe to call again');
      expect(e).to.deep.include({ kind: 'indeterminate', dispatched: true, message: 'charge was in flight when the batch stopped (the user pressed stop). The side effect may have landed' });
      expect(q).to.deep.include({ kind: 'error', dispatched: false });
      expect(q!.kind === 'error' && q!.error.message).to.equal('never dispatched: the user pressed stop');
    });

    it('stops the siblings at the first failure under failFast (FAIL_RUN)', () => {
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const failing = cold('--#', undefined, new Error('partner down'));
        const sibling = cold('-----(s|)');
        const queued = cold('-(q|)');
        const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2 });
        const calls = [call('f', failing), call('s', sibling, { tool: 'charge' }), call('q', queued)];
        expectObservable(runBatch(calls, { concurrency, failFast: true }).pipe(briefly)).toBe('--(abc|)', { a: 'f!Error', b: 's?', c: 'q!CallStoppedError' });
        expectSubscriptions(sibling.subscriptions).toBe('^-!');
        expectSubscriptions(queued.subscriptions).toBe([]);
      });
    });

    it('names the failed sibling in the classification', async () => {
      const outcomes = await lastValueFrom(
        runBatch([call('f', () => Promise.reject(new Error('partner down'))), call('w', NEVER, { idempotent: true })], { failFast: true }).pipe(toArray()),
      );
      const w = outcomes[1]!;
      expect(w.kind === 'error' && w.error.message).to.equal('lookup was in flight when the batch stopped (call f (lookup) failed: partner down). Safe to call again');
      expect(w.kind === 'error' && w.stopped).to.deep.include({ kind: 'failed', callId: 'f' });
    });

    it('keeps the siblings when failFast is off', () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const calls = [call('f', cold('--#')), call('s', cold('-----(s|)'))];
        expectObservable(runBatch(calls).pipe(briefly)).toBe('--a--(b|)', { a: 'f!Error', b: 's=s' });
      });
    });

    it('stops the batch when one call runs past DeadlineConfig.toolCallSeconds', () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const hang = cold('-------(h|)');
        const quick = cold('-(q|)');
        const deadline = new DeadlineConfig({ toolCallSeconds: 0.004 });
        const outcomes$ = runBatch([call('q', quick), call('h', hang, { tool: 'charge' }), call('n', cold('-------(n|)'), { idempotent: true })], { deadline });
        expectObservable(outcomes$.pipe(briefly)).toBe('-a--(bc|)', { a: 'q=q', b: 'h?', c: 'n!CallStoppedError' });
      });
    });

    it('lets the ceiling and the deadline of a call that settled come and go without effect', () => {
      testScheduler.run(({ cold, expectObservable }) => {
        // a settles at 2; b waits for its permit, runs 2-5, inside its own 4ms. a's 4ms end at 4, while b runs.
        const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 1, perToolSeconds: { lookup: 0.004 } });
        const deadline = new DeadlineConfig({ toolCallSeconds: 0.004 });
        const calls = [call('a', cold('--(a|)')), call('b', cold('---(b|)'))];
        expectObservable(runBatch(calls, { concurrency, deadline }).pipe(briefly)).toBe('--a--(b|)', { a: 'a=a', b: 'b=b' });
      });
    });

    it('says which call passed the deadline', () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const deadline = new DeadlineConfig({ toolCallSeconds: 0.002 });
        const outcomes$ = runBatch([call('h', cold('-----(h|)'), { tool: 'charge' })], { deadline });
        expectObservable(outcomes$.pipe(map((o) => (o.kind === 'indeterminate' ? o.message : brief(o))))).toBe('--(a|)', {
          a: 'charge was in flight when the batch stopped (charge (call h) ran longer than DeadlineConfig.toolCallSeconds = 0.002s). The side effect may have landed',
        });
      });
    });

    it('aborts the signal of every body stopped in flight, and of none that finished', async () => {
      const signals = new Map<string, AbortSignal>();
      const keep = (id: string, body: () => unknown) => call(id, ({ signal }: { signal: AbortSignal }) => (signals.set(id, signal), body()));
      const stop$ = new Subject<StopReason>();
      const done = lastValueFrom(runBatch([keep('done', () => 1), keep('hang', () => new Promise(() => undefined))], { stop$ }).pipe(toArray()));
      await Promise.resolve();
      stop$.next({ kind: 'cancelled', why: 'stop' });
      await done;
      expect(signals.get('done')!.aborted).to.equal(false);
      expect(signals.get('hang')!.aborted).to.equal(true);
    });

    it('takes its stop from anything with a subscribe(observer), and stops listening when it ends', async () => {
      let told: ((reason: StopReason) => void) | undefined;
      let listening = 0;
      const stop$ = {
        subscribe(observer: { next?: (reason: StopReason) => void }) {
          listening++;
          told = (reason) => observer.next?.(reason);
          return { unsubscribe: () => void listening-- };
        },
      };
      const done = lastValueFrom(runBatch([call('quick', () => 1), call('hang', () => new Promise(() => undefined))], { stop$ }).pipe(toArray()));
      await Promise.resolve();
      expect(listening).to.equal(1);
      told!({ kind: 'cancelled', why: 'stop' });
      const outcomes = await done;
      expect(outcomes.map(brief)).to.deep.equal(['quick=1', 'hang?']);
      expect(listening).to.equal(0);
    });

    it('stops at once, dispatching nothing, when the stop came before the batch', async () => {
      const invoked: string[] = [];
      const outcomes = await lastValueFrom(
        runBatch([call('a', () => invoked.push('a'))], { stop$: of<StopReason>({ kind: 'cancelled', why: 'already cancelled' }) }).pipe(toArray()),
      );
      expect(invoked).to.deep.equal([]);
      expect(outcomes.map(brief)).to.deep.equal(['a!CallStoppedError']);
    });
  });

  describe('gate and settle', () => {
    it('passes the gate one call at a time, in call order, while approved calls fan out', () => {
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const bodies = [cold('----(a|)'), cold('----(b|)'), cold('----(c|)')];
        const gate = () => cold('-(x|)', { x: undefined });
        const calls = bodies.map((body, i) => call('abc'[i]!, body));
        expectObservable(runBatch(calls, { gate }).pipe(briefly)).toBe('-----ab(c|)', { a: 'a=a', b: 'b=b', c: 'c=c' });
        expectSubscriptions(bodies[0]!.subscriptions).toBe('-^---!');
        expectSubscriptions(bodies[1]!.subscriptions).toBe('--^---!');
        expectSubscriptions(bodies[2]!.subscriptions).toBe('---^---!');
      });
    });

    it('does not dispatch a call the gate refused, or one whose gate threw', async () => {
      const invoked: string[] = [];
      const calls = ['a', 'b', 'c'].map((id) => call(id, () => (invoked.push(id), id)));
      const gate = (c: { callId: string }) => {
        if (c.callId === 'b') return 'not approved';
        if (c.callId === 'c') throw new Error('policy crashed');
        return undefined;
      };
      const outcomes = await lastValueFrom(runBatch(calls, { gate }).pipe(toArray()));
      expect(invoked).to.deep.equal(['a']);
      expect(outcomes.map((o) => (o.kind === 'error' ? `${o.callId}: ${o.error.message}` : brief(o)))).to.deep.equal(['a=a', 'b: not approved', 'c: policy crashed']);
    });

    it('settles in call order, one at a time, and may replace the outcome', () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const calls = [call('a', cold('---(1|)')), call('b', cold('-(2|)'))];
        const settle = (o: Outcome) =>
          cold('--(x|)', { x: o.callId === 'b' ? ({ ...o, kind: 'error', error: { name: 'ToolRejectedError', message: 'no' } } as Outcome) : o });
        expectObservable(runBatch(calls, { settle }).pipe(briefly)).toBe('-----a-(b|)', { a: 'a=1', b: 'b!ToolRejectedError' });
      });
    });
  });

  describe('deltas', () => {
    it('keeps each call\'s delta apart, and merges those of calls that succeeded in call order', async () => {
      const calls = [
        call('a', ({ record }: InvokeContext) => (record({ x: 'a', a: 1 }), Promise.resolve('a'))),
        call('b', ({ record }: InvokeContext) => (record({ x: 'b', b: 2 }), 'b')),
        call('c', ({ record }: InvokeContext) => {
          record({ x: 'c', c: 3 });
          throw new Error('lost');
        }),
      ];
      const outcomes = await lastValueFrom(runBatch(calls).pipe(toArray()));
      expect(outcomes.map((o) => (o.kind === 'result' ? o.delta : undefined))).to.deep.equal([{ x: 'a', a: 1 }, { x: 'b', b: 2 }, undefined]);
      expect(mergeDeltas(outcomes)).to.deep.equal({ x: 'b', a: 1, b: 2 });
    });

    it('does not let a __proto__ key in a delta pollute anything', async () => {
      const patch = JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}') as Record<string, unknown>;
      const outcomes = await lastValueFrom(runBatch([call('a', ({ record }: InvokeContext) => (record(patch), 1))]).pipe(toArray()));
      const merged = mergeDeltas(outcomes);
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
      expect(Object.getPrototypeOf(merged)).to.equal(Object.prototype);
      expect(Object.keys(merged)).to.deep.equal(['__proto__', 'ok']);
    });
  });

  describe('occupancy', () => {
    const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2, perTenant: 3, perTool: { lookup: 2 }, perToolSeconds: { lookup: 0.003 } });
    const endings: Array<{ title: string; body: string; unsubscribeAt?: string; stopAt?: string; failFast?: boolean }> = [
      { title: 'results', body: '-(r|)' },
      { title: 'errors', body: '-#' },
      { title: 'timeouts', body: '------(r|)' },
      { title: 'a stop', body: '------(r|)', stopAt: '--s' },
      { title: 'a sibling failure under failFast', body: '-#', failFast: true },
      { title: 'unsubscribe', body: '------(r|)', unsubscribeAt: '^-!' },
    ];
    for (const ending of endings) {
      it(`returns to zero after ${ending.title}`, () => {
        const lanes = new LaneTable();
        const peak = { holders: 0 };
        lanes.changes$.subscribe((c) => (peak.holders = Math.max(peak.holders, c.holders)));
        testScheduler.run(({ cold, hot, expectObservable }) => {
          const calls = ['a', 'b', 'c', 'd'].map((id) => call(id, cold(ending.body)));
          const stop$ = ending.stopAt === undefined ? undefined : hot(ending.stopAt, { s: { kind: 'cancelled', why: 'stop' } as StopReason });
          const outcomes$ = runBatch(calls, { concurrency, shared: { lanes, concurrency }, ...(stop$ && { stop$ }), failFast: ending.failFast === true });
          if (ending.unsubscribeAt !== undefined) expectObservable(outcomes$.pipe(briefly), ending.unsubscribeAt).toBe('--');
          else outcomes$.subscribe();
        });
        expect(peak.holders).to.be.greaterThan(0);
        expect(lanes.size).to.equal(0);
        expect(lanes.occupancy()).to.deep.equal([]);
      });
    }
  });

  describe('activity', () => {
    it('reports queued (and on which lane), started, ended and settled, with virtual times', () => {
      const seen: string[] = [];
      const onActivity = (a: CallActivity) => seen.push(`${a.at} ${a.type} ${a.callId}${a.type === 'queued' ? ` ${a.lane}` : ''}${a.type === 'settled' || a.type === 'ended' ? ` ${a.outcome}` : ''}`);
      testScheduler.run(({ cold, flush }) => {
        const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 1 });
        runBatch([call('a', cold('--(a|)')), call('b', cold('--(b|)'))], { concurrency, onActivity }).subscribe();
        flush();
      });
      // a's permit goes back before its outcome goes on: b starts before a is settled.
      expect(seen).to.deep.equal(['0 started a', '0 queued b turn', '2 ended a result', '2 started b', '2 settled a result', '4 ended b result', '4 settled b result']);
    });

    it('under FAIL_RUN, finishes the failing call (settled, permits back) before the stop classifies its siblings', () => {
      const seen: string[] = [];
      const lanes = new LaneTable();
      const concurrency = new ConcurrencyConfig({ perTool: { lookup: 1 } });
      lanes.changes$.subscribe((c) => c.change === 'released' && seen.push(`released ${c.key}`));
      const onActivity = (a: CallActivity) => seen.push(`${a.type} ${a.callId}${a.type === 'settled' || a.type === 'ended' ? ` ${a.outcome}` : ''}`);
      const calls = [call('a', throwError(() => new Error('no'))), call('b', NEVER)];
      runBatch(calls, { concurrency, shared: { lanes, concurrency }, failFast: true, settle: (outcome) => outcome, onActivity }).subscribe((o) => seen.push(`out ${brief(o)}`));
      expect(seen).to.deep.equal(['started a', 'ended a error', 'settled a error', 'out a!Error', 'released tool:lookup', 'ended b error', 'settled b error', 'out b!CallStoppedError']);
    });

    for (const watched of [false, true]) {
      it(`left by its subscriber${watched ? ' while watched' : ''}: aborts the body in flight and never starts the call queued behind it`, () => {
        const seen: string[] = [];
        const signals: AbortSignal[] = [];
        testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
          const bodies = { a: cold('-----(a|)'), b: cold('-----(b|)') };
          const calls = (['a', 'b'] as const).map((id) =>
            call(id, (context) => {
              signals.push(context.signal);
              return bodies[id];
            }),
          );
          const onActivity = (a: CallActivity) => seen.push(`${a.type} ${a.callId}${a.type === 'settled' || a.type === 'ended' ? ` ${a.outcome}` : ''}`);
          const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 1 });
          expectObservable(runBatch(calls, { concurrency, ...(watched ? { onActivity } : {}) }).pipe(briefly), '^-!').toBe('--');
          expectSubscriptions(bodies.a.subscriptions).toBe('^-!');
          expectSubscriptions(bodies.b.subscriptions).toBe([]);
        });
        expect(signals.map((signal) => signal.aborted)).to.deep.equal([true]);
        // A watcher still reads how each call ended: in flight, or never dispatched.
        expect(seen).to.deep.equal(watched ? ['started a', 'queued b', 'ended a indeterminate', 'settled a indeterminate', 'ended b error', 'settled b error'] : []);
      });
    }
  });

  describe('nested runs', () => {
    it('lends the caller its shared permits: a nested call runs in them instead of queueing behind its caller', () => {
      const lanes = new LaneTable();
      const concurrency = new ConcurrencyConfig({ perTenant: 1, perTool: { delegate: 1 } });
      const shared = { lanes, concurrency };
      const seen: string[] = [];
      let inner: Promise<Outcome[]> | undefined;
      const outer = lastValueFrom(
        runBatch(
          [
            call(
              'outer',
              ({ lent }: InvokeContext) => {
                seen.push([...lent.keys()].sort().join(','));
                inner = lastValueFrom(runBatch([call('inner', () => 'deep', { tool: 'delegate' })], { shared, lent, tenant: 'acme' }).pipe(toArray()));
                return inner;
              },
              { tool: 'delegate' },
            ),
          ],
          { shared, tenant: 'acme' },
        ).pipe(toArray()),
      );
      return outer.then(async (outcomes) => {
        expect(seen).to.deep.equal(['tenant:acme,tool:delegate']);
        expect((await inner)!.map(brief)).to.deep.equal(['inner=deep']);
        expect(outcomes[0]!.kind).to.equal('result');
        expect(lanes.size).to.equal(0);
      });
    });

    it('runs nested calls one at a time in a lent permit of a full lane: the bound holds across caller and nested run', async () => {
      const lanes = new LaneTable();
      const concurrency = new ConcurrencyConfig({ perTenant: 1 });
      const shared = { lanes, concurrency };
      let running = 0;
      let peak = 0;
      const leaf = () =>
        new Promise<string>((resolve) => {
          running++;
          peak = Math.max(peak, running);
          setTimeout(() => {
            running--;
            resolve('leaf');
          }, 2);
        });
      const nested = (lent: ReadonlyMap<string, Loan>) =>
        lastValueFrom(runBatch(['n1', 'n2', 'n3', 'n4'].map((id) => call(id, leaf, { tool: 'search' })), { shared, lent, tenant: 'acme' }).pipe(toArray()));
      const outcomes = await lastValueFrom(
        runBatch([call('outer', ({ lent }: InvokeContext) => nested(lent).then((o) => o.map(brief).join(' ')), { tool: 'delegate' })], { shared, tenant: 'acme' }).pipe(toArray()),
      );
      expect(outcomes.map(brief)).to.deep.equal(['outer=n1=leaf n2=leaf n3=leaf n4=leaf']);
      expect(peak).to.equal(1);
      expect(lanes.size).to.equal(0);
    });

    it('lets a nested call take a free permit of the lane as well as the lent one', async () => {
      const lanes = new LaneTable();
      const concurrency = new ConcurrencyConfig({ perTenant: 2 });
      const shared = { lanes, concurrency };
      let running = 0;
      let peak = 0;
      const leaf = () =>
        new Promise<string>((resolve) => {
          running++;
          peak = Math.max(peak, running);
          setTimeout(() => {
            running--;
            resolve('leaf');
          }, 5);
        });
      await lastValueFrom(
        runBatch(
          [call('outer', ({ lent }: InvokeContext) => lastValueFrom(runBatch(['n1', 'n2', 'n3'].map((id) => call(id, leaf, { tool: 'search' })), { shared, lent, tenant: 'acme' }).pipe(toArray())), { tool: 'delegate' })],
          { shared, tenant: 'acme' },
        ).pipe(toArray()),
      );
      // the lent permit and the one free permit: two at once, never three
      expect(peak).to.equal(2);
      expect(lanes.size).to.equal(0);
    });
  });

  // Each of these is a divergence the differential property (differential.spec.ts) found between
  // the pipeline and the state machine it replaces, where the pipeline was wrong.
  describe('endings the state machine already got right', () => {
    // A thenable settled on the test scheduler, so virtual time drives a Promise-like body.
    const settlesAt = (frame: number, value: unknown) => ({
      then: (resolve: (value: unknown) => void) => void testScheduler.schedule(() => resolve(value), frame),
    });

    it('aborts and unsubscribes the bodies in flight when its subscriber leaves while someone watches its activity', () => {
      const aborted: number[] = [];
      const seen: string[] = [];
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const body = cold('------(a|)');
        const hanging = ({ signal }: InvokeContext) => (signal.addEventListener('abort', () => aborted.push(testScheduler.now())), new Promise(() => undefined));
        const onActivity = (a: CallActivity) => seen.push(`${a.at} ${a.type} ${a.callId}${a.type === 'ended' ? ` ${a.outcome}` : ''}`);
        expectObservable(runBatch([call('a', body), call('b', hanging)], { onActivity }), '^--!').toBe('---');
        expectSubscriptions(body.subscriptions).toBe('^--!');
      });
      expect(aborted).to.deep.equal([3]);
      expect(seen).to.deep.equal(['0 started a', '0 started b', '3 ended a indeterminate', '3 settled a', '3 ended b indeterminate', '3 settled b']);
    });

    it('starts no queued call when its subscriber leaves: the permit a torn-down sibling gives back goes to no call of the batch', () => {
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const a = cold('-----(a|)');
        const b = cold('-(b|)');
        const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 1 });
        expectObservable(runBatch([call('a', a), call('b', b)], { concurrency }), '^-!').toBe('--');
        expectSubscriptions(a.subscriptions).toBe('^-!');
        expectSubscriptions(b.subscriptions).toBe([]);
      });
    });

    for (const limits of [{ maxConcurrentTools: 1 }, { perTenant: 1 }]) {
      it(`keeps its own lanes (${Object.keys(limits)[0]}) across phases: a body that overruns its call holds its permit into the next phase`, () => {
        testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
          const next = cold('-(b|)');
          const concurrency = new ConcurrencyConfig({ ...limits, perToolSeconds: { booking: 0.002 } });
          // k times out at 2 but its body, ignoring the abort, runs until 5: b waits for it.
          const calls = [call('k', () => settlesAt(5, 'late'), { tool: 'booking', parallelSafe: false }), call('b', next)];
          expectObservable(runBatch(calls, { concurrency }).pipe(briefly)).toBe('--a---(b|)', { a: 'k!ToolTimedOutError', b: 'b=b' });
          expectSubscriptions(next.subscriptions).toBe('-----^!');
        });
      });
    }

    it('classifies a call whose body stops its own batch as in flight, and ignores what the body answers after', () => {
      const stop$ = new Subject<StopReason>();
      const stopping = (answer: unknown) => () => (stop$.next({ kind: 'cancelled', why: 'the tool cancelled the run' }), answer);
      for (const answer of ['late', new Promise(() => undefined)]) {
        const seen: string[] = [];
        const outcomes: string[] = [];
        const onActivity = (a: CallActivity) => seen.push(`${a.type} ${a.callId}${a.type === 'ended' ? ` ${a.outcome}${a.overrun ? ' overrun' : ''}` : ''}`);
        runBatch([call('a', stopping(answer), { tool: 'charge' }), call('b', () => 'b')], { stop$, onActivity }).subscribe((o) => outcomes.push(brief(o)));
        // As it is when the body runs later than the batch's start (behind a gate, say).
        expect(outcomes).to.deep.equal(['a?', 'b!CallStoppedError']);
        // A body that answered at once is over; one whose Promise still runs keeps its permits (an overrun).
        const overrun = typeof answer === 'string' ? '' : ' overrun';
        expect(seen).to.deep.equal(['started a', `ended a indeterminate${overrun}`, 'ended b error', 'settled a', 'settled b']);
      }
    });

    it('keeps the permit of a body that stopped its own batch while its Promise still runs: no other batch starts in it', async () => {
      const lanes = new LaneTable();
      const concurrency = new ConcurrencyConfig({ perTool: { slow: 1 } });
      const shared = { lanes, concurrency };
      const stop$ = new Subject<StopReason>();
      let finish: () => void = () => undefined;
      const body = () => {
        stop$.next({ kind: 'cancelled', why: 'the tool cancelled the run' });
        return new Promise<string>((resolve) => (finish = () => resolve('late')));
      };
      const first = await lastValueFrom(runBatch([call('a', body, { tool: 'slow' })], { concurrency, shared, stop$ }).pipe(toArray()));
      expect(first.map(brief)).to.deep.equal(['a?']);
      let started = false;
      const second = lastValueFrom(runBatch([call('b', () => ((started = true), 'b'), { tool: 'slow' })], { concurrency, shared }).pipe(toArray()));
      await Promise.resolve();
      expect(started, 'b waits while a body still runs in the lane').to.equal(false);
      finish();
      expect((await second).map(brief)).to.deep.equal(['b=b']);
      expect(lanes.size).to.equal(0);
    });

    it('hears no stop once its subscriber left: a watcher of the permits it gives back does not classify its calls again', () => {
      const lanes = new LaneTable();
      const concurrency = new ConcurrencyConfig({ perTool: { lookup: 2 } });
      const stop$ = new Subject<StopReason>();
      lanes.changes$.subscribe((c) => c.change === 'released' && stop$.next({ kind: 'cancelled', why: 'a watcher stopped the batch' }));
      const seen: string[] = [];
      const onActivity = (a: CallActivity) => seen.push(`${a.type} ${a.callId}`);
      runBatch([call('a', NEVER), call('b', NEVER)], { concurrency, shared: { lanes, concurrency }, stop$, onActivity }).subscribe().unsubscribe();
      expect(seen).to.deep.equal(['started a', 'started b', 'ended a', 'settled a', 'ended b', 'settled b']);
      expect(lanes.size).to.equal(0);
    });

    it('tells each call ended once when its subscriber leaves from inside the stop\'s classification', () => {
      const stop$ = new Subject<StopReason>();
      const seen: string[] = [];
      let subscription: { unsubscribe(): void } | undefined;
      const onActivity = (a: CallActivity) => {
        seen.push(`${a.type} ${a.callId}`);
        if (a.type === 'ended') subscription?.unsubscribe();
      };
      subscription = runBatch([call('a', NEVER), call('b', NEVER)], { stop$, onActivity }).subscribe();
      stop$.next({ kind: 'cancelled', why: 'stop' });
      expect(seen).to.deep.equal(['started a', 'started b', 'ended a', 'settled a', 'ended b', 'settled b']);
    });

    it('takes no permit for a call of the next phase once its subscriber left from inside a grant', () => {
      const lanes = new LaneTable();
      const concurrency = new ConcurrencyConfig({ perTool: { search: 2 } });
      const invoked: string[] = [];
      testScheduler.run(({ cold, flush }) => {
        let subscription: { unsubscribe(): void } | undefined;
        // The booking's phase ends at 1; the first search granted in the next phase, a watcher leaves.
        lanes.changes$.subscribe((c) => c.change === 'granted' && c.key === 'tool:search' && subscription?.unsubscribe());
        const search = (id: string) => call(id, () => (invoked.push(id), NEVER), { tool: 'search' });
        const calls = [call('k', cold('-(k|)'), { tool: 'booking', parallelSafe: false }), search('a'), search('b')];
        subscription = runBatch(calls, { concurrency, shared: { lanes, concurrency } }).subscribe();
        flush();
      });
      expect(invoked).to.deep.equal([]);
      expect(lanes.occupancy()).to.deep.equal([]);
    });

    it('withdraws its queued calls at once when its subscriber leaves from inside its own teardown', () => {
      const lanes = new LaneTable();
      const changes: string[] = [];
      const concurrency = new ConcurrencyConfig({ perTenant: 1, perTool: { search: 1 } });
      const stop$ = new Subject<StopReason>();
      let subscription: { unsubscribe(): void } | undefined;
      // The first permit the stop gives back, a watcher leaves the batch.
      lanes.changes$.subscribe((c) => {
        changes.push(`${c.change} ${c.key}`);
        if (c.change === 'released') subscription?.unsubscribe();
      });
      const invoked: string[] = [];
      const calls = [call('a', () => (invoked.push('a'), NEVER), { tool: 'search' }), call('b', () => (invoked.push('b'), NEVER))];
      subscription = runBatch(calls, { concurrency, shared: { lanes, concurrency }, tenant: 'acme', stop$ }).subscribe();
      stop$.next({ kind: 'cancelled', why: 'stop' });
      // b is withdrawn before a's tenant permit goes back: it is never handed a permit it would not use.
      expect(changes).to.deep.equal(['granted tenant:acme', 'granted tool:search', 'queued tenant:acme', 'released tool:search', 'withdrawn tenant:acme', 'released tenant:acme']);
      expect(invoked).to.deep.equal(['a']);
    });
  });
});
