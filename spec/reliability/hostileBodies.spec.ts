// A failure costs its own call, whatever the body does. A body throws or rejects with a value
// that cannot be read, returns one, or returns a thenable or an Observable that throws when
// asked: each case runs through the real AgentRunner with siblings around it, and must fail
// its own call alone, with no unhandled rejection. docs/reliability.md's bad-input catalogue
// lists the same cases.
import { expect } from 'chai';
import { createParser } from 'eventsource-parser';
import { config, Observable, throwError, timer, map, type Subscriber } from 'rxjs';
import {
  Agent,
  AgentRunner,
  CassetteRecorder,
  CassetteReplay,
  ProviderHttpError,
  ScriptedProvider,
  ToolRegistry,
  parseCassette,
  sseHandler,
  stringifyCassette,
  toUIMessageStream,
  type ErrorInfo,
  type ModelProvider,
  type ModelResponse,
  type RunEvent,
  type RunResult,
  type ToolBody,
} from '../../lib/index.js';
import { serve } from '../adapters/runs.js';

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

  describe('streams given values or errors that cannot be read', () => {
    async function frames(start: () => Observable<unknown>): Promise<Array<{ event: string | undefined; data: string }>> {
      const server = await serve(sseHandler(() => start()));
      try {
        const found: Array<{ event: string | undefined; data: string }> = [];
        createParser({ onEvent: (e) => found.push({ event: e.event, data: e.data }) }).feed(await (await fetch(server.url)).text());
        return found;
      } finally {
        await server.close();
      }
    }

    it('SSE ends a stream that errors with a Proxy with an error event saying its error cannot be read', async () => {
      const found = await frames(() => throwError(() => trapProxy()));
      expect(found).to.deep.equal([{ event: 'error', data: JSON.stringify({ name: 'Error', message: 'a value was thrown that cannot be read as an error (getPrototypeOf trap)' }) }]);
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
});
