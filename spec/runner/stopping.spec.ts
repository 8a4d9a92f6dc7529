// How a run stops, through AgentRunner + ScriptedProvider in virtual time: cancelling by
// AbortSignal (during a batch, before the run, while the model is asked), unsubscribing,
// the run-wide deadlines (toolCallSeconds, runSeconds) and a tool's own perToolSeconds.
// Each scenario checks the transcript, what the bodies saw, that the shared lanes are idle
// afterwards, and that every call of a batch ended in exactly one outcome event.
import { getEventListeners } from 'node:events';
import { expect } from 'chai';
import sinon from 'sinon';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { config, map, of, type Observable, type Subscription } from 'rxjs';
import { TestScheduler, type RunHelpers } from 'rxjs/testing';
import { summary } from './summary.js';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  DeadlineConfig,
  LaneTable,
  ScriptedProvider,
  ToolRegistry,
  type LaneOccupancy,
  type ModelResponse,
  type RunEvent,
  type RunResult,
  type ScriptStep,
  type ToolCall,
} from '../../lib/index.js';

const planner = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });

const ask = (id: string, name: string): ToolCall => ({ id, name, arguments: {} });

/** One line per event: `START`, `MODEL 1`, `RESULT a`, `ERROR a CallStoppedError`, `INDET a`, `CANCELLED`, `FAILED Name`, `COMPLETED out`. */

/** For marble expectations on a transcript. */
const mapSummary = map(summary);

/** Every call each MODEL_RESPONSE asked for ends in exactly one TOOL_RESULT / TOOL_ERROR / TOOL_INDETERMINATE, and nothing else does. */
function expectOneOutcomePerCall(events: readonly RunEvent[]): void {
  const asked = new Map<string, number>();
  for (const event of events) {
    if (event.type === 'MODEL_RESPONSE') for (const c of event.toolCalls) asked.set(`${event.turn}/${c.id}`, 0);
  }
  for (const event of events) {
    if (event.type === 'TOOL_RESULT' || event.type === 'TOOL_ERROR' || event.type === 'TOOL_INDETERMINATE') {
      const key = `${event.turn}/${event.callId}`;
      expect(asked.has(key), `an outcome for ${key}, which no model response asked for`).to.equal(true);
      asked.set(key, asked.get(key)! + 1);
    }
  }
  for (const [key, count] of asked) expect(count, `outcome events for call ${key}`).to.equal(1);
}

