// A failure costs its own call, whatever the body does. A body throws or rejects with a value
// that cannot be read, returns one, returns a thenable or an Observable that throws when asked,
// or returns a value JSON cannot carry: each case runs through the real AgentRunner with
// siblings around it, and must fail (or convert) its own call alone, with no unhandled
// rejection. docs/reliability.md's bad-input catalogue lists the same cases.
import { expect } from 'chai';
import { createParser } from 'eventsource-parser';
import fc from 'fast-check';
import { config, Observable, of, throwError, timer, map, type Subscriber } from 'rxjs';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  ScriptedProvider,
  ToolRegistry,
  type ErrorInfo,
  type ModelProvider,
  type ModelResponse,
  type RunEvent,
  type RunResult,
  type RunnerActivity,
  type ToolBody,
} from '../../lib/index.js';
import { CassetteRecorder, CassetteReplay, deterministicTranscript, parseCassette, stringifyCassette } from '../../lib/testing.js';
import { ProviderHttpError } from '../../lib/providers.js';
import { sseHandler, toUIMessageStream, uiMessageStreamResponse } from '../../lib/streaming.js';
import { serve } from '../adapters/runs.js';
import { seed } from './seed.js';

const agent = new Agent({ name: 'a', instructions: '', model: 'm' });

/** Unhandled rejections and errors reported to RxJS's onUnhandledError while a spec runs. */
const unhandled = { rejections: [] as unknown[], reported: [] as unknown[] };
const onRejection = (reason: unknown): void => void unhandled.rejections.push(reason);
let rxjsHandler: typeof config.onUnhandledError = null;

/** Lets a rejection nobody handled surface (Node reports them once the microtasks have run). */
const settleDown = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Listens for what nobody can receive while a spec runs. */
function listenForUnhandled(): void {
  unhandled.rejections = [];
  unhandled.reported = [];
  process.on('unhandledRejection', onRejection);
  rxjsHandler = config.onUnhandledError;
  config.onUnhandledError = (error) => void unhandled.reported.push(error);
}

function stopListening(): void {
  process.off('unhandledRejection', onRejection);
  config.onUnhandledError = rxjsHandler;
}

// One turn with siblings around the call under test.

const siblings = new ToolRegistry()
  .register({ name: 'early' }, () => 'early result')
  // Settles after the call under test, whatever it does.
  .register({ name: 'late' }, () => new Promise((resolve) => setTimeout(() => resolve({ late: true }), 2)));

function toolsWith(body: ToolBody): ToolRegistry {
  const tools = new ToolRegistry().register({ name: 'bad' }, body);
  for (const name of ['early', 'late']) {
    const { declaration, body: sibling } = siblings.get(name)!;
    tools.register(declaration, sibling);
  }
  return tools;
}

const turnCalls: ModelResponse = {
  toolCalls: [
    { id: 'before', name: 'early', arguments: '{}' },
    { id: 'c1', name: 'bad', arguments: '{}' },
    { id: 'after', name: 'late', arguments: '{}' },
  ],
};

interface Turn {
  readonly result: RunResult;
  readonly by: Map<string, RunEvent>;
  /** The tool message the model read for each call, by call id. */
  readonly read: Map<string, string>;
}

/** One turn calling `early`, `bad` (with `body`) and `late`, then a final answer; no rejection may go unhandled. */
async function turn(body: ToolBody): Promise<Turn> {
  const result = await new AgentRunner({ provider: new ScriptedProvider([turnCalls, { text: 'done' }]), tools: toolsWith(body) }).run(agent, 'go');
  await settleDown();
  expect(unhandled.rejections, 'unhandled rejections').to.deep.equal([]);
  const by = new Map<string, RunEvent>();
  for (const e of result.events) if ('callId' in e) by.set(e.callId, e);
  const read = new Map<string, string>();
  for (const m of result.messages) if (m.role === 'tool') read.set(m.toolCallId!, m.content);
  expect(result.status, JSON.stringify(result.error)).to.equal('completed');
  return { result, by, read };
}

