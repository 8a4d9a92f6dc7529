// Time values: any finite duration a config gives behaves as written, one longer than a Node
// timer holds (2^31-1 ms, about 24.8 days) included: runSeconds, toolCallSeconds,
// perToolSeconds, retry waits, an SSE heartbeat and grace. In virtual time under Node's rule
// (NodeTimers, which cuts a longer delay to 1 ms as Node does), and on real timers, where
// Node would say so with a TimeoutOverflowWarning. Then the rule for a call whose
// perToolSeconds equals toolCallSeconds: its own ceiling wins. docs/reliability.md lists these.
import { expect } from 'chai';
import { map, NEVER, Subject, timer, type Observable, type SchedulerAction, type SchedulerLike, type Subscription } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { summary } from '../runner/summary.js';
import { abortableSleep, postJson } from '../../lib/providers/http.js';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  ConfigError,
  DeadlineConfig,
  OnToolError,
  runBatch,
  ScriptedProvider,
  ToolRegistry,
  type RunEvent,
} from '../../lib/index.js';
import { followForClient, sseHandler, type StreamEnding } from '../../lib/streaming.js';
import { retryDelay, retryPolicy } from '../../lib/providers.js';
import { serve, type TestServer } from '../adapters/runs.js';
import { brief, briefly, call } from '../batch/helpers.js';
import { NodeTimers, overflowWarnings, THIRTY_DAYS_MS, THIRTY_DAYS_S } from '../nodeTimers.js';
import { startWireServer, type WireServer } from '../providers/wireServer.js';

const DAY_MS = 24 * 3600 * 1000;
const planner = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });
const strict = new Agent({ name: 'strict', instructions: 'plan', model: 'test-model', onToolError: OnToolError.FAIL_RUN });

/** `START`, `MODEL 1`, `RESULT a`, `ERROR a Name`, `INDET a`, `FAILED Name`, `COMPLETED out`, `CANCELLED`. */

/** A runner whose model asks for one call to `wait` (a body taking `bodyMs` of virtual time), then answers. */
function waitingRun(virtual: TestScheduler, bodyMs: number, options: { deadline?: DeadlineConfig; concurrency?: ConcurrencyConfig; scheduler?: NodeTimers; agent?: Agent } = {}) {
  const tools = new ToolRegistry().register({ name: 'wait', idempotent: true }, () => timer(bodyMs, virtual).pipe(map(() => 'waited')));
  const provider = new ScriptedProvider([{ toolCalls: [{ id: 'w', name: 'wait', arguments: {} }] }, { text: 'done' }]);
  const { agent = planner, ...rest } = options;
  return new AgentRunner({ provider, tools, loopStallMs: false, ...rest }).run$(agent, 'go');
}

/** `${frame} ${summary}` for each event of `run$`, in virtual time. */
function timeline(virtual: TestScheduler, run$: () => Observable<RunEvent>): string[] {
  const lines: string[] = [];
  virtual.run(({ flush }) => {
    run$().subscribe((event) => lines.push(`${virtual.now()} ${summary(event)}`));
    flush();
  });
  return lines;
}

