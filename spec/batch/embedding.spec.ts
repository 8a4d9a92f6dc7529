// docs/embedding.md, run as written: the batch's operators in an app of one's own. Each
// example of the page is copied here whole, and each marble example asserts what the page says.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { concatMap, defer, from, map, mergeMap, Subject, take, tap, type MonoTypeOperatorFunction, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import {
  ConcurrencyConfig,
  LaneTable,
  ceiling,
  gate,
  inCallOrder,
  inLanes,
  phases,
  settle,
  untilStopped,
  type BatchCall,
  type GateStep,
  type Outcome,
  type StopReason,
} from '../../lib/index.js';

// --- docs/embedding.md: "A turn as a stream, with a cache" -----------------------------------

/** What a stage of yours reads of a call's record, and the one thing it may do: decide it. */
interface CallRecordLike {
  readonly call: BatchCall;
  readonly index: number;
  readonly state: 'arrived' | 'queued' | 'writing' | 'invoking' | 'awaiting' | 'subscribed' | 'returning' | 'overrun' | 'over';
  readonly refused: { readonly message: string } | undefined;
  readonly outcome: Outcome | undefined;
  decide(outcome: Outcome): void;
}

// Your cache: results by tool and arguments.
const keyOf = (call: BatchCall) => `${call.tool}:${JSON.stringify(call.args)}`;

/** Answers from the cache the calls it can: each goes on decided, and inLanes passes it by. */
function fromCache<R extends CallRecordLike>(cache: Map<string, unknown>): MonoTypeOperatorFunction<R> {
  return tap((record) => {
    const { call, index } = record;
    // A call refused at the gate, or with bad arguments, stays refused.
    if (record.state !== 'arrived' || record.refused !== undefined || call.refused !== undefined) return;
    const key = keyOf(call);
    if (!cache.has(key)) return;
    record.decide({ index, callId: call.callId, tool: call.tool, kind: 'result', dispatched: false, result: cache.get(key), delta: undefined });
  });
}

/** Keeps the result of each call that ran, as it goes out. */
function intoCache<R extends CallRecordLike>(cache: Map<string, unknown>): MonoTypeOperatorFunction<R> {
  return tap(({ call, outcome }) => {
    if (outcome?.kind === 'result' && outcome.dispatched) cache.set(keyOf(call), outcome.result);
  });
}

interface ToolBatchOptions {
  readonly concurrency: ConcurrencyConfig;
  /** Shared by every batch of the process: its per-tool and per-tenant lanes bound them all. */
  readonly lanes: LaneTable;
  readonly tenant: string;
  readonly cache: Map<string, unknown>;
  readonly approve?: GateStep;
  readonly stop$?: Observable<StopReason>;
}

/** One turn's calls, as they arrive, to one outcome per call, in call order. */
function toolBatch(calls$: Observable<BatchCall>, options: ToolBatchOptions): Observable<Outcome> {
  const { concurrency, lanes, tenant, cache, approve, stop$ } = options;
  const plan = { concurrency, shared: { lanes, concurrency }, tenant };
  return defer(() => {
    // One batch per subscription: phases makes it. It hears the stop itself, so a stop dispatches nothing more.
    return calls$.pipe(
      phases(stop$ ? { stop$ } : {}),
      concatMap((phase$) => phase$.pipe(gate(approve), fromCache(cache), inLanes(plan))),
      ceiling({ perToolSeconds: concurrency.perToolSeconds }),
      untilStopped(stop$),
      inCallOrder(),
      settle(),
      intoCache(cache),
      map((record) => record.outcome!),
    );
  });
}

// --- docs/embedding.md: "Call order over a fan-out of your own" -----------------------------

/** Prices from a partner, four at a time, answered in the order they were asked. */
function pricesInCallOrder(cities: readonly string[], price: (city: string) => Observable<number>): Observable<string> {
  return defer(() => {
    // phases() makes each call's record; calls that may run together are one phase.
    return from(cities.map((city): BatchCall => ({ callId: city, tool: 'price', args: { city } }))).pipe(
      phases(),
      concatMap((phase$) => phase$),
      mergeMap(
        (record) =>
          price(record.call.callId).pipe(
            take(1),
            map((result) => {
              const { index, call } = record;
              record.decide({ index, callId: call.callId, tool: call.tool, kind: 'result', dispatched: true, result, delta: undefined });
              return record;
            }),
          ),
        4,
      ),
      inCallOrder(),
      map(({ call, outcome }) => `${call.callId} ${outcome!.kind === 'result' ? String(outcome!.result) : '?'}`),
    );
  });
}