function errorOf(event: RunEvent | undefined): ErrorInfo {
  expect(event?.type, JSON.stringify(event)).to.equal('TOOL_ERROR');
  return (event as Extract<RunEvent, { type: 'TOOL_ERROR' }>).error;
}

function expectSiblingsKept({ by, read }: Turn): void {
  expect(by.get('before')).to.deep.equal({ type: 'TOOL_RESULT', turn: 1, callId: 'before', tool: 'early', result: 'early result' });
  expect(by.get('after')).to.deep.equal({ type: 'TOOL_RESULT', turn: 1, callId: 'after', tool: 'late', result: { late: true } });
  expect(read.get('before')).to.equal('early result');
  expect(read.get('after')).to.equal('{"late":true}');
}

// Hostile values.

/** A Proxy every one of whose traps throws, naming itself. */
function trapProxy(): object {
  const trap = (name: string) => () => {
    throw new Error(`${name} trap`);
  };
  return new Proxy({}, { get: trap('get'), getPrototypeOf: trap('getPrototypeOf'), ownKeys: trap('ownKeys'), getOwnPropertyDescriptor: trap('getOwnPropertyDescriptor'), has: trap('has') });
}

function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

const REVOKED = "Cannot perform 'getPrototypeOf' on a proxy that has been revoked";

const hostileThrown: Array<[string, () => unknown, ErrorInfo]> = [
  ['a Proxy whose traps throw', trapProxy, { name: 'Error', message: 'a value was thrown that cannot be read as an error (getPrototypeOf trap)' }],
  ['a revoked Proxy', revokedProxy, { name: 'Error', message: `a value was thrown that cannot be read as an error (${REVOKED})` }],
  [
    'an Error whose message getter throws',
    () => Object.defineProperty(new RangeError('hidden'), 'message', { get: () => { throw new Error('message getter'); } }),
    { name: 'RangeError', message: "the error's message cannot be read (message getter)" },
  ],
  [
    'an Error whose name getter throws',
    () => Object.defineProperty(new TypeError('visible'), 'name', { get: () => { throw new Error('name getter'); } }),
    { name: 'Error', message: 'visible' },
  ],
  [
    'a Proxy of an Error whose message trap throws',
    () => new Proxy(new Error('inner'), { get: (target, key) => { if (key === 'message') throw new Error('message trap'); return Reflect.get(target, key); } }),
    { name: 'Error', message: "the error's message cannot be read (message trap)" },
  ],
  [
    'an object whose message getter throws',
    () => ({ get message(): string { throw new Error('message getter'); } }),
    { name: 'Error', message: 'a value was thrown that cannot be read as an error (message getter)' },
  ],
  [
    'an Error whose message getter throws a Proxy',
    () => Object.defineProperty(new Error('hidden'), 'message', { get: () => { throw trapProxy(); } }),
    { name: 'Error', message: "the error's message cannot be read (reading it threw)" },
  ],
];

const ways: Array<[string, (value: () => unknown) => ToolBody]> = [
  ['throwing', (value) => () => { throw value(); }],
  ['rejecting', (value) => () => Promise.reject(value())],
  ['rejecting after an await', (value) => async () => {
    await new Promise((resolve) => setTimeout(resolve, 1));
    throw value();
  }],
  ['erroring its Observable', (value) => () => throwError(value)],
  ['erroring its Observable later', (value) => () => timer(1).pipe(map(() => { throw value(); }))],
];