describe('time values', () => {
  let virtual: TestScheduler;
  beforeEach(() => {
    virtual = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  describe('longer than a Node timer holds (30 days), in virtual time under Node\'s rule', () => {
    it('a 30-day runSeconds does not fail the run early, and fails it at 30 days', () => {
      let timers!: NodeTimers;
      const lines = timeline(virtual, () => {
        timers = new NodeTimers(virtual);
        return waitingRun(virtual, 31 * DAY_MS, { deadline: new DeadlineConfig({ runSeconds: THIRTY_DAYS_S }), scheduler: timers });
      });
      expect(lines).to.deep.equal(['0 START', '0 MODEL 1', `${THIRTY_DAYS_MS} ERROR w CallStoppedError`, `${THIRTY_DAYS_MS} FAILED DeadlineExceededError`]);
      expect(timers.overflows).to.equal(0);
    });

    it('a run that ends inside its 30-day runSeconds completes', () => {
      let timers!: NodeTimers;
      const lines = timeline(virtual, () => {
        timers = new NodeTimers(virtual);
        return waitingRun(virtual, 29 * DAY_MS, { deadline: new DeadlineConfig({ runSeconds: THIRTY_DAYS_S }), scheduler: timers });
      });
      expect(lines).to.deep.equal(['0 START', '0 MODEL 1', `${29 * DAY_MS} RESULT w`, `${29 * DAY_MS} MODEL 2`, `${29 * DAY_MS} COMPLETED done`]);
      expect(timers.overflows).to.equal(0);
      expect(virtual.actions, 'the runSeconds timer was ended with the run').to.have.length(0);
    });

    it('a 30-day toolCallSeconds stops the run when a call passes it, not before', () => {
      let timers!: NodeTimers;
      const lines = timeline(virtual, () => {
        timers = new NodeTimers(virtual);
        return waitingRun(virtual, 31 * DAY_MS, { deadline: new DeadlineConfig({ toolCallSeconds: THIRTY_DAYS_S }), scheduler: timers });
      });
      expect(lines).to.deep.equal(['0 START', '0 MODEL 1', `${THIRTY_DAYS_MS} ERROR w CallStoppedError`, `${THIRTY_DAYS_MS} FAILED DeadlineExceededError`]);
      expect(timers.overflows).to.equal(0);
    });

    it('a 30-day perToolSeconds fails its call at 30 days, and the run goes on', () => {
      let timers!: NodeTimers;
      const lines = timeline(virtual, () => {
        timers = new NodeTimers(virtual);
        return waitingRun(virtual, 31 * DAY_MS, { concurrency: new ConcurrencyConfig({ perToolSeconds: { wait: THIRTY_DAYS_S } }), scheduler: timers });
      });
      expect(lines).to.deep.equal(['0 START', '0 MODEL 1', `${THIRTY_DAYS_MS} ERROR w ToolTimedOutError`, `${THIRTY_DAYS_MS} MODEL 2`, `${THIRTY_DAYS_MS} COMPLETED done`]);
      expect(timers.overflows).to.equal(0);
    });

    it('a 30-day perToolSeconds ceiling does not spin: it wakes once before it is due, and once when it is', () => {
      let timers!: NodeTimers;
      virtual.run(({ cold, expectObservable }) => {
        timers = new NodeTimers(virtual);
        const concurrency = new ConcurrencyConfig({ perToolSeconds: { slow: THIRTY_DAYS_S } });
        const calls = [call('s', cold(`${31 * DAY_MS}ms (s|)`), { tool: 'slow' }), call('q', cold('-(q|)'))];
        expectObservable(runBatch(calls, { concurrency, scheduler: timers }).pipe(briefly)).toBe(`${THIRTY_DAYS_MS}ms (ab|)`, { a: 's!ToolTimedOutError', b: 'q=q' });
      });
      expect(timers.asked).to.deep.equal([2 ** 31 - 1, THIRTY_DAYS_MS - (2 ** 31 - 1)]);
    });
  });

  describe('on real timers: no TimeoutOverflowWarning, nothing fired at once', () => {
    it('a run under a 30-day runSeconds, toolCallSeconds and perToolSeconds waits for its call', async () => {
      const runner = new AgentRunner({
        provider: new ScriptedProvider([{ toolCalls: [{ id: 'w', name: 'wait', arguments: {} }] }, { text: 'done' }]),
        tools: new ToolRegistry().register({ name: 'wait', idempotent: true }, () => NEVER),
        concurrency: new ConcurrencyConfig({ perToolSeconds: { wait: THIRTY_DAYS_S } }),
        deadline: new DeadlineConfig({ runSeconds: THIRTY_DAYS_S, toolCallSeconds: THIRTY_DAYS_S + 1 }),
        loopStallMs: false,
      });
      const cancel = new AbortController();
      const events: string[] = [];
      let done: Promise<unknown> | undefined;
      const warnings = await overflowWarnings(() => {
        done = runner.run(planner, 'go', { signal: cancel.signal }).then((result) => events.push(...result.events.map(summary)));
      });
      const before = events.length;
      cancel.abort();
      await done;
      expect(warnings).to.deep.equal([]);
      expect(before, 'no event: the run was still waiting for its call').to.equal(0);
      expect(events).to.deep.equal(['START', 'MODEL 1', 'ERROR w CallStoppedError', 'CANCELLED']);
    });

    it('a 30-day retry wait (abortableSleep) waits, and ends at once on abort', async () => {
      const cancel = new AbortController();
      let settled = false;
      let sleeping: Promise<unknown> | undefined;
      const warnings = await overflowWarnings(() => {
        sleeping = abortableSleep(THIRTY_DAYS_MS, cancel.signal).then(
          () => (settled = true),
          (reason: unknown) => reason,
        );
      });
      expect(settled).to.equal(false);
      cancel.abort('stop');
      expect(await sleeping).to.equal('stop');
      expect(warnings).to.deep.equal([]);
    });

    describe('a Retry-After of 30 days, allowed by maxDelayMs', () => {
      let server: WireServer | undefined;
      afterEach(async () => {
        await server?.close();
        server = undefined;
      });

      it('is waited as given: the retry is not sent early', async () => {
        const retry = retryPolicy({ maxDelayMs: 31 * DAY_MS });
        expect(retryDelay(1, new Headers({ 'retry-after': String(THIRTY_DAYS_S) }), retry)).to.equal(THIRTY_DAYS_MS);
        server = await startWireServer([{ status: 429, headers: { 'retry-after': String(THIRTY_DAYS_S) }, body: { error: { message: 'come back next month' } } }, { body: {} }]);
        const cancel = new AbortController();
        let pending: Promise<unknown> | undefined;
        const warnings = await overflowWarnings(async () => {
          pending = postJson({ provider: 'test wire', url: server!.url, headers: {}, body: {}, signal: cancel.signal, retry }).catch((e: unknown) => e);
          await server!.arrived(1);
        });
        expect(server.received, 'only the first request, the retry waiting its 30 days').to.have.length(1);
        cancel.abort(new Error('cancelled'));
        expect(((await pending) as Error).message).to.equal('cancelled');
        expect(warnings).to.deep.equal([]);
      });
    });

    it('a 30-day SSE grace follows the stream after the client left, and ends when the stream does', async () => {
      const source = new Subject<string>();
      const endings: Array<StreamEnding<string>> = [];
      const warnings = await overflowWarnings(() => {
        followForClient(source, new AbortController(), { write: () => undefined, end: (ending) => endings.push(ending) }, THIRTY_DAYS_MS).leave();
      });
      expect(endings, 'still followed: the grace has not run out').to.deep.equal([]);
      source.complete();
      expect(endings.map((e) => e.ended)).to.deep.equal(['complete']);
      expect(warnings).to.deep.equal([]);
    });

    describe('a 30-day SSE heartbeat', () => {
      let server: TestServer | undefined;
      afterEach(async () => {
        await server?.close();
        server = undefined;
      });

      it('sends no heartbeat in the first moments, where Node would send one every ms', async () => {
        const source = new Subject<string>();
        const seen: string[] = [];
        server = await serve(sseHandler(() => source, { heartbeatMs: THIRTY_DAYS_MS, eventName: () => 'greeting' }));
        const response = await fetch(server.url);
        const reading = (async () => {
          const decoder = new TextDecoder();
          for await (const chunk of response.body!) seen.push(decoder.decode(chunk, { stream: true }));
        })();
        const warnings = await overflowWarnings(() => source.next('hello'));
        source.complete();
        await reading;
        expect(seen.join('')).to.equal('event: greeting\ndata: "hello"\n\n');
        expect(warnings).to.deep.equal([]);
      });
    });
  });

  describe('perToolSeconds equal to toolCallSeconds: the call\'s own ceiling wins', () => {
    // `h` (tool slow) runs 7 ms; `n` (lookup, no ceiling of its own) finishes at 3, inside the deadline.
    const cases: ReadonlyArray<{ title: string; perTool: number; marble: string; h: string }> = [
      { title: 'equal: h fails alone with ToolTimedOutError, the batch goes on', perTool: 0.004, marble: '----(ab|)', h: 'h!ToolTimedOutError' },
      { title: 'shorter: h fails alone with ToolTimedOutError, earlier', perTool: 0.003, marble: '---(ab|)', h: 'h!ToolTimedOutError' },
      { title: 'longer: the deadline comes first and stops the batch', perTool: 0.005, marble: '----(ab|)', h: 'h?' },
    ];
    for (const c of cases) {
      it(`${c.title}`, () => {
        virtual.run(({ cold, expectObservable }) => {
          const concurrency = new ConcurrencyConfig({ perToolSeconds: { slow: c.perTool } });
          const deadline = new DeadlineConfig({ toolCallSeconds: 0.004 });
          const calls = [call('h', cold('-------(h|)'), { tool: 'slow' }), call('n', cold('---(n|)'))];
          expectObservable(runBatch(calls, { concurrency, deadline }).pipe(briefly)).toBe(c.marble, { a: c.h, b: 'n=n' });
        });
      });
    }

    it('equal: the same whichever order a scheduler runs two timers due together in', () => {
      // Its own actions due at one frame run last-armed first (and before the marbles' own):
      // were a call's ceiling and its deadline two timers, the deadline would now come first.
      class LastArmedFirst implements SchedulerLike {
        constructor(private readonly under: TestScheduler) {}
        now(): number {
          return this.under.now();
        }
        schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T): Subscription {
          const action = this.under.schedule(work, delay, state);
          const indexed = action as unknown as { index: number };
          indexed.index = -indexed.index;
          this.under.actions.sort((x, y) => x.delay - y.delay || (x as unknown as { index: number }).index - (y as unknown as { index: number }).index);
          return action;
        }
      }
      virtual.run(({ cold, expectObservable }) => {
        const concurrency = new ConcurrencyConfig({ perToolSeconds: { slow: 0.004 } });
        const deadline = new DeadlineConfig({ toolCallSeconds: 0.004 });
        const calls = [call('h', cold('-------(h|)'), { tool: 'slow' }), call('n', cold('---(n|)'))];
        const scheduler = new LastArmedFirst(virtual);
        expectObservable(runBatch(calls, { concurrency, deadline, scheduler }).pipe(briefly)).toBe('----(ab|)', { a: 'h!ToolTimedOutError', b: 'n=n' });
      });
    });

    it('equal, through the runner: the model reads the ToolTimedOutError and the run completes', () => {
      const lines = timeline(virtual, () =>
        waitingRun(virtual, 7, { concurrency: new ConcurrencyConfig({ perToolSeconds: { wait: 0.004 } }), deadline: new DeadlineConfig({ toolCallSeconds: 0.004 }) }),
      );
      expect(lines).to.deep.equal(['0 START', '0 MODEL 1', '4 ERROR w ToolTimedOutError', '4 MODEL 2', '4 COMPLETED done']);
    });

    it('equal, under FAIL_RUN: the run fails with the ToolTimedOutError, not a DeadlineExceededError', () => {
      const lines = timeline(virtual, () =>
        waitingRun(virtual, 7, {
          agent: strict,
          concurrency: new ConcurrencyConfig({ perToolSeconds: { wait: 0.004 } }),
          deadline: new DeadlineConfig({ toolCallSeconds: 0.004 }),
        }),
      );
      expect(lines).to.deep.equal(['0 START', '0 MODEL 1', '4 ERROR w ToolTimedOutError', '4 FAILED ToolTimedOutError']);
    });

    it('equal after an agent narrows a longer perToolSeconds down to toolCallSeconds', () => {
      virtual.run(({ cold, expectObservable }) => {
        const concurrency = new ConcurrencyConfig({ perToolSeconds: { slow: 10 } }).narrowedTo({ perToolSeconds: { slow: 0.004 } });
        const deadline = new DeadlineConfig({ toolCallSeconds: 0.004 });
        const calls = [call('h', cold('-------(h|)'), { tool: 'slow' })];
        expectObservable(runBatch(calls, { concurrency, deadline }).pipe(map(brief))).toBe('----(a|)', { a: 'h!ToolTimedOutError' });
      });
    });
  });

  describe('configs: any positive finite duration is kept, anything else is a ConfigError naming the field', () => {
    it('keeps 30 days, and a thousand years, as given', () => {
      const years = 1000 * 365 * 24 * 3600;
      expect(new DeadlineConfig({ runSeconds: THIRTY_DAYS_S, toolCallSeconds: years })).to.include({ runSeconds: THIRTY_DAYS_S, toolCallSeconds: years });
      expect(new ConcurrencyConfig({ perToolSeconds: { slow: years } }).perToolSeconds).to.deep.equal({ slow: years });
      expect(retryPolicy({ maxDelayMs: THIRTY_DAYS_MS })).to.include({ maxDelayMs: THIRTY_DAYS_MS });
      expect(new AgentRunner({ provider: new ScriptedProvider([]), tools: new ToolRegistry(), loopStallMs: THIRTY_DAYS_MS }).loopStallMs).to.equal(THIRTY_DAYS_MS);
    });

    const refused: ReadonlyArray<[string, () => unknown, string, RegExp]> = [
      ['an infinite runSeconds', () => new DeadlineConfig({ runSeconds: Infinity }), 'runSeconds', /^runSeconds must be a positive finite number of seconds, got Infinity$/],
      ['a negative toolCallSeconds', () => new DeadlineConfig({ toolCallSeconds: -1 }), 'toolCallSeconds', /^toolCallSeconds must be a positive finite number of seconds, got -1$/],
      ['a NaN toolCallSeconds', () => new DeadlineConfig({ toolCallSeconds: NaN }), 'toolCallSeconds', /^toolCallSeconds must be a positive finite number of seconds, got NaN$/],
      ['an infinite perToolSeconds', () => new ConcurrencyConfig({ perToolSeconds: { slow: Infinity } }), 'perToolSeconds.slow', /^perToolSeconds\.slow must be a positive finite number of seconds, got Infinity$/],
      ['a negative perToolSeconds', () => new ConcurrencyConfig({ perToolSeconds: { slow: -0.5 } }), 'perToolSeconds.slow', /^perToolSeconds\.slow must be a positive finite number of seconds, got -0\.5$/],
      ['an infinite loopStallMs', () => new AgentRunner({ provider: new ScriptedProvider([]), tools: new ToolRegistry(), loopStallMs: Infinity }), 'loopStallMs', /^loopStallMs must be a positive number of milliseconds or false, got Infinity$/],
      ['an infinite maxDelayMs', () => retryPolicy({ maxDelayMs: Infinity }), 'retry.maxDelayMs', /^retry\.maxDelayMs must be a finite number of ms from 0 up, got Infinity$/],
      ['a negative baseDelayMs', () => retryPolicy({ baseDelayMs: -1 }), 'retry.baseDelayMs', /^retry\.baseDelayMs must be a finite number of ms from 0 up, got -1$/],
    ];
    for (const [title, make, field, message] of refused) {
      it(`refuses ${title}: ConfigError naming ${field}`, () => {
        expect(make).to.throw(ConfigError, message).with.property('field', field);
      });
    }
  });
});