// --- docs/embedding.md: "A stop button over the lanes alone" ---------------------------------

/** The calls in their lanes, stopped when `stop$` says, every call told as it ended. */
function withStopButton(calls: readonly BatchCall[], concurrency: ConcurrencyConfig, stop$: Observable<StopReason>): Observable<string> {
  return defer(() => {
    return from(calls).pipe(
      phases({ stop$ }),
      concatMap((phase$) => phase$.pipe(inLanes({ concurrency }))),
      untilStopped(stop$),
      inCallOrder(),
      map(({ call, outcome }) => {
        const o = outcome!;
        return `${call.callId}: ${o.kind === 'result' ? String(o.result) : o.kind === 'error' ? o.error.message : o.message}`;
      }),
    );
  });
}

// What an outcome reads as in the marble examples.
const brief = (o: Outcome): string => (o.kind === 'result' ? `${o.callId}=${String(o.result)}` : `${o.callId}!${o.kind === 'error' ? o.error.name : 'indeterminate'}`);

// The page's code blocks, each line as it stands (imports aside: the page imports 'agent-lanes').
function pageLines(): string[] {
  const page = readFileSync(new URL('../../docs/embedding.md', import.meta.url), 'utf8');
  const lines: string[] = [];
  for (const [, block] of page.matchAll(/```ts\n([\s\S]*?)```/g)) {
    let importing = false;
    for (const line of block!.split('\n')) {
      if (line.startsWith('import ')) importing = true;
      if (!importing && line.trim() !== '') lines.push(line.trim());
      if (importing && / from '[^']+';$/.test(line)) importing = false;
    }
  }
  return lines;
}