describe('a failure costs its own call, whatever the body does', () => {
  beforeEach(listenForUnhandled);
  afterEach(async () => {
    await settleDown();
    stopListening();
    expect(unhandled.rejections, 'unhandled rejections').to.deep.equal([]);
    expect(unhandled.reported, 'errors reported as unhandled').to.deep.equal([]);
  });

  describe('thrown values that cannot be read', () => {
    for (const [way, body] of ways) {
      for (const [what, value, error] of hostileThrown) {
        it(`${way} ${what}: TOOL_ERROR saying so, siblings kept`, async () => {
          const outcome = await turn(body(value));
          expect(errorOf(outcome.by.get('c1'))).to.deep.equal(error);
          expect(outcome.read.get('c1')).to.equal(`${error.name}: ${error.message}`);
          expectSiblingsKept(outcome);
        });
      }
    }
  });

  describe('answers that throw when read', () => {
    const cases: Array<[string, ToolBody, ErrorInfo]> = [
      ['returning a Proxy whose traps throw: fails with what the trap threw', () => trapProxy(), { name: 'Error', message: 'getPrototypeOf trap' }],
      ['returning a revoked Proxy: fails with the TypeError', () => revokedProxy(), { name: 'TypeError', message: REVOKED }],
      ['returning a thenable whose then throws: fails with what it threw, as await would', () => ({ then: () => { throw new Error('then threw'); } }), { name: 'Error', message: 'then threw' }],
      ['returning a value whose then getter throws: fails with what it threw', () => ({ get then(): unknown { throw new Error('then getter'); } }), { name: 'Error', message: 'then getter' }],
      [
        'returning a thenable that rejects with a Proxy: fails saying the error cannot be read',
        () => ({ then: (_ok: unknown, fail: (reason: unknown) => void) => fail(trapProxy()) }),
        { name: 'Error', message: 'a value was thrown that cannot be read as an error (getPrototypeOf trap)' },
      ],
      ['returning an Observable whose subscriber function throws', () => new Observable(() => { throw new Error('subscribe threw'); }), { name: 'Error', message: 'subscribe threw' }],
      [
        'returning an Observable whose subscribe method throws',
        () => {
          class Broken extends Observable<never> {
            override subscribe(): never {
              throw new Error('subscribe method threw');
            }
          }
          return new Broken();
        },
        { name: 'Error', message: 'subscribe method threw' },
      ],
      [
        'returning an interop Observable (lift and subscribe) whose subscribe throws',
        () => ({ lift: () => undefined, subscribe: () => { throw new Error('interop subscribe threw'); } }),
        { name: 'Error', message: 'interop subscribe threw' },
      ],
    ];
    for (const [title, body, error] of cases) {
      it(`${title}, siblings kept`, async () => {
        const outcome = await turn(body);
        expect(errorOf(outcome.by.get('c1'))).to.deep.equal(error);
        expectSiblingsKept(outcome);
      });
    }

    it('a thenable that answers, then throws: the answer stands', async () => {
      const outcome = await turn(() => ({ then: (ok: (value: unknown) => void) => { ok({ fine: 1 }); throw new Error('too late'); } }));
      expect(outcome.by.get('c1')).to.deep.include({ type: 'TOOL_RESULT', result: { fine: 1 } });
      expectSiblingsKept(outcome);
    });

    it('an Observable whose teardown throws after its first value: the result stands, the error is reported, nothing is held', async () => {
      const body: ToolBody = () =>
        new Observable<number>((subscriber: Subscriber<number>) => {
          const id = setTimeout(() => subscriber.next(7), 1);
          return () => {
            clearTimeout(id);
            throw new Error('teardown threw');
          };
        });
      const runner = new AgentRunner({ provider: new ScriptedProvider([turnCalls, { text: 'done' }]), tools: toolsWith(body), concurrency: { perTool: { bad: 1 } } });
      const result = await runner.run(agent, 'go');
      await settleDown();
      expect(result.status).to.equal('completed');
      expect(result.events.find((e) => e.type === 'TOOL_RESULT' && e.callId === 'c1')).to.deep.include({ result: 7 });
      expect(unhandled.reported.map((e) => String(e))).to.have.length(1);
      expect(String(unhandled.reported[0])).to.match(/teardown threw/);
      unhandled.reported = [];
      expect(runner.lanes.occupancy()).to.deep.equal([]);
    });
  });

  describe('results that cannot be read as JSON', () => {
    const cases: Array<[string, () => unknown, string]> = [
      ['a value whose getter throws', () => ({ city: 'Lisbon', get price(): number { throw new Error('price unavailable'); } }), 'result.price: price unavailable'],
      ['a Proxy, resolved', () => Promise.resolve({ inner: trapProxy() }), 'result.inner: get trap'],
      ['a revoked Proxy inside an array', () => [1, revokedProxy()], "result.1: Cannot perform 'get' on a proxy that has been revoked"],
      ['a circular value, from an Observable', () => {
        const loop: Record<string, unknown> = { items: [{}] };
        (loop.items as Array<Record<string, unknown>>)[0]!.owner = loop;
        return of(loop);
      }, 'result.items.0.owner: a circular reference'],
      ['a Map whose iterator throws', () => {
        const broken = new Map([['a', 1]]);
        broken[Symbol.iterator] = () => { throw new Error('no entries'); };
        return { broken };
      }, 'result.broken: no entries'],
      ['a value nested 1001 levels deep', () => {
        let deep: unknown = 'bottom';
        for (let i = 0; i < 1001; i++) deep = [deep];
        return deep;
      }, 'nested more than 1000 levels deep'],
      ['a symbol', () => Symbol('s'), 'a symbol is not JSON'],
    ];
    for (const [title, body, reason] of cases) {
      it(`returning ${title}: ToolResultError naming where and why, siblings kept`, async () => {
        const outcome = await turn(body);
        const error = errorOf(outcome.by.get('c1'));
        expect(error.name).to.equal('ToolResultError');
        expect(error.message).to.match(/^the result of bad cannot be sent to the model as JSON \(/);
        expect(error.message).to.include(reason);
        expect(error.message.length, 'a readable message').to.be.below(300);
        expectSiblingsKept(outcome);
      });
    }
  });

  describe('results JSON cannot carry as they are: one form for every consumer', () => {
    const forms: Array<[string, () => unknown, unknown, string]> = [
      ['undefined', () => undefined, null, 'null'],
      ['NaN', () => NaN, null, 'null'],
      ['-Infinity', () => -Infinity, null, 'null'],
      ['a BigInt', () => 2n ** 70n, '1180591620717411303424', '1180591620717411303424'],
      ['a Date', () => new Date(Date.UTC(2026, 0, 2)), '2026-01-02T00:00:00.000Z', '2026-01-02T00:00:00.000Z'],
      ['an invalid Date', () => new Date(NaN), null, 'null'],
      ['a Map', () => new Map<unknown, unknown>([['Lisbon', 122], [1, 2n]]), [['Lisbon', 122], [1, '2']], '[["Lisbon",122],[1,"2"]]'],
      ['a Set', () => new Set(['a', 'b']), ['a', 'b'], '["a","b"]'],
      ['a boxed string', () => Object('boxed'), 'boxed', 'boxed'],
      ['a value shared twice (not a cycle)', () => {
        const shared = { n: 1 };
        return { a: shared, b: [shared] };
      }, { a: { n: 1 }, b: [{ n: 1 }] }, '{"a":{"n":1},"b":[{"n":1}]}'],
      ['undefined, functions and symbols inside', () => ({ gone: undefined, f: () => 1, s: Symbol('s'), list: [undefined, () => 1, Symbol('s')] }), { list: [null, null, null] }, '{"list":[null,null,null]}'],
      ['a getter, read once', () => {
        let reads = 0;
        return { get count(): number { return ++reads; } };
      }, { count: 1 }, '{"count":1}'],
    ];
    for (const [title, body, form, text] of forms) {
      it(`returning ${title}: TOOL_RESULT holds ${text}, and so does the model's message`, async () => {
        const outcome = await turn(body);
        expect(outcome.by.get('c1')).to.deep.equal({ type: 'TOOL_RESULT', turn: 1, callId: 'c1', tool: 'bad', result: form });
        expect(outcome.read.get('c1')).to.equal(text);
        expectSiblingsKept(outcome);
      });
    }

    it('a result in its JSON form is a frozen copy: the body changing its object later rewrites nothing', async () => {
      const kept = { rooms: [{ price: 130 }] };
      const outcome = await turn(() => kept);
      const { result } = outcome.by.get('c1') as Extract<RunEvent, { type: 'TOOL_RESULT' }>;
      kept.rooms[0]!.price = 1;
      expect(result).to.deep.equal({ rooms: [{ price: 130 }] });
      expect(Object.isFrozen(result) && Object.isFrozen((result as typeof kept).rooms[0])).to.equal(true);
    });

    it('policies see the same form: the output guardrail and onToolEnd', async () => {
      const seen: unknown[] = [];
      const runner = new AgentRunner({
        provider: new ScriptedProvider([turnCalls, { text: 'done' }]),
        tools: toolsWith(() => ({ total: 5n, at: new Date(0) })),
        guardrails: { output: (call, result) => void (call.tool === 'bad' && seen.push(result)) },
        hooks: { onToolEnd: (call, event) => void (call.tool === 'bad' && event.type === 'TOOL_RESULT' && seen.push(event.result)) },
      });
      const result = await runner.run(agent, 'go');
      const form = { total: '5', at: '1970-01-01T00:00:00.000Z' };
      expect(seen).to.deep.equal([form, form]);
      expect(result.events.find((e) => e.type === 'TOOL_RESULT' && e.callId === 'c1')).to.deep.include({ result: form });
    });

    // Everything JSON cannot carry as it is, in one result.
    const odd = (): unknown => ({
      total: 2n ** 70n,
      at: new Date(0),
      prices: new Map([['Lisbon', 122]]),
      tags: new Set(['sea']),
      ratio: NaN,
      gone: undefined,
      list: [undefined, 1],
    });
    const oddForm = { total: '1180591620717411303424', at: '1970-01-01T00:00:00.000Z', prices: [['Lisbon', 122]], tags: ['sea'], ratio: null, list: [null, 1] };

    it('the cassette holds the same form, and a replay of it gives the same transcript and the same JSON to the model', async () => {
      for (const [body, form] of [[odd, oddForm], [() => undefined, null]] as const) {
        const recorder = new CassetteRecorder({ provider: new ScriptedProvider([turnCalls, { text: 'done' }]), tools: toolsWith(body) });
        const { result, cassette } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools }), agent, 'go');
        const stored = parseCassette(stringifyCassette(cassette));
        expect(stored.turns[0]!.calls[1]).to.deep.include({ kind: 'result', result: form });
        const replay = new CassetteReplay(stored, { agent, tools: toolsWith(body) });
        const replayed = await replay.run(new AgentRunner({ provider: replay.provider, tools: replay.tools }));
        expect(deterministicTranscript(replayed.events)).to.deep.equal(deterministicTranscript(result.events));
        // The model reads the same JSON (the cassette keeps keys sorted, so compared as JSON).
        const read = (r: RunResult): unknown => JSON.parse(r.messages.find((m) => m.toolCallId === 'c1')!.content);
        expect(read(replayed)).to.deep.equal(read(result)).and.to.deep.equal(form);
      }
    });

    it('SSE and the UI message stream carry the same form, and neither throws', async () => {
      const runner = new AgentRunner({ provider: new ScriptedProvider([turnCalls, { text: 'done' }, turnCalls, { text: 'done' }]), tools: toolsWith(odd) });
      const server = await serve(sseHandler((_req, signal) => runner.run$(agent, 'go', { signal })));
      try {
        const text = await (await fetch(server.url)).text();
        const frames: Array<{ event: string | undefined; data: string }> = [];
        const parser = createParser({ onEvent: (e) => frames.push({ event: e.event, data: e.data }) });
        parser.feed(text);
        expect(frames.map((f) => f.event)).to.include('RUN_COMPLETED');
        const results = frames.filter((f) => f.event === 'TOOL_RESULT').map((f) => JSON.parse(f.data) as { callId: string; result: unknown });
        expect(results.find((r) => r.callId === 'c1')!.result).to.deep.equal(oddForm);
      } finally {
        await server.close();
      }
      const body = await uiMessageStreamResponse((signal) => runner.run$(agent, 'go', { signal })).text();
      const chunks = body
        .split('\n')
        .filter((line) => line.startsWith('data: {'))
        .map((line) => JSON.parse(line.slice('data: '.length)) as { type: string; toolCallId?: string; output?: unknown });
      expect(chunks.find((c) => c.type === 'tool-output-available' && c.toolCallId === 'c1')!.output).to.deep.equal(oddForm);
      expect(chunks.at(-1)).to.deep.equal({ type: 'finish', finishReason: 'stop' });
    });
  });

  describe('streams given values or errors that cannot be read', () => {
    async function frames(start: () => Observable<unknown>, reported: unknown[] = []): Promise<Array<{ event: string | undefined; data: string }>> {
      const server = await serve(sseHandler(() => start(), { onError: (error) => reported.push(error) }));
      try {
        const found: Array<{ event: string | undefined; data: string }> = [];
        createParser({ onEvent: (e) => found.push({ event: e.event, data: e.data }) }).feed(await (await fetch(server.url)).text());
        return found;
      } finally {
        await server.close();
      }
    }

    it('SSE writes a value JSON refuses (a BigInt, a Map) in its JSON form, and goes on', async () => {
      const found = await frames(() => of({ type: 'tick', n: 1n, seen: new Map([['a', 1]]) }, { type: 'tock' }));
      expect(found).to.deep.equal([
        { event: 'tick', data: '{"type":"tick","n":"1","seen":[["a",1]]}' },
        { event: 'tock', data: '{"type":"tock"}' },
      ]);
    });

    it('SSE ends a stream that errors with a Proxy with an error event saying its error cannot be read, and hands the Proxy to onError', async () => {
      const hostile = trapProxy();
      const reported: unknown[] = [];
      const found = await frames(() => throwError(() => hostile), reported);
      expect(found).to.deep.equal([{ event: 'error', data: JSON.stringify({ name: 'Error', message: 'a value was thrown that cannot be read as an error (getPrototypeOf trap)' }) }]);
      expect(reported.length).to.equal(1);
      expect(reported[0] === hostile, 'the thrown Proxy itself').to.equal(true);
    });

    it('the UI message stream ends a run that errors with a Proxy with an error chunk, then finish', async () => {
      const chunks: unknown[] = [];
      toUIMessageStream(throwError(() => trapProxy())).subscribe((chunk) => chunks.push(chunk));
      expect(chunks).to.deep.equal([
        { type: 'error', errorText: 'a value was thrown that cannot be read as an error (getPrototypeOf trap)' },
        { type: 'finish', finishReason: 'error' },
      ]);
    });
  });

  describe('run-level errors keep their structure', () => {
    const failing = (error: unknown): ModelProvider => ({ respond: () => Promise.reject(error) });

    it("a provider's HTTP error: RUN_FAILED and RunResult.error carry its status, code and attempts", async () => {
      const http = new ProviderHttpError('OpenAI Chat Completions at api.openai.com', 429, 'rate_limit_error', 'slow down', 3);
      const result = await new AgentRunner({ provider: failing(http), tools: new ToolRegistry() }).run(agent, 'go');
      const error = {
        name: 'ProviderError',
        message: 'model provider failed on turn 1: OpenAI Chat Completions at api.openai.com replied 429 rate_limit_error: slow down (after 3 attempts)',
        status: 429,
        code: 'rate_limit_error',
        attempts: 3,
      };
      expect(result.error).to.deep.equal(error);
      expect(result.events.at(-1)).to.deep.equal({ type: 'RUN_FAILED', error });
    });

    it('a vendor that could not be reached: the attempts, and no status or code', async () => {
      const http = new ProviderHttpError('Anthropic Messages at api.anthropic.com', undefined, undefined, 'fetch failed', 2);
      const result = await new AgentRunner({ provider: failing(http), tools: new ToolRegistry() }).run(agent, 'go');
      expect(result.error).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 1: Anthropic Messages at api.anthropic.com could not be reached: fetch failed (after 2 attempts)', attempts: 2 });
    });

    it('facts that are not plain values are left out; an error without facts is exactly { name, message }', async () => {
      const odd = Object.assign(new Error('odd'), { status: '429', attempts: NaN });
      Object.defineProperty(odd, 'code', { get: () => 'from a getter' });
      const result = await new AgentRunner({ provider: failing(odd), tools: new ToolRegistry() }).run(agent, 'go');
      expect(result.error).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 1: odd' });
    });

    it('a provider rejecting with a Proxy whose traps throw: RUN_FAILED saying its error cannot be read', async () => {
      const result = await new AgentRunner({ provider: failing(trapProxy()), tools: new ToolRegistry() }).run(agent, 'go');
      await settleDown();
      expect(result.error).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 1: a value was thrown that cannot be read as an error (getPrototypeOf trap)' });
      expect(unhandled.rejections).to.deep.equal([]);
    });

    it('a replayed provider failure fails with the same facts', async () => {
      const http = new ProviderHttpError('OpenAI Chat Completions at api.openai.com', 503, 'server_error', 'overloaded', 3);
      const tools = new ToolRegistry();
      const recorder = new CassetteRecorder({ provider: failing(http), tools });
      const { result, cassette } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools }), agent, 'go');
      expect(result.error).to.include({ status: 503, code: 'server_error', attempts: 3 });
      const replay = new CassetteReplay(parseCassette(stringifyCassette(cassette)), { agent, tools });
      const replayed = await replay.run(new AgentRunner({ provider: replay.provider, tools: replay.tools }));
      expect(replayed.error).to.deep.equal(result.error);
    });
  });

  describe('random hostile bodies in random batches (property)', () => {
    // What a body does with its value, at once or after a turn of the event loop.
    const hows = ['return', 'resolve', 'resolveLater', 'emit', 'emitLater', 'throw', 'reject', 'rejectLater', 'error', 'thenThrows', 'subscribeThrows'] as const;
    type How = (typeof hows)[number];
    const throwing: ReadonlySet<How> = new Set(['throw', 'reject', 'rejectLater', 'error', 'thenThrows', 'subscribeThrows']);
    const NONE = Symbol('no JSON form');

    // Each value, and its JSON form when a body answers with it (NONE: the call must fail).
    const samples: Record<string, { readonly make: () => unknown; readonly form: unknown }> = {
      text: { make: () => 'text', form: 'text' },
      number: { make: () => 4.5, form: 4.5 },
      nothing: { make: () => undefined, form: null },
      nan: { make: () => NaN, form: null },
      bigint: { make: () => 7n, form: '7' },
      date: { make: () => new Date(0), form: '1970-01-01T00:00:00.000Z' },
      map: { make: () => new Map([['k', new Set([1n])]]), form: [['k', ['1']]] },
      record: { make: () => ({ a: [1, undefined], b: { c: 'd' } }), form: { a: [1, null], b: { c: 'd' } } },
      circular: {
        make: () => {
          const loop: Record<string, unknown> = {};
          loop.self = loop;
          return loop;
        },
        form: NONE,
      },
      getter: { make: () => ({ get x(): number { throw new Error('getter'); } }), form: NONE },
      proxy: { make: trapProxy, form: NONE },
      revoked: { make: revokedProxy, form: NONE },
      badMessage: { make: hostileThrown[2]![1], form: {} },
    };
    const names = Object.keys(samples);

    const later = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

    function bodyFor(how: How, make: () => unknown): unknown {
      switch (how) {
        case 'return': return make();
        case 'resolve': return Promise.resolve().then(make);
        case 'resolveLater': return later().then(make);
        case 'emit': return new Observable((s) => s.next(make()));
        case 'emitLater': return timer(0).pipe(map(make));
        case 'throw': throw make();
        case 'reject': return Promise.reject(make());
        case 'rejectLater': return later().then(() => Promise.reject(make()));
        case 'error': return throwError(make);
        case 'thenThrows': return { then: () => { throw make(); } };
        case 'subscribeThrows': return new Observable(() => { throw make(); });
      }
    }

    const plan = fc.record({
      calls: fc.array(fc.record({ how: fc.constantFrom(...hows), sample: fc.constantFrom(...names) }), { minLength: 1, maxLength: 8 }),
      perTool: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
      maxConcurrentTools: fc.option(fc.integer({ min: 1, max: 4 }), { nil: undefined }),
    });

    it('ends every call exactly once, in call order, the hostile ones failing alone and the others keeping their results', async () => {
      await fc.assert(
        fc.asyncProperty(plan, async ({ calls, perTool, maxConcurrentTools }) => {
          unhandled.rejections = [];
          unhandled.reported = [];
          const tools = new ToolRegistry().register({ name: 'act' }, (args) => {
            const { how, sample } = calls[(args as { i: number }).i]!;
            return bodyFor(how, samples[sample]!.make);
          });
          const runner = new AgentRunner({
            provider: new ScriptedProvider([{ toolCalls: calls.map((_, i) => ({ id: `c${i}`, name: 'act', arguments: { i } })) }, { text: 'done' }]),
            tools,
            concurrency: new ConcurrencyConfig({ ...(perTool !== undefined ? { perTool: { act: perTool } } : {}), ...(maxConcurrentTools !== undefined ? { maxConcurrentTools } : {}) }),
          });
          const settled = new Map<string, number>();
          const watching = runner.activity$.subscribe((a: RunnerActivity) => {
            if (a.type === 'settled') settled.set(a.callId, (settled.get(a.callId) ?? 0) + 1);
          });
          const result = await runner.run(agent, 'go');
          watching.unsubscribe();
          await settleDown();

          expect(result.status, JSON.stringify(result.error)).to.equal('completed');
          const outcomes = result.events.filter((e) => e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE');
          expect(outcomes.map((e) => (e as { callId: string }).callId), 'one outcome per call, in call order').to.deep.equal(calls.map((_, i) => `c${i}`));
          const read = new Map(result.messages.filter((m) => m.role === 'tool').map((m) => [m.toolCallId!, m.content]));
          calls.forEach(({ how, sample }, i) => {
            const event = outcomes[i]!;
            const { form } = samples[sample]!;
            const label = `c${i}: ${how} ${sample}`;
            if (throwing.has(how) || form === NONE) {
              expect(event.type, label).to.equal('TOOL_ERROR');
              const { error } = event as Extract<RunEvent, { type: 'TOOL_ERROR' }>;
              expect(error.name, label).to.be.a('string').and.not.equal('');
              expect(error.message, label).to.be.a('string').and.not.equal('');
            } else {
              expect(event, label).to.deep.include({ type: 'TOOL_RESULT', result: form });
              expect(read.get(`c${i}`), label).to.equal(typeof form === 'string' ? form : JSON.stringify(form));
            }
            expect(settled.get(`c${i}`), `${label}: settled once`).to.equal(1);
          });
          expect(runner.lanes.occupancy(), 'every permit back').to.deep.equal([]);
          expect(unhandled.rejections, 'unhandled rejections').to.deep.equal([]);
          expect(unhandled.reported, 'errors reported as unhandled').to.deep.equal([]);
        }),
        { numRuns: 100, seed },
      );
    });
  });
});