/** Each call's stop class as its event carries it (`-` for none), by call id, in call order. */
function classesOf(events: readonly RunEvent[]): Array<[string, string]> {
  const classes: Array<[string, string]> = [];
  for (const e of events) if (e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE') classes.push([e.callId, ('stopClass' in e ? e.stopClass : undefined) ?? '-']);
  return classes;
}

function messageOf(events: readonly RunEvent[], callId: string): string {
  const event = events.find((e) => (e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE') && e.callId === callId);
  if (event?.type === 'TOOL_ERROR') return event.error.message;
  if (event?.type === 'TOOL_INDETERMINATE') return event.message;
  throw new Error(`no TOOL_ERROR or TOOL_INDETERMINATE for ${callId}`);
}

/** Tools whose bodies play `bodies[callId]` and remember the signal and that they ran. */
function toolsPlaying(bodies: Readonly<Record<string, Observable<unknown>>>, seen: { signals: Map<string, AbortSignal>; invoked: string[] }) {
  const body = (_args: unknown, ctx: { callId: string; signal: AbortSignal }) => {
    seen.signals.set(ctx.callId, ctx.signal);
    seen.invoked.push(ctx.callId);
    const played = bodies[ctx.callId];
    if (played === undefined) throw new Error(`no body scripted for ${ctx.callId}`);
    return played;
  };
  return new ToolRegistry()
    .register({ name: 'search', idempotent: true }, body)
    .register({ name: 'charge' }, body)
    .register({ name: 'slow' }, body);
}

/** Subscribes to a run and records `${frame} ${summary}` for each event, plus the events themselves. */
function watch(run$: Observable<RunEvent>, scheduler: TestScheduler) {
  const timeline: string[] = [];
  const events: RunEvent[] = [];
  let completed = false;
  const subscription = run$.subscribe({
    next: (event) => {
      events.push(event);
      timeline.push(`${scheduler.now()} ${summary(event)}`);
    },
    complete: () => (completed = true),
  });
  return { timeline, events, subscription, done: () => completed };
}

describe('AgentRunner: stopping', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  describe('cancelled by an AbortSignal while calls are in flight and queued', () => {
    // Turn lane of 2: `done` (5ms) and `idem` start at 0; `done` finishes at 5 and `charge`
    // takes its place; `queued` is still waiting for the turn lane when the signal aborts at 8.
    const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2, perTenant: 8, perTool: { search: 4, charge: 4 } });
    const script = (): ScriptStep[] => [
      { toolCalls: [ask('done', 'search'), ask('idem', 'search'), ask('charge', 'charge'), ask('queued', 'search')] },
      { text: 'never asked for' },
    ];

    function scenario({ cold }: RunHelpers) {
      const controller = new AbortController();
      const bodies = {
        done: cold('-----(d|)'),
        idem: cold('--------------------(i|)'),
        charge: cold('--------------------(c|)'),
        queued: cold('-(q|)'),
      };
      const seen = { signals: new Map<string, AbortSignal>(), invoked: [] as string[] };
      const provider = new ScriptedProvider(script());
      const runner = new AgentRunner({ provider, tools: toolsPlaying(bodies, seen), concurrency });
      let lanesDuring: LaneOccupancy[] = [];
      testScheduler.schedule(() => (lanesDuring = runner.lanes.occupancy()), 6);
      testScheduler.schedule(() => controller.abort(), 8);
      return { controller, bodies, seen, provider, runner, lanesDuring: () => lanesDuring };
    }

    it('emits the classification events in call order, then RUN_CANCELLED, when the signal aborts', () => {
      testScheduler.run((helpers) => {
        const { controller, bodies, runner } = scenario(helpers);
        const run$ = runner.run$(planner, 'go', { signal: controller.signal });
        helpers.expectObservable(run$.pipe(mapSummary)).toBe('(ab)-c--(defg|)', {
          a: 'START',
          b: 'MODEL 1',
          c: 'RESULT done',
          d: 'ERROR idem CallStoppedError',
          e: 'INDET charge',
          f: 'ERROR queued CallStoppedError',
          g: 'CANCELLED',
        });
        helpers.expectSubscriptions(bodies.done.subscriptions).toBe('^----!');
        helpers.expectSubscriptions(bodies.idem.subscriptions).toBe('^-------!');
        helpers.expectSubscriptions(bodies.charge.subscriptions).toBe('-----^--!');
        helpers.expectSubscriptions(bodies.queued.subscriptions).toBe([]);
      });
    });

    it('says never dispatched, Safe to call again, or The side effect may have landed', async () => {
      let pending: Promise<RunResult> | undefined;
      testScheduler.run((helpers) => {
        const { controller, runner } = scenario(helpers);
        pending = runner.run(planner, 'go', { signal: controller.signal });
        helpers.flush();
      });
      const { events } = await pending!;
      expect(events.map(summary)).to.deep.equal([
        'START',
        'MODEL 1',
        'RESULT done',
        'ERROR idem CallStoppedError',
        'INDET charge',
        'ERROR queued CallStoppedError',
        'CANCELLED',
      ]);
      expect(messageOf(events, 'queued')).to.match(/^never dispatched: /);
      expect(messageOf(events, 'idem')).to.match(/Safe to call again$/);
      expect(messageOf(events, 'charge')).to.match(/The side effect may have landed$/);
    });

    it('gives each stopped call its stop class as a field, checked against what the bodies did, and none to the call that finished', async () => {
      let observed: ReturnType<typeof scenario> | undefined;
      let pending: Promise<RunResult> | undefined;
      testScheduler.run((helpers) => {
        observed = scenario(helpers);
        pending = observed.runner.run(planner, 'go', { signal: observed.controller.signal });
        helpers.flush();
      });
      const { events } = await pending!;
      expect(classesOf(events)).to.deep.equal([
        ['done', '-'],
        ['idem', 'safe_to_call_again'],
        ['charge', 'indeterminate'],
        ['queued', 'never_dispatched'],
      ]);
      // Counted from the bodies: the two classed as in flight had started, the one never dispatched had not.
      expect(observed!.seen.invoked).to.include.members(['idem', 'charge']).and.not.include('queued');
    });

    it('resolves run() with status cancelled rather than rejecting', async () => {
      let pending: Promise<RunResult> | undefined;
      testScheduler.run((helpers) => {
        const { controller, runner } = scenario(helpers);
        pending = runner.run(planner, 'go', { signal: controller.signal });
        helpers.flush();
      });
      const result = await pending!;
      expect(result.status).to.equal('cancelled');
      expect(result.events[result.events.length - 1]!.type).to.equal('RUN_CANCELLED');
    });

    it('aborts ctx.signal of the bodies stopped in flight, and of none that finished or never ran', async () => {
      let observed: ReturnType<typeof scenario> | undefined;
      let pending: Promise<RunResult> | undefined;
      testScheduler.run((helpers) => {
        observed = scenario(helpers);
        pending = observed.runner.run(planner, 'go', { signal: observed.controller.signal });
        helpers.flush();
      });
      await pending;
      const { signals, invoked } = observed!.seen;
      expect(invoked).to.deep.equal(['done', 'idem', 'charge']);
      expect(signals.get('done')!.aborted).to.equal(false);
      expect(signals.get('idem')!.aborted).to.equal(true);
      expect(signals.get('charge')!.aborted).to.equal(true);
    });

    it('leaves every shared lane idle afterwards', async () => {
      let observed: ReturnType<typeof scenario> | undefined;
      let pending: Promise<RunResult> | undefined;
      testScheduler.run((helpers) => {
        observed = scenario(helpers);
        pending = observed.runner.run(planner, 'go', { signal: observed.controller.signal });
        helpers.flush();
      });
      await pending;
      // busy while the calls ran (tenant and tool lanes), so the check below means something
      expect(observed!.lanesDuring().map((lane) => lane.key)).to.include.members(['tenant:default', 'tool:search', 'tool:charge']);
      expect(observed!.runner.lanes.occupancy()).to.deep.equal([]);
    });

    it('ends every call of the batch in exactly one outcome event', async () => {
      let pending: Promise<RunResult> | undefined;
      testScheduler.run((helpers) => {
        const { controller, runner } = scenario(helpers);
        pending = runner.run(planner, 'go', { signal: controller.signal });
        helpers.flush();
      });
      const { events } = await pending!;
      expect(events.filter((e) => e.type === 'MODEL_RESPONSE')).to.have.length(1);
      expectOneOutcomePerCall(events);
    });
  });

  describe('a signal already aborted before the run', () => {
    async function scenario() {
      const controller = new AbortController();
      controller.abort();
      const seen = { signals: new Map<string, AbortSignal>(), invoked: [] as string[] };
      const provider = new ScriptedProvider([{ toolCalls: [ask('a', 'search'), ask('b', 'charge')] }, { text: 'done' }]);
      const runner = new AgentRunner({ provider, tools: toolsPlaying({}, seen), concurrency: new ConcurrencyConfig({ perTenant: 4 }) });
      const result = await runner.run(planner, 'go', { signal: controller.signal });
      return { result, seen, runner };
    }

    it('emits RUN_STARTED then RUN_CANCELLED and nothing between (the model is not asked, or its answer ignored)', async () => {
      const { result } = await scenario();
      expect(result.status).to.equal('cancelled');
      expect(result.events.map(summary)).to.deep.equal(['START', 'CANCELLED']);
    });

    it('ends RUN_CANCELLED, not RUN_COMPLETED, even when the model would answer at once', async () => {
      const controller = new AbortController();
      controller.abort();
      const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'an answer nobody waited for' }]), tools: new ToolRegistry() });
      const result = await runner.run(planner, 'go', { signal: controller.signal });
      expect(result.status).to.equal('cancelled');
      expect(result.events.map(summary)).to.deep.equal(['START', 'CANCELLED']);
    });

    it('dispatches no tool', async () => {
      const { seen, runner } = await scenario();
      expect(seen.invoked).to.deep.equal([]);
      expect(runner.lanes.occupancy()).to.deep.equal([]);
    });

    it('ends every call of the batch in exactly one outcome event', async () => {
      const { result } = await scenario();
      expectOneOutcomePerCall(result.events);
    });
  });

  describe('cancelled by a body, synchronously, from inside its own call', () => {
    it('classifies that call as in flight and its sibling as never dispatched, then RUN_CANCELLED', async () => {
      const controller = new AbortController();
      const invoked: string[] = [];
      const tools = new ToolRegistry()
        .register({ name: 'charge' }, (_args, ctx) => {
          invoked.push(ctx.callId);
          controller.abort();
          return 'charged';
        })
        .register({ name: 'search' }, (_args, ctx) => {
          invoked.push(ctx.callId);
          return 'found';
        });
      const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [ask('a', 'charge'), ask('b', 'search')] }, { text: 'done' }]), tools });
      const result = await runner.run(planner, 'go', { signal: controller.signal });
      expect(result.status).to.equal('cancelled');
      expect(result.events.map(summary)).to.deep.equal(['START', 'MODEL 1', 'INDET a', 'ERROR b CallStoppedError', 'CANCELLED']);
      expect(invoked).to.deep.equal(['a']);
      expect(runner.lanes.occupancy()).to.deep.equal([]);
    });
  });

  describe('the reason the caller gave', () => {
    /** `a` (idempotent) aborts the run's signal with `reason` from inside its body; `b` and `c` queue behind it. */
    async function cancelledWith(abort: (controller: AbortController) => void) {
      const controller = new AbortController();
      const tools = new ToolRegistry()
        .register({ name: 'search', idempotent: true }, () => {
          abort(controller);
          return 'found';
        })
        .register({ name: 'charge' }, () => 'charged');
      const provider = new ScriptedProvider([{ toolCalls: [ask('a', 'search'), ask('b', 'charge')] }, { text: 'done' }]);
      const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ maxConcurrentTools: 1 }) });
      const result = await runner.run(planner, 'go', { signal: controller.signal });
      const last = result.events[result.events.length - 1];
      return { result, reason: last?.type === 'RUN_CANCELLED' ? last.reason : undefined, runner };
    }

    it('is carried by RUN_CANCELLED, result.error and every stop message', async () => {
      const { result, reason } = await cancelledWith((controller) => controller.abort('user closed the tab'));
      const why = 'the run was cancelled: user closed the tab';
      expect(result.status).to.equal('cancelled');
      expect(reason).to.equal(why);
      expect(result.error).to.deep.equal({ name: 'RunCancelled', message: why });
      expect(messageOf(result.events, 'a')).to.equal(`search was in flight when the batch stopped (${why}). Safe to call again`);
      expect(messageOf(result.events, 'b')).to.equal(`never dispatched: ${why}`);
    });

    it('is carried when the signal had aborted before the run began, and when the model was being asked', async () => {
      const before = new AbortController();
      before.abort(new Error('shutting down'));
      const runner = new AgentRunner({ provider: new ScriptedProvider([() => new Promise<ModelResponse>(() => undefined)]), tools: new ToolRegistry() });
      const early = await runner.run(planner, 'go', { signal: before.signal });
      expect(early.error?.message).to.equal('the run was cancelled: shutting down');
      const during = new AbortController();
      const asked = runner.run(planner, 'go', { signal: during.signal });
      during.abort('superseded by a newer question');
      expect((await asked).error?.message).to.equal('the run was cancelled: superseded by a newer question');
    });

    const circular = (): Record<string, unknown> => {
      const value: Record<string, unknown> = {};
      value['self'] = value;
      return value;
    };
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error('get trap');
        },
        getPrototypeOf() {
          throw new Error('getPrototypeOf trap');
        },
        has() {
          throw new Error('has trap');
        },
        ownKeys() {
          throw new Error('ownKeys trap');
        },
      },
    );
    const cases: ReadonlyArray<{ title: string; abort: (controller: AbortController) => void; expected: string }> = [
      { title: 'a bare abort(): none', abort: (c) => c.abort(), expected: 'the run was cancelled' },
      { title: 'undefined: none', abort: (c) => c.abort(undefined), expected: 'the run was cancelled' },
      { title: 'an empty string: none', abort: (c) => c.abort('  '), expected: 'the run was cancelled' },
      { title: 'a string: itself', abort: (c) => c.abort('user closed the tab'), expected: 'the run was cancelled: user closed the tab' },
      { title: 'an Error: its message', abort: (c) => c.abort(new TypeError('quota exhausted')), expected: 'the run was cancelled: quota exhausted' },
      { title: 'an Error without a message: its name', abort: (c) => c.abort(Object.assign(new Error(''), { name: 'ClientGone' })), expected: 'the run was cancelled: ClientGone' },
      { title: 'a plain Error without a message: none', abort: (c) => c.abort(new Error()), expected: 'the run was cancelled' },
      {
        title: 'a DOMException other than AbortError (a timeout): its message',
        abort: (c) => c.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
        expected: 'the run was cancelled: The operation was aborted due to timeout',
      },
      { title: 'a number: its digits', abort: (c) => c.abort(499), expected: 'the run was cancelled: 499' },
      { title: 'a symbol: its description', abort: (c) => c.abort(Symbol('bye')), expected: 'the run was cancelled: Symbol(bye)' },
      { title: 'an object with a message', abort: (c) => c.abort({ message: 'closed by the client' }), expected: 'the run was cancelled: closed by the client' },
      { title: 'another object: its JSON', abort: (c) => c.abort({ code: 'gone' }), expected: 'the run was cancelled: {"code":"gone"}' },
      { title: 'an object JSON cannot write (a cycle): none, without throwing', abort: (c) => c.abort(circular()), expected: 'the run was cancelled' },
      {
        title: 'an object whose message getter throws: none, without throwing',
        abort: (c) =>
          c.abort(
            Object.defineProperty(new Error('x'), 'message', {
              get() {
                throw new Error('no');
              },
            }),
          ),
        expected: 'the run was cancelled',
      },
      { title: 'a proxy whose every trap throws: none, without throwing', abort: (c) => c.abort(hostile), expected: 'the run was cancelled' },
    ];
    for (const c of cases) {
      it(`reads ${c.title}`, async () => {
        const { result, reason, runner } = await cancelledWith(c.abort);
        expect(result.status).to.equal('cancelled');
        expect(reason).to.equal(c.expected);
        expect(messageOf(result.events, 'b')).to.equal(`never dispatched: ${c.expected}`);
        expect(runner.lanes.occupancy()).to.deep.equal([]);
      });
    }
  });

  describe('cancelled while the model is being asked', () => {
    function scenario({ cold }: RunHelpers) {
      const controller = new AbortController();
      const seen = { signals: new Map<string, AbortSignal>(), invoked: [] as string[] };
      const reply = cold<ModelResponse>('----------(r|)', { r: { toolCalls: [ask('a', 'search')] } });
      const asked: { signal?: AbortSignal } = {};
      const provider = new ScriptedProvider([
        (_request, signal) => {
          asked.signal = signal;
          return reply;
        },
        { text: 'never asked for' },
      ]);
      const runner = new AgentRunner({ provider, tools: toolsPlaying({ a: cold('-(a|)') }, seen) });
      testScheduler.schedule(() => controller.abort(), 3);
      return { controller, seen, reply, asked, provider, runner };
    }

    it('ends with RUN_CANCELLED when the signal aborts, with no tool events', () => {
      let watched: ReturnType<typeof watch> | undefined;
      let observed: ReturnType<typeof scenario> | undefined;
      testScheduler.run((helpers) => {
        observed = scenario(helpers);
        watched = watch(observed.runner.run$(planner, 'go', { signal: observed.controller.signal }), testScheduler);
        helpers.flush();
        helpers.expectSubscriptions(observed.reply.subscriptions).toBe('^--!');
      });
      expect(watched!.done()).to.equal(true);
      expect(watched!.timeline).to.deep.equal(['0 START', '3 CANCELLED']);
      expect(observed!.seen.invoked).to.deep.equal([]);
      expect(observed!.provider.requests).to.have.length(1);
      expectOneOutcomePerCall(watched!.events);
    });

    it('aborts the signal the provider was given', () => {
      let observed: ReturnType<typeof scenario> | undefined;
      testScheduler.run((helpers) => {
        observed = scenario(helpers);
        observed.runner.run$(planner, 'go', { signal: observed.controller.signal }).subscribe();
        helpers.flush();
      });
      expect(observed!.asked.signal, 'the provider was asked').to.be.instanceOf(AbortSignal);
      expect(observed!.asked.signal!.aborted).to.equal(true);
    });

    it('hands a provider that leaves its abort listeners behind a fresh signal each turn, so none piles up', async () => {
      const signals: AbortSignal[] = [];
      const turns = 14;
      const step = (_request: unknown, signal: AbortSignal): ModelResponse => {
        signals.push(signal);
        signal.addEventListener('abort', () => undefined); // never removed
        return signals.length < turns ? { toolCalls: [ask(`c${signals.length}`, 'search')] } : { text: 'done' };
      };
      const runner = new AgentRunner({ provider: new ScriptedProvider(Array.from({ length: turns }, () => step)), tools: new ToolRegistry().register({ name: 'search' }, () => 'x') });
      const result = await runner.run(planner, 'go', { maxTurns: turns });
      expect(result.status).to.equal('completed');
      expect(new Set(signals).size).to.equal(turns);
      expect(signals.every((signal) => getEventListeners(signal, 'abort').length === 1)).to.equal(true);
    });

    it("leaves the signal of a request that answered alone, under RxJS's deprecated useDeprecatedNextContext too", async () => {
      const signals: AbortSignal[] = [];
      const provider = { respond: (_request: unknown, signal: AbortSignal) => (signals.push(signal), of<ModelResponse>({ text: 'final' })) };
      const runner = new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'search' }, () => 'x') });
      // Under that setting RxJS runs an observer's methods on a copy of the observer.
      const before = config.useDeprecatedNextContext;
      config.useDeprecatedNextContext = true;
      try {
        const result = await runner.run(planner, 'go');
        expect(result.status).to.equal('completed');
      } finally {
        config.useDeprecatedNextContext = before;
      }
      expect(signals).to.have.length(1);
      expect(signals[0]!.aborted).to.equal(false);
    });

    it('aborts the pending request of a run cancelled on a later turn, and not the signal of its answered first request', async () => {
      const controller = new AbortController();
      const signals: AbortSignal[] = [];
      const provider = new ScriptedProvider([
        (_request, signal) => {
          signals.push(signal);
          return { toolCalls: [ask('a', 'search')] };
        },
        (_request, signal) => {
          signals.push(signal);
          setTimeout(() => controller.abort(), 1);
          return new Promise<ModelResponse>(() => undefined);
        },
      ]);
      const runner = new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'search' }, () => 'x') });
      const result = await runner.run(planner, 'go', { signal: controller.signal });
      expect(result.status).to.equal('cancelled');
      expect(signals).to.have.length(2);
      expect(signals[1]).to.not.equal(signals[0]);
      expect(signals[1]!.aborted, 'the request waiting when the run was cancelled').to.equal(true);
      expect(signals[0]!.aborted, 'the request that had answered').to.equal(false);
    });
  });

  describe('the signals handed to the provider', () => {
    it("belong to their run alone: a provider that keeps a signal never sees another run's cancel", async () => {
      const kept: Array<{ agent: string; signal: AbortSignal }> = [];
      const pending: Array<(response: ModelResponse) => void> = [];
      const provider = {
        respond: (request: { agent: string }, signal: AbortSignal) => {
          kept.push({ agent: request.agent, signal });
          if (request.agent === 'planner') return of<ModelResponse>({ text: 'at once' });
          return new Promise<ModelResponse>((resolve) => pending.push(resolve));
        },
      };
      const runner = new AgentRunner({ provider, tools: new ToolRegistry() });
      const slow = new Agent({ name: 'slow', instructions: '', model: 'm' });
      // A run answered at once, then two runs asked at the same time, one of them cancelled.
      expect((await runner.run(planner, 'one')).status).to.equal('completed');
      const cancel = new AbortController();
      const cancelled = runner.run(slow, 'two', { signal: cancel.signal });
      const other = runner.run(slow, 'three');
      cancel.abort();
      expect((await cancelled).status).to.equal('cancelled');
      pending[1]!({ text: 'late' });
      expect((await other).status).to.equal('completed');
      // And a run after all that.
      expect((await runner.run(planner, 'four')).status).to.equal('completed');
      expect(kept.map(({ agent, signal }) => `${agent} ${signal.aborted}`)).to.deep.equal(['planner false', 'slow true', 'slow false', 'planner false']);
      expect(new Set(kept.map(({ signal }) => signal)).size, 'no signal handed to two requests').to.equal(kept.length);
    });

    it('are never handed to two requests, over turns, runs side by side and nested runs', async () => {
      const signals: AbortSignal[] = [];
      const researcher = new Agent({ name: 'researcher', instructions: '', model: 'm', tools: ['search'] });
      const keep = (response: ModelResponse): ScriptStep => (_request, signal) => (signals.push(signal), response);
      const planners = [1, 2, 3].map((i) => new Agent({ name: `planner${i}`, instructions: '', model: 'm' }));
      const script: Record<string, ScriptStep[]> = {
        // The three nested runs share the researcher's script: each takes a search, then an answer.
        researcher: [keep({ toolCalls: [ask('r', 'search')] }), keep({ toolCalls: [ask('r', 'search')] }), keep({ toolCalls: [ask('r', 'search')] }), keep({ text: 'found' }), keep({ text: 'found' }), keep({ text: 'found' })],
      };
      for (const { name } of planners) script[name] = [keep({ toolCalls: [ask('s', 'search'), ask('d', 'delegate')] }), keep({ toolCalls: [ask('t', 'search')] }), keep({ text: 'done' })];
      const tools = new ToolRegistry()
        .register({ name: 'search' }, () => new Promise((resolve) => setTimeout(() => resolve('x'), 1)))
        .register({ name: 'delegate' }, async (_args, ctx) => (await ctx.runAgent(researcher, 'look')).output);
      const runner = new AgentRunner({ provider: new ScriptedProvider(script), tools });
      // Three runs at once on one runner, each asking three times and starting a nested run that asks twice.
      const results = await Promise.all(planners.map((agent) => runner.run(agent, 'go')));
      expect(results.map((r) => r.status)).to.deep.equal(['completed', 'completed', 'completed']);
      expect(signals).to.have.length(15);
      expect(new Set(signals).size).to.equal(15);
      expect(signals.some((signal) => signal.aborted)).to.equal(false);
    });

    it('are each aborted by their own run only, whichever run stops first', async () => {
      // Four runs wait on their model at once: two are cancelled, one before any answer and one
      // after another run's; the other two answer.
      const kept = new Map<string, AbortSignal>();
      const pending = new Map<string, (response: ModelResponse) => void>();
      const provider = {
        respond: (request: { messages: ReadonlyArray<{ content: string }> }, signal: AbortSignal) => {
          const input = request.messages[0]!.content;
          kept.set(input, signal);
          return new Promise<ModelResponse>((resolve) => pending.set(input, resolve));
        },
      };
      const runner = new AgentRunner({ provider, tools: new ToolRegistry() });
      const controllers = ['a', 'b', 'c', 'd'].map(() => new AbortController());
      const runs = ['a', 'b', 'c', 'd'].map((input, i) => runner.run(planner, input, { signal: controllers[i]!.signal }));
      controllers[1]!.abort('b is done');
      pending.get('a')!({ text: 'A' });
      controllers[3]!.abort();
      pending.get('c')!({ text: 'C' });
      expect((await Promise.all(runs)).map((r) => r.status)).to.deep.equal(['completed', 'cancelled', 'completed', 'cancelled']);
      expect(['a', 'b', 'c', 'd'].map((input) => kept.get(input)!.aborted)).to.deep.equal([false, true, false, true]);
    });
  });

  describe('unsubscribing from run$ mid-batch', () => {
    function scenario({ cold }: RunHelpers) {
      const seen = { signals: new Map<string, AbortSignal>(), invoked: [] as string[] };
      const bodies = { a: cold('----------(a|)'), b: cold('----------(b|)'), c: cold('----------(c|)') };
      const provider = new ScriptedProvider([{ toolCalls: [ask('a', 'search'), ask('b', 'charge'), ask('c', 'search')] }, { text: 'done' }]);
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2, perTenant: 4, perTool: { search: 2, charge: 2 } });
      const runner = new AgentRunner({ provider, tools: toolsPlaying(bodies, seen), concurrency });
      return { seen, bodies, provider, runner };
    }

    it('stops the run: the bodies in flight are unsubscribed and their signals abort', () => {
      let observed: ReturnType<typeof scenario> | undefined;
      testScheduler.run((helpers) => {
        observed = scenario(helpers);
        helpers.expectObservable(observed.runner.run$(planner, 'go').pipe(mapSummary), '^----!').toBe('(ab)', { a: 'START', b: 'MODEL 1' });
        helpers.expectSubscriptions(observed.bodies.a.subscriptions).toBe('^----!');
        helpers.expectSubscriptions(observed.bodies.b.subscriptions).toBe('^----!');
      });
      const { signals } = observed!.seen;
      expect(signals.get('a')!.aborted).to.equal(true);
      expect(signals.get('b')!.aborted).to.equal(true);
    });

    it('does not dispatch the call still queued behind the turn lane when it unsubscribes', () => {
      // Tearing down `a` and `b` gives their turn permits back; `c` must not start on one.
      let observed: ReturnType<typeof scenario> | undefined;
      testScheduler.run((helpers) => {
        observed = scenario(helpers);
        helpers.expectObservable(observed.runner.run$(planner, 'go').pipe(mapSummary), '^----!').toBe('(ab)', { a: 'START', b: 'MODEL 1' });
        helpers.flush();
      });
      expect(observed!.seen.invoked).to.deep.equal(['a', 'b']);
      expect(observed!.bodies.c.subscriptions).to.deep.equal([]);
    });

    it('leaves every shared lane idle and asks the model nothing more', () => {
      let observed: ReturnType<typeof scenario> | undefined;
      let during: LaneOccupancy[] = [];
      testScheduler.run((helpers) => {
        observed = scenario(helpers);
        const runner = observed.runner;
        const subscription = runner.run$(planner, 'go').subscribe();
        testScheduler.schedule(() => (during = runner.lanes.occupancy()), 2);
        testScheduler.schedule(() => subscription.unsubscribe(), 5);
        helpers.flush();
      });
      expect(during.map((lane) => lane.key)).to.include.members(['tenant:default', 'tool:search', 'tool:charge']);
      expect(observed!.runner.lanes.occupancy()).to.deep.equal([]);
      expect(observed!.provider.requests).to.have.length(1);
    });
  });

  describe('DeadlineConfig.toolCallSeconds', () => {
    // `hang` (charge, 10ms) passes the 4ms deadline; `idem` (search, 10ms) is in flight beside it;
    // `later` waits behind `hang` in the charge lane of 1; `quick` finished at 1.
    function overrunning({ cold }: RunHelpers) {
      const seen = { signals: new Map<string, AbortSignal>(), invoked: [] as string[] };
      const bodies = {
        quick: cold('-(q|)'),
        hang: cold('----------(h|)'),
        idem: cold('----------(i|)'),
        later: cold('-(l|)'),
      };
      const provider = new ScriptedProvider([
        { toolCalls: [ask('quick', 'search'), ask('hang', 'charge'), ask('idem', 'search'), ask('later', 'charge')] },
        { text: 'never asked for' },
      ]);
      const runner = new AgentRunner({
        provider,
        tools: toolsPlaying(bodies, seen),
        concurrency: new ConcurrencyConfig({ perTenant: 8, perTool: { charge: 1 } }),
        deadline: new DeadlineConfig({ toolCallSeconds: 0.004 }),
      });
      return { seen, provider, runner };
    }

    it('ends the run with RUN_FAILED (DeadlineExceededError) when a call runs longer, siblings classified', () => {
      let watched: ReturnType<typeof watch> | undefined;
      let observed: ReturnType<typeof overrunning> | undefined;
      testScheduler.run((helpers) => {
        observed = overrunning(helpers);
        watched = watch(observed.runner.run$(planner, 'go'), testScheduler);
        helpers.flush();
      });
      const { timeline, events } = watched!;
      expect(timeline).to.deep.equal([
        '0 START',
        '0 MODEL 1',
        '1 RESULT quick',
        '4 INDET hang',
        '4 ERROR idem CallStoppedError',
        '4 ERROR later CallStoppedError',
        '4 FAILED DeadlineExceededError',
      ]);
      const failed = events[events.length - 1]!;
      expect(failed.type === 'RUN_FAILED' && failed.error.message).to.include('toolCallSeconds');
      expect(messageOf(events, 'hang')).to.match(/DeadlineConfig\.toolCallSeconds = 0\.004s.*The side effect may have landed$/);
      expect(messageOf(events, 'idem')).to.match(/Safe to call again$/);
      expect(messageOf(events, 'later')).to.match(/^never dispatched: /);
      expect(classesOf(events)).to.deep.equal([
        ['quick', '-'],
        ['hang', 'indeterminate'],
        ['idem', 'safe_to_call_again'],
        ['later', 'never_dispatched'],
      ]);
      expect(observed!.seen.invoked).to.deep.equal(['quick', 'hang', 'idem']);
      expect(observed!.seen.signals.get('hang')!.aborted).to.equal(true);
      expect(observed!.runner.lanes.occupancy()).to.deep.equal([]);
      expect(observed!.provider.requests).to.have.length(1);
    });

    it('ends every call of the batch in exactly one outcome event when the deadline passes', () => {
      let watched: ReturnType<typeof watch> | undefined;
      testScheduler.run((helpers) => {
        watched = watch(overrunning(helpers).runner.run$(planner, 'go'), testScheduler);
        helpers.flush();
      });
      expectOneOutcomePerCall(watched!.events);
    });

    it('completes normally when every call is quicker, even though the run as a whole is longer', () => {
      let watched: ReturnType<typeof watch> | undefined;
      testScheduler.run(({ cold, flush }) => {
        const seen = { signals: new Map<string, AbortSignal>(), invoked: [] as string[] };
        const bodies = { a: cold('---(a|)'), b: cold('---(b|)'), c: cold('---(c|)') };
        const provider = new ScriptedProvider([
          { toolCalls: [ask('a', 'search'), ask('b', 'charge')] },
          { toolCalls: [ask('c', 'charge')] },
          { text: 'done' },
        ]);
        const runner = new AgentRunner({ provider, tools: toolsPlaying(bodies, seen), deadline: new DeadlineConfig({ toolCallSeconds: 0.004 }) });
        watched = watch(runner.run$(planner, 'go'), testScheduler);
        flush();
      });
      expect(watched!.timeline).to.deep.equal(['0 START', '0 MODEL 1', '3 RESULT a', '3 RESULT b', '3 MODEL 2', '6 RESULT c', '6 MODEL 3', '6 COMPLETED done']);
      expectOneOutcomePerCall(watched!.events);
    });
  });

  describe('DeadlineConfig.runSeconds', () => {
    function twoTurns({ cold }: RunHelpers) {
      const seen = { signals: new Map<string, AbortSignal>(), invoked: [] as string[] };
      const bodies = { a: cold('---(a|)'), b: cold('---(b|)') };
      const provider = new ScriptedProvider([{ toolCalls: [ask('a', 'search')] }, { toolCalls: [ask('b', 'search')] }, { text: 'never asked for' }]);
      const runner = new AgentRunner({ provider, tools: toolsPlaying(bodies, seen), deadline: new DeadlineConfig({ runSeconds: 0.005 }) });
      return { seen, provider, runner };
    }

    it('bounds the whole run across turns: RUN_FAILED (DeadlineExceededError) during turn 2', () => {
      let watched: ReturnType<typeof watch> | undefined;
      let observed: ReturnType<typeof twoTurns> | undefined;
      testScheduler.run((helpers) => {
        observed = twoTurns(helpers);
        watched = watch(observed.runner.run$(planner, 'go'), testScheduler);
        helpers.flush();
      });
      expect(watched!.timeline).to.deep.equal(['0 START', '0 MODEL 1', '3 RESULT a', '3 MODEL 2', '5 ERROR b CallStoppedError', '5 FAILED DeadlineExceededError']);
      const events = watched!.events;
      const failed = events[events.length - 1]!;
      expect(failed.type === 'RUN_FAILED' && failed.error.message).to.include('runSeconds = 0.005s');
      expect(messageOf(events, 'b')).to.match(/runSeconds.*Safe to call again$/);
      expect(observed!.seen.signals.get('b')!.aborted).to.equal(true);
      expect(observed!.provider.requests).to.have.length(2);
      expect(observed!.runner.lanes.occupancy()).to.deep.equal([]);
    });

    it('ends every call of each batch in exactly one outcome event', () => {
      let watched: ReturnType<typeof watch> | undefined;
      testScheduler.run((helpers) => {
        watched = watch(twoTurns(helpers).runner.run$(planner, 'go'), testScheduler);
        helpers.flush();
      });
      expect(watched!.events.filter((e) => e.type === 'MODEL_RESPONSE')).to.have.length(2);
      expectOneOutcomePerCall(watched!.events);
    });
  });

  describe('perToolSeconds on the runner', () => {
    function slowCall({ cold }: RunHelpers) {
      const seen = { signals: new Map<string, AbortSignal>(), invoked: [] as string[] };
      const bodies = { s: cold('-----(s|)'), q: cold('-(q|)') };
      const provider = new ScriptedProvider([{ toolCalls: [ask('s', 'slow'), ask('q', 'search')] }, { text: 'worked around it' }]);
      const concurrency = new ConcurrencyConfig({ perToolSeconds: { slow: 0.002 } });
      const runner = new AgentRunner({ provider, tools: toolsPlaying(bodies, seen), concurrency });
      return { seen, provider, runner };
    }

    it('fails that call alone with ToolTimedOutError and the run goes on to the next model turn', () => {
      let watched: ReturnType<typeof watch> | undefined;
      let observed: ReturnType<typeof slowCall> | undefined;
      testScheduler.run((helpers) => {
        observed = slowCall(helpers);
        watched = watch(observed.runner.run$(planner, 'go'), testScheduler);
        helpers.flush();
      });
      expect(watched!.timeline).to.deep.equal(['0 START', '0 MODEL 1', '2 ERROR s ToolTimedOutError', '2 RESULT q', '2 MODEL 2', '2 COMPLETED worked around it']);
      expect(messageOf(watched!.events, 's')).to.equal('slow timed out after 0.002s (its perToolSeconds ceiling). The side effect may have landed');
      // Its own ceiling cut it off in flight: the class says what the message says, and the sibling that answered has none.
      expect(classesOf(watched!.events)).to.deep.equal([
        ['s', 'indeterminate'],
        ['q', '-'],
      ]);
      expect(observed!.seen.signals.get('s')!.aborted).to.equal(true);
      expect(observed!.seen.signals.get('q')!.aborted).to.equal(false);
      // the model saw the failure beside its sibling's result
      const toolMessages = observed!.provider.requests[1]!.messages.filter((m) => m.role === 'tool');
      expect(toolMessages.map((m) => [m.toolCallId, m.isError === true])).to.deep.equal([
        ['s', true],
        ['q', false],
      ]);
      expect(toolMessages[0]!.content).to.match(/^ToolTimedOutError: slow timed out/);
    });

    it('ends every call of the batch in exactly one outcome event', () => {
      let watched: ReturnType<typeof watch> | undefined;
      testScheduler.run((helpers) => {
        watched = watch(slowCall(helpers).runner.run$(planner, 'go'), testScheduler);
        helpers.flush();
      });
      expectOneOutcomePerCall(watched!.events);
    });
  });

  describe('what a stopped run leaves behind', () => {
    // Full collections on demand, a few turns of the loop apart so that what the last turn let
    // go of is gone: the flag set at run time, the function taken from a fresh context.
    function collector(): () => Promise<void> {
      setFlagsFromString('--expose-gc');
      const gc = runInNewContext('gc') as () => void;
      return async () => {
        for (let i = 0; i < 3; i++) {
          await new Promise((resolve) => setTimeout(resolve, 5));
          gc();
        }
      };
    }

    it('keeps nothing of a runner whose run was left from a lane watcher while a call was entering its lane', async () => {
      const gc = collector();
      let lanes: WeakRef<object> | undefined;
      await (async () => {
        const provider = new ScriptedProvider([() => Promise.resolve<ModelResponse>({ toolCalls: [ask('c1', 'search')] }), { text: 'done' }]);
        const runner = new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'search' }, () => 'x'), concurrency: new ConcurrencyConfig({ perTool: { search: 1 } }) });
        lanes = new WeakRef(runner.lanes);
        let run: Subscription | undefined;
        // Leaving on the grant tears the call down while it is still inside the lane's enter().
        const watcher = (runner.lanes as LaneTable).changes$.subscribe((change) => {
          if (change.change === 'granted' && change.key === 'tool:search') run?.unsubscribe();
        });
        await new Promise<void>((resolve) => {
          run = runner.run$(planner, 'go').subscribe({ complete: resolve });
          run.add(resolve);
        });
        watcher.unsubscribe();
        expect(runner.lanes.occupancy().filter((lane) => lane.holders > 0 || lane.waiters > 0)).to.deep.equal([]);
      })();
      await gc();
      expect(lanes!.deref(), 'the runner and its lanes were collected').to.equal(undefined);
    });

    it("keeps nothing a provider's leftover abort listener holds once the run is over", async () => {
      const gc = collector();
      let held: WeakRef<object> | undefined;
      const runner = new AgentRunner({
        provider: {
          respond: (_request: unknown, signal: AbortSignal) => {
            const payload = { rows: new Array(1000).fill('x') };
            held = new WeakRef(payload);
            signal.addEventListener('abort', () => payload.rows.length); // never removed
            return Promise.resolve<ModelResponse>({ text: 'done' });
          },
        },
        tools: new ToolRegistry(),
      });
      expect((await runner.run(planner, 'go')).status).to.equal('completed');
      await gc();
      expect(held!.deref(), 'what the listener held was collected').to.equal(undefined);
    });

    // A turn's tools read the run's own (frozen) state, not a copy: once the turn's deltas
    // replace it, nothing may keep the state they read alive. (The run's starting state is
    // its plan's, for as long as the run lives: the second turn's view is the one watched.)
    it('keeps no earlier state a turn read, once its deltas replaced it, while the run waits on its model', async () => {
      const gc = collector();
      let view: WeakRef<object> | undefined;
      let collected: unknown;
      const runner = new AgentRunner({
        provider: new ScriptedProvider([
          { toolCalls: [ask('a', 'search')] },
          { toolCalls: [ask('b', 'search')] },
          async () => {
            await gc();
            collected = view!.deref();
            return { text: 'done' };
          },
        ]),
        tools: new ToolRegistry().register({ name: 'search' }, (_args, ctx) => {
          const searched = (ctx.state.searched as number | undefined) ?? 0;
          if (searched === 1) view = new WeakRef(ctx.state);
          ctx.record({ searched: searched + 1, rows: new Array(1000).fill('x') });
          return 'x';
        }),
      });
      const result = await runner.run(planner, 'go', { state: { rows: [] } });
      expect(result.status).to.equal('completed');
      expect(result.state).to.include({ searched: 2 });
      expect(collected, 'the second turn’s view of the state was collected').to.equal(undefined);
    });

    it('run() cancelled mid-batch gives every permit back, aborts the bodies, drops its listener and clears its timers', async () => {
      const clock = sinon.useFakeTimers();
      try {
        const aborted: string[] = [];
        const body = (_args: unknown, ctx: { callId: string; signal: AbortSignal }) =>
          new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve(aborted.push(ctx.callId))));
        const runner = new AgentRunner({
          provider: new ScriptedProvider([{ toolCalls: [ask('a', 'search'), ask('b', 'search'), ask('c', 'search')] }]),
          tools: new ToolRegistry().register({ name: 'search' }, body),
          concurrency: new ConcurrencyConfig({ perTool: { search: 2 } }),
          deadline: new DeadlineConfig({ runSeconds: 60, toolCallSeconds: 30 }),
          loopStallMs: false,
        });
        const cancel = new AbortController();
        const done = runner.run(planner, 'go', { signal: cancel.signal });
        expect(runner.lanes.occupancy()).to.deep.equal([{ key: 'tool:search', limit: 2, holders: 2, waiters: 1 }]);
        cancel.abort();
        const result = await done;
        expect(result.status).to.equal('cancelled');
        expect(aborted).to.deep.equal(['a', 'b']);
        expect(runner.lanes.occupancy()).to.deep.equal([]);
        expect(getEventListeners(cancel.signal, 'abort')).to.have.length(0);
        expect(clock.countTimers(), 'the runSeconds and toolCallSeconds timers').to.equal(0);
      } finally {
        clock.restore();
      }
    });
  });
});