describe('docs/embedding.md', () => {
  let testScheduler!: TestScheduler;   // made before each test
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('holds every example of the page, as written', () => {
    const here = new Set(readFileSync(new URL(import.meta.url), 'utf8').split('\n').map((line) => line.trim()));
    const lines = pageLines();
    expect(lines.length).to.be.greaterThan(100);
    expect(lines.filter((line) => !here.has(line))).to.deep.equal([]);
  });

  it('runs calls as they stream in, inside the search lane, in call order, a cache hit answered at once', () => {
    const cache = new Map<string, unknown>([['search:{"city":"Lisbon"}', 'cached Lisbon']]);
    const lanes = new LaneTable();
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const body = { Lisbon: cold('-(l|)'), Porto: cold('----(p|)'), Madrid: cold('-(m|)') };
      const search = (city: keyof typeof body): BatchCall => ({ callId: city[0]!, tool: 'search', args: { city }, invoke: () => body[city] });
      const calls$ = hot('  -a-b--c-|   ', { a: search('Lisbon'), b: search('Porto'), c: search('Madrid') });
      const outcomes = '    -a-----b(c|)';
      const concurrency = new ConcurrencyConfig({ perTool: { search: 1 } });
      const outcomes$ = toolBatch(calls$, { concurrency, lanes, tenant: 'acme', cache }).pipe(map(brief));
      expectObservable(outcomes$).toBe(outcomes, { a: 'L=cached Lisbon', b: 'P=p', c: 'M=m' });
      expectSubscriptions(body.Lisbon.subscriptions).toBe([]); // a cache hit runs nothing
      expectSubscriptions(body.Porto.subscriptions).toBe('   ---^---!    ');
      expectSubscriptions(body.Madrid.subscriptions).toBe('  -------^!   '); // waits for Porto's permit
    });
    expect([...cache.keys()]).to.deep.equal(['search:{"city":"Lisbon"}', 'search:{"city":"Porto"}', 'search:{"city":"Madrid"}']);
    expect(lanes.size).to.equal(0);
  });

  it('takes its calls from a Subject: each call runs as soon as it arrives', () => {
    // --- docs/embedding.md: "Calls from any source" ---
    const calls = new Subject<BatchCall>();
    const seen: string[] = [];
    const options = { concurrency: new ConcurrencyConfig({ maxConcurrentTools: 4 }), lanes: new LaneTable(), tenant: 'acme', cache: new Map() };
    toolBatch(calls, options).subscribe({ next: (outcome) => seen.push(brief(outcome)), complete: () => seen.push('done') });
    calls.next({ callId: 'c1', tool: 'search', args: { city: 'Lisbon' }, invoke: () => '12 hotels' });
    expect(seen).to.deep.equal(['c1=12 hotels']); // out before the next call arrived
    calls.next({ callId: 'c2', tool: 'search', args: { city: 'Porto' }, invoke: () => '7 hotels' });
    calls.complete();
    expect(seen).to.deep.equal(['c1=12 hotels', 'c2=7 hotels', 'done']);
  });

  it('ends the batch at a stop: the call in flight classified, calls still to come not awaited', () => {
    testScheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const body = { Lisbon: cold('-(l|)'), Porto: cold('----(p|)'), Madrid: cold('-(m|)') };
      const search = (city: keyof typeof body): BatchCall => ({ callId: city[0]!, tool: 'search', args: { city }, idempotent: true, invoke: () => body[city] });
      const calls$ = hot('  -a-b--c-|', { a: search('Lisbon'), b: search('Porto'), c: search('Madrid') });
      const stop$ = hot('   -----s   ', { s: { kind: 'cancelled', why: 'the user pressed stop' } as StopReason });
      const outcomes = '    --a--(b|)';
      const concurrency = new ConcurrencyConfig();
      const outcomes$ = toolBatch(calls$, { concurrency, lanes: new LaneTable(), tenant: 'acme', cache: new Map(), stop$ }).pipe(map(brief));
      expectObservable(outcomes$).toBe(outcomes, { a: 'L=l', b: 'P!CallStoppedError' });
      expectSubscriptions(calls$.subscriptions).toBe('^----!   ');
      expectSubscriptions(body.Porto.subscriptions).toBe('---^-!   ');
      expectSubscriptions(body.Madrid.subscriptions).toBe([]);
    });
  });

  it('asks the gate first: a call it refuses is neither answered from the cache nor run', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const cache = new Map<string, unknown>([['search:{"city":"Lisbon"}', 'cached Lisbon']]);
      const calls$ = cold('(ab|)', {
        a: { callId: 'L', tool: 'search', args: { city: 'Lisbon' }, invoke: () => 'fresh' } as BatchCall,
        b: { callId: 'P', tool: 'search', args: { city: 'Porto' }, invoke: () => 'fresh' } as BatchCall,
      });
      const approve: GateStep = (call) => ((call.args as { city: string }).city === 'Lisbon' ? 'Lisbon is off limits' : undefined);
      const outcomes$ = toolBatch(calls$, { concurrency: new ConcurrencyConfig(), lanes: new LaneTable(), tenant: 'acme', cache, approve });
      expectObservable(outcomes$.pipe(map(brief))).toBe('(ab|)', { a: 'L!ToolRejectedError', b: 'P=fresh' });
    });
  });

  it('puts a fan-out of its own back in call order, each answer out as soon as the ones before it are', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const partner = { Lisbon: cold('-(x|)', { x: 120 }), Porto: cold('----(x|)', { x: 95 }), Madrid: cold('--(x|)', { x: 110 }) };
      const prices$ = pricesInCallOrder(['Lisbon', 'Porto', 'Madrid'], (city) => partner[city as keyof typeof partner]);
      expectObservable(prices$).toBe('-a--(bc|)', { a: 'Lisbon 120', b: 'Porto 95', c: 'Madrid 110' });
    });
  });

  it('classifies what a stop button cut short: done, in flight, never dispatched', () => {
    testScheduler.run(({ hot, cold, expectObservable }) => {
      const call = (callId: string, body: Observable<string>, idempotent = false): BatchCall => ({ callId, tool: 'booking', idempotent, invoke: () => body });
      const calls = [call('a', cold('-(x|)')), call('b', cold('-----(y|)')), call('c', cold('-(z|)'))];
      const stop$ = hot('  ---s', { s: { kind: 'cancelled', why: 'the user pressed stop' } as StopReason });
      const told$ = withStopButton(calls, new ConcurrencyConfig({ maxConcurrentTools: 1 }), stop$);
      expectObservable(told$).toBe('-a-(bc|)', {
        a: 'a: x',
        b: 'b: booking was in flight when the batch stopped (the user pressed stop). The side effect may have landed',
        c: 'c: never dispatched: the user pressed stop',
      });
    });
  });
});
