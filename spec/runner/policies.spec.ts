// The runner's policies, driven end to end through AgentRunner with a ScriptedProvider:
// what a failed call does to the run (onToolError), approvals, guardrails and hooks
// (serial, in call order, a throw is a refusal), the order inside the gate, and a
// result that cannot go back to the model as JSON.
import { expect } from 'chai';
import fc from 'fast-check';
import * as t from 'io-ts';
import { map, NEVER, tap } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import sinon from 'sinon';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  OnToolError,
  ScriptedProvider,
  ToolRegistry,
  type AgentOptions,
  type Hooks,
  type PolicyCall,
  type RunEvent,
  type RunnerOptions,
  type RunResult,
  type ToolCall,
  type ToolOutcomeEvent,
} from '../../lib/index.js';
import { seed } from '../reliability/seed.js';

const agent = (extra: Partial<AgentOptions> = {}): Agent => new Agent({ name: 'planner', instructions: 'plan', model: 'test-model', ...extra });

const call = (id: string, name: string, args: Readonly<Record<string, unknown>> = {}): ToolCall => ({ id, name, arguments: JSON.stringify(args) });

/** One turn asking for `calls`, then a final answer. */
const scripted = (...calls: ToolCall[]): ScriptedProvider => new ScriptedProvider([{ toolCalls: calls }, { text: 'done' }]);

/** `start`, `turn 1`, `a=x` (result), `a!Name` (error), `a?` (indeterminate), `done:out`, `failed:Name`. */
function brief(event: RunEvent): string {
  switch (event.type) {
    case 'RUN_STARTED':
      return 'start';
    case 'MODEL_RESPONSE':
      return `turn ${event.turn}`;
    case 'TOOL_RESULT':
      return `${event.callId}=${String(event.result)}`;
    case 'TOOL_ERROR':
      return `${event.callId}!${event.error.name}`;
    case 'TOOL_INDETERMINATE':
      return `${event.callId}?`;
    case 'RUN_COMPLETED':
      return `done:${String(event.output)}`;
    case 'RUN_FAILED':
      return `failed:${event.error.name}`;
    case 'RUN_CANCELLED':
      return 'cancelled';
    case 'RUN_INTERRUPTED':
      return 'interrupted';
  }
}

const isOutcome = (event: RunEvent): event is ToolOutcomeEvent =>
  event.type === 'TOOL_RESULT' || event.type === 'TOOL_ERROR' || event.type === 'TOOL_INDETERMINATE';

/** The tool events of a run, by call id. */
function outcomesOf(result: RunResult): Record<string, ToolOutcomeEvent> {
  return Object.fromEntries(result.events.filter(isOutcome).map((event) => [event.callId, event]));
}

/** The error of a TOOL_ERROR event (fails the test for any other event). */
function errorOf(event: ToolOutcomeEvent | undefined): { name: string; message: string } {
  expect(event?.type, `expected a TOOL_ERROR, got ${JSON.stringify(event)}`).to.equal('TOOL_ERROR');
  return (event as Extract<ToolOutcomeEvent, { type: 'TOOL_ERROR' }>).error;
}

/** Runs `calls` in one turn on a runner built from `options`, to the end. */
async function runTurn(options: Omit<RunnerOptions, 'provider'>, calls: ToolCall[], agentOptions: Partial<AgentOptions> = {}) {
  const provider = scripted(...calls);
  const result = await new AgentRunner({ provider, ...options }).run(agent(agentOptions), 'go');
  return { provider, result, outcomes: outcomesOf(result) };
}

/** A time span of something async, recorded with the (fake) clock. */
interface Span {
  readonly id: string;
  readonly start: number;
  readonly end: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function timed(spans: Span[], id: string, ms: number): Promise<void> {
  const start = Date.now();
  await sleep(ms);
  spans.push({ id, start, end: Date.now() });
}

/** The spans came one at a time (none started before the previous ended), in the order `ids`. */
function expectSerialInOrder(spans: readonly Span[], ids: readonly string[]): void {
  const byStart = [...spans].sort((a, b) => a.start - b.start);
  expect(byStart.map((span) => span.id)).to.deep.equal(ids);
  for (let i = 1; i < byStart.length; i++) {
    expect(byStart[i]!.start, `${byStart[i]!.id} started before ${byStart[i - 1]!.id} ended`).to.be.at.least(byStart[i - 1]!.end);
  }
}

// Three calls whose async steps take 30, 20 and 10ms: done at once, they would end in reverse.
const delays: Readonly<Record<string, number>> = { a: 30, b: 20, c: 10 };
const abc = ['a', 'b', 'c'];

describe('AgentRunner policies', () => {
  describe('onToolError', () => {
    it('SURFACE_TO_MODEL (the default) keeps the siblings\' results, sends the failure to the model as an error message, and goes on to the next turn', async () => {
      const tools = new ToolRegistry()
        .register({ name: 'lookup' }, (_args, ctx) => `found ${ctx.callId}`)
        .register({ name: 'broken' }, () => {
          throw new Error('upstream 500');
        });
      const { provider, result } = await runTurn({ tools }, [call('a', 'lookup'), call('b', 'broken'), call('c', 'lookup')]);
      expect(result.events.map(brief)).to.deep.equal(['start', 'turn 1', 'a=found a', 'b!Error', 'c=found c', 'turn 2', 'done:done']);
      expect(provider.requests).to.have.length(2);
      const toolMessages = provider.requests[1]!.messages.filter((message) => message.role === 'tool');
      expect(toolMessages).to.deep.equal([
        { role: 'tool', toolCallId: 'a', content: 'found a' },
        { role: 'tool', toolCallId: 'b', content: 'Error: upstream 500', isError: true },
        { role: 'tool', toolCallId: 'c', content: 'found c' },
      ]);
    });

    it('FAIL_RUN ends the run at the failure with its error, classifies the siblings it stopped, and asks for no further turn', () => {
      const testScheduler = new TestScheduler((actual, expected) => {
        expect(actual).to.deep.equal(expected);
      });
      const events: RunEvent[] = [];
      let provider: ScriptedProvider | undefined;
      testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
        const write$ = cold('----------(w|)');
        const read$ = cold('----------(r|)');
        const boom$ = cold('-----#', undefined, new Error('disk full'));
        const queued$ = cold('-(q|)');
        const tools = new ToolRegistry()
          .register({ name: 'write' }, () => write$)
          .register({ name: 'read', idempotent: true }, () => read$)
          .register({ name: 'boom' }, () => boom$)
          .register({ name: 'queued' }, () => queued$);
        provider = scripted(call('w', 'write'), call('r', 'read'), call('b', 'boom'), call('q', 'queued'));
        // Three at a time: q waits in the turn lane behind the other three.
        const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ maxConcurrentTools: 3 }) });
        const run$ = runner.run$(agent({ onToolError: OnToolError.FAIL_RUN }), 'go').pipe(
          tap((event) => events.push(event)),
          map(brief),
        );
        // (ab) fills frames 0-3; b fails at frame 5, and everything else ends with it.
        expectObservable(run$).toBe('(ab)-(cdefg|)', {
          a: 'start',
          b: 'turn 1',
          c: 'w?',
          d: 'r!CallStoppedError',
          e: 'b!Error',
          f: 'q!CallStoppedError',
          g: 'failed:Error',
        });
        expectSubscriptions(write$.subscriptions).toBe('^----!');
        expectSubscriptions(read$.subscriptions).toBe('^----!');
        expectSubscriptions(boom$.subscriptions).toBe('^----!');
        expectSubscriptions(queued$.subscriptions).toBe([]);
      });
      const byId = Object.fromEntries(events.filter(isOutcome).map((event) => [event.callId, event]));
      expect(byId['w']).to.include({ type: 'TOOL_INDETERMINATE' });
      expect(errorOf(byId['r']).message).to.match(/Safe to call again$/);
      expect(errorOf(byId['b'])).to.deep.equal({ name: 'Error', message: 'disk full' });
      expect(errorOf(byId['q']).message).to.match(/^never dispatched:/);
      expect(events[events.length - 1]).to.deep.equal({ type: 'RUN_FAILED', error: { name: 'Error', message: 'disk full' } });
      expect(provider!.requests).to.have.length(1);
    });
  });

  describe('approve', () => {
    const body = () => sinon.spy((_args: unknown, ctx: { callId: string }) => `ran ${ctx.callId}`);

    it('is asked only about calls to tools declared needsApproval', async () => {
      const approve = sinon.spy((_call: PolicyCall) => true);
      const tools = new ToolRegistry().register({ name: 'look' }, () => 'seen').register({ name: 'pay', needsApproval: true }, () => 'paid');
      const { result } = await runTurn({ tools, approve }, [call('a', 'look'), call('b', 'pay', { eur: 5 }), call('c', 'look'), call('d', 'pay')]);
      expect(approve.args.map(([asked]) => asked.callId)).to.deep.equal(['b', 'd']);
      expect(approve.firstCall.args[0]).to.include({ tool: 'pay', tenant: 'default' });
      expect(approve.firstCall.args[0].args).to.deep.equal({ eur: 5 });
      expect(result.events.filter(isOutcome).map(brief)).to.deep.equal(['a=seen', 'b=paid', 'c=seen', 'd=paid']);
    });

    describe('in time', () => {
      let clock: sinon.SinonFakeTimers;
      beforeEach(() => {
        clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
      });
      afterEach(() => clock.restore());

      it('asks one call at a time, in call order, while the approved calls already run side by side', async () => {
        const approvals: Span[] = [];
        const bodies: Span[] = [];
        const tools = new ToolRegistry().register({ name: 'pay', needsApproval: true }, async (_args, ctx) => {
          await timed(bodies, ctx.callId, 100);
          return 'paid';
        });
        const approve = async ({ callId }: PolicyCall) => {
          await timed(approvals, callId, delays[callId]!);
          return true;
        };
        const provider = scripted(...abc.map((id) => call(id, 'pay')));
        const done = new AgentRunner({ provider, tools, approve }).run(agent(), 'go');
        await clock.runAllAsync();
        const result = await done;
        expectSerialInOrder(approvals, abc);
        expect(result.events.filter(isOutcome).map(brief)).to.deep.equal(['a=paid', 'b=paid', 'c=paid']);
        // a was already running while c was being asked about, and no body waited for another.
        const [bodyA] = bodies.filter((span) => span.id === 'a');
        expect(bodyA!.start).to.be.below(approvals[approvals.length - 1]!.end);
        const firstEnd = Math.min(...bodies.map((span) => span.end));
        for (const span of bodies) expect(span.start, `${span.id} waited for another body`).to.be.below(firstEnd);
      });
    });

    const denials: ReadonlyArray<{ title: string; approve: (call: PolicyCall) => boolean | Promise<boolean>; message: string }> = [
      { title: 'answers false', approve: () => false, message: 'approval rejected the call: not approved' },
      {
        title: 'throws',
        approve: () => {
          throw new Error('approver offline');
        },
        message: 'approval rejected the call: approver offline',
      },
      { title: 'rejects', approve: () => Promise.reject(new Error('approver offline')), message: 'approval rejected the call: approver offline' },
    ];
    for (const { title, approve, message } of denials) {
      it(`denies a call, without dispatching it, when approve ${title}`, async () => {
        const pay = body();
        const look = body();
        const tools = new ToolRegistry().register({ name: 'pay', needsApproval: true }, pay).register({ name: 'look' }, look);
        const { outcomes } = await runTurn({ tools, approve }, [call('p', 'pay'), call('l', 'look')]);
        expect(errorOf(outcomes['p'])).to.deep.equal({ name: 'ToolRejectedError', message });
        expect(pay.called).to.equal(false);
        expect(outcomes['l']).to.include({ type: 'TOOL_RESULT', result: 'ran l' });
      });
    }

    it('leaves a needsApproval call to a person when the runner has no approve policy: the run ends interrupted, the call not dispatched', async () => {
      const pay = body();
      const tools = new ToolRegistry().register({ name: 'pay', needsApproval: true }, pay);
      const { result } = await runTurn({ tools }, [call('p', 'pay')]);
      expect(result.status).to.equal('interrupted');
      expect(result.status === 'interrupted' ? result.pending : []).to.deep.equal([{ callId: 'p', tool: 'pay', args: {} }]);
      expect(pay.called).to.equal(false);
    });
  });

  describe('guardrails', () => {
    it('input: a string refuses the call with that reason, without dispatching it', async () => {
      const search = sinon.spy((args: { q: string }) => `results for ${args.q}`);
      const tools = new ToolRegistry().register({ name: 'search', args: t.type({ q: t.string }) }, search);
      const input = ({ args }: PolicyCall) => ((args as { q: string }).q.includes('@') ? 'no e-mail addresses in searches' : undefined);
      const { outcomes } = await runTurn({ tools, guardrails: { input } }, [call('a', 'search', { q: 'bob@example.com' }), call('b', 'search', { q: 'lisbon' })]);
      expect(errorOf(outcomes['a'])).to.deep.equal({ name: 'ToolRejectedError', message: 'input guardrail rejected the call: no e-mail addresses in searches' });
      expect(search.args.map(([args]) => args)).to.deep.equal([{ q: 'lisbon' }]);
      expect(outcomes['b']).to.include({ type: 'TOOL_RESULT', result: 'results for lisbon' });
    });

    it('output: a string turns the result into a TOOL_ERROR with that reason', async () => {
      const read = sinon.spy((_args: unknown, ctx: { callId: string }) => (ctx.callId === 'a' ? 'password=hunter2' : 'weather: sunny'));
      const tools = new ToolRegistry().register({ name: 'read' }, read);
      const output = (_call: PolicyCall, result: unknown) => (String(result).includes('password') ? 'leaks a secret' : undefined);
      const { provider, outcomes } = await runTurn({ tools, guardrails: { output } }, [call('a', 'read'), call('b', 'read')]);
      expect(read.callCount).to.equal(2);
      expect(errorOf(outcomes['a'])).to.deep.equal({ name: 'ToolRejectedError', message: 'output guardrail rejected the call: leaks a secret' });
      expect(outcomes['b']).to.include({ type: 'TOOL_RESULT', result: 'weather: sunny' });
      const sent = provider.requests[1]!.messages.find((message) => message.toolCallId === 'a');
      expect(sent).to.include({ isError: true });
      expect(sent?.content).not.to.include('hunter2');
    });

    it('receive the run, the call, the tool, the decoded arguments and the tenant', async () => {
      const seen: Array<{ rail: string; call: PolicyCall; result?: unknown }> = [];
      const tools = new ToolRegistry().register({ name: 'search', args: t.exact(t.type({ q: t.string })) }, ({ q }) => q.toUpperCase());
      const guardrails = {
        input: (policyCall: PolicyCall) => void seen.push({ rail: 'input', call: policyCall }),
        output: (policyCall: PolicyCall, result: unknown) => void seen.push({ rail: 'output', call: policyCall, result }),
      };
      const provider = scripted(call('c1', 'search', { q: 'lisbon', stray: true }));
      const result = await new AgentRunner({ provider, tools, guardrails }).run(agent(), 'go', { tenant: 'acme' });
      const started = result.events[0]!;
      expect(started.type).to.equal('RUN_STARTED');
      const runId = started.type === 'RUN_STARTED' ? started.runId : '';
      // The exact codec strips `stray`: the guardrails see the decoded arguments, not the model's text.
      const expected: PolicyCall = { runId, callId: 'c1', tool: 'search', args: { q: 'lisbon' }, tenant: 'acme' };
      expect(seen).to.deep.equal([
        { rail: 'input', call: expected },
        { rail: 'output', call: expected, result: 'LISBON' },
      ]);
    });
  });

  describe('hooks', () => {
    // Most tests set both hooks (each replaces the one it watches), so they do not depend on
    // onToolEnd firing without onToolStart, which the first test checks on its own.
    const bothHooks: Hooks = { onToolStart: () => {}, onToolEnd: () => {} };

    it('calls onToolEnd for every call also when no onToolStart hook is set', async () => {
      const ended: string[] = [];
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => 'found');
      const hooks: Hooks = { onToolEnd: ({ callId }, event) => void ended.push(`${callId} ${event.type}`) };
      await runTurn({ tools, hooks }, [call('a', 'lookup'), call('b', 'lookup')]);
      expect(ended).to.deep.equal(['a TOOL_RESULT', 'b TOOL_RESULT']);
    });

    describe('in time', () => {
      let clock: sinon.SinonFakeTimers;
      beforeEach(() => {
        clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
      });
      afterEach(() => clock.restore());

      for (const hook of ['onToolStart', 'onToolEnd'] as const) {
        it(`awaits ${hook} one call at a time, in call order`, async () => {
          const spans: Span[] = [];
          // Bodies finish in reverse call order, so call order is not finish order.
          const tools = new ToolRegistry().register({ name: 'lookup' }, async (_args, ctx) => {
            await sleep(delays[ctx.callId]!);
            return ctx.callId;
          });
          const hooks = { ...bothHooks, [hook]: (policyCall: PolicyCall) => timed(spans, policyCall.callId, delays[policyCall.callId]!) };
          const provider = scripted(...abc.map((id) => call(id, 'lookup')));
          const done = new AgentRunner({ provider, tools, hooks }).run(agent(), 'go');
          await clock.runAllAsync();
          const result = await done;
          expectSerialInOrder(spans, abc);
          expect(result.events.filter(isOutcome).map(brief)).to.deep.equal(['a=a', 'b=b', 'c=c']);
        });
      }
    });

    it('hands onToolEnd the outcome event of each call, as the transcript has it', async () => {
      const ended: Array<{ callId: string; event: ToolOutcomeEvent }> = [];
      const tools = new ToolRegistry()
        .register({ name: 'quick' }, () => 'fine')
        .register({ name: 'slow' }, () => NEVER)
        .register({ name: 'boom' }, () => {
          throw new TypeError('bad input');
        });
      const hooks = { ...bothHooks, onToolEnd: (policyCall: PolicyCall, event: ToolOutcomeEvent) => void ended.push({ callId: policyCall.callId, event }) };
      // FAIL_RUN stops `slow` in flight when `boom` fails: one of each outcome.
      const { result } = await runTurn({ tools, hooks }, [call('q', 'quick'), call('s', 'slow'), call('b', 'boom')], { onToolError: OnToolError.FAIL_RUN });
      expect(ended.map(({ callId }) => callId)).to.deep.equal(['q', 's', 'b']);
      const [quick, slow, boom] = ended.map(({ event }) => event);
      expect(quick).to.deep.equal({ type: 'TOOL_RESULT', turn: 1, callId: 'q', tool: 'quick', result: 'fine' });
      expect(slow).to.have.all.keys('type', 'turn', 'callId', 'tool', 'message', 'stopClass');
      expect(slow).to.include({ type: 'TOOL_INDETERMINATE', turn: 1, callId: 's', tool: 'slow', stopClass: 'indeterminate' });
      expect(boom).to.deep.equal({ type: 'TOOL_ERROR', turn: 1, callId: 'b', tool: 'boom', error: { name: 'TypeError', message: 'bad input' } });
      expect(ended.map(({ event }) => event)).to.deep.equal(result.events.filter(isOutcome));
    });

    const throwing: ReadonlyArray<{ hook: 'onToolStart' | 'onToolEnd'; dispatched: boolean }> = [
      { hook: 'onToolStart', dispatched: false },
      { hook: 'onToolEnd', dispatched: true },
    ];
    for (const { hook, dispatched } of throwing) {
      it(`treats a throwing ${hook} as a refusal with its message${dispatched ? '' : ', and does not dispatch the call'}`, async () => {
        const lookup = sinon.spy((_args: unknown, ctx: { callId: string }) => `ran ${ctx.callId}`);
        const tools = new ToolRegistry().register({ name: 'lookup' }, lookup);
        const hooks = {
          ...bothHooks,
          [hook]: (policyCall: PolicyCall) => {
            if (policyCall.callId === 'a') throw new Error('audit log unreachable');
          },
        };
        const { outcomes } = await runTurn({ tools, hooks }, [call('a', 'lookup'), call('b', 'lookup')]);
        expect(errorOf(outcomes['a'])).to.deep.equal({ name: 'ToolRejectedError', message: `${hook} hook rejected the call: audit log unreachable` });
        expect(lookup.args.map(([, ctx]) => ctx.callId)).to.deep.equal(dispatched ? ['a', 'b'] : ['b']);
        expect(outcomes['b']).to.include({ type: 'TOOL_RESULT', result: 'ran b' });
      });
    }
  });

  describe('the gate', () => {
    it('runs onToolStart, then the input guardrail, then approval; a call the guardrail refuses never reaches approve', async () => {
      const log: string[] = [];
      const tools = new ToolRegistry().register({ name: 'pay', needsApproval: true }, () => 'paid');
      const { outcomes } = await runTurn(
        {
          tools,
          hooks: { onToolStart: ({ callId }) => void log.push(`start ${callId}`) },
          guardrails: {
            input: ({ callId }) => {
              log.push(`input ${callId}`);
              return callId === 'b' ? 'over the limit' : undefined;
            },
          },
          approve: ({ callId }) => {
            log.push(`approve ${callId}`);
            return true;
          },
        },
        [call('a', 'pay'), call('b', 'pay')],
      );
      expect(log).to.deep.equal(['start a', 'input a', 'approve a', 'start b', 'input b']);
      expect(outcomes['a']).to.include({ type: 'TOOL_RESULT', result: 'paid' });
      expect(errorOf(outcomes['b']).message).to.equal('input guardrail rejected the call: over the limit');
    });
  });

  describe('which steps may overlap', () => {
    // The gate steps (onToolStart, input guardrail, approve) are one kind, the settle steps
    // (output guardrail, onToolEnd) another: within a batch each kind runs one step at a time,
    // in call order; the two kinds run side by side.

    /** A promise and the function that settles it, for steps a test holds open. */
    function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
      let resolve!: (value: T) => void;
      const promise = new Promise<T>((r) => (resolve = r));
      return { promise, resolve };
    }

    /** Resolves after `n` turns of the microtask queue: a delay with no clock. */
    async function hops(n: number): Promise<void> {
      for (let i = 0; i < n; i++) await undefined;
    }

    type Kind = 'gate' | 'settle';
    interface Entry {
      readonly kind: Kind;
      readonly step: string;
      readonly callId: string;
      readonly at: 'enter' | 'exit';
    }

    /** Steps that log when they enter and exit; a delay of 0 answers synchronously. */
    function stepLog() {
      const entries: Entry[] = [];
      const active: Record<Kind, number> = { gate: 0, settle: 0 };
      const peak: Record<Kind, number> = { gate: 0, settle: 0 };
      function step<T>(kind: Kind, name: string, callId: string, delay: number, value: T): T | Promise<T> {
        entries.push({ kind, step: name, callId, at: 'enter' });
        peak[kind] = Math.max(peak[kind], ++active[kind]);
        const exit = (): T => {
          active[kind]--;
          entries.push({ kind, step: name, callId, at: 'exit' });
          return value;
        };
        return delay === 0 ? exit() : hops(delay).then(exit);
      }
      return { entries, peak, step };
    }

    const worldCall = fc.record({
      tool: fc.constantFrom('lookup', 'book', 'write'),
      body: fc.nat({ max: 8 }),
      fails: fc.boolean(),
      start: fc.nat({ max: 4 }),
      input: fc.nat({ max: 4 }),
      approve: fc.nat({ max: 4 }),
      output: fc.nat({ max: 4 }),
      end: fc.nat({ max: 4 }),
    });

    it('runs the steps of each kind one at a time and in call order, and a call\'s gate before its settle (property)', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(worldCall, { minLength: 1, maxLength: 6 }), async (world) => {
          const { entries, peak, step } = stepLog();
          const at = (callId: string) => world[Number(callId.slice(1))]!;
          const body = async (_args: unknown, ctx: { callId: string }) => {
            const { body: delay, fails } = at(ctx.callId);
            await hops(delay);
            if (fails) throw new Error(`${ctx.callId} failed`);
            return ctx.callId;
          };
          const tools = new ToolRegistry()
            .register({ name: 'lookup' }, body)
            .register({ name: 'book', needsApproval: true }, body)
            .register({ name: 'write', parallelSafe: false }, body);
          const runner = new AgentRunner({
            provider: scripted(...world.map((c, i) => call(`c${i}`, c.tool))),
            tools,
            hooks: {
              onToolStart: ({ callId }) => step('gate', 'start', callId, at(callId).start, undefined),
              onToolEnd: ({ callId }) => step('settle', 'end', callId, at(callId).end, undefined),
            },
            guardrails: {
              input: ({ callId }) => step('gate', 'input', callId, at(callId).input, undefined),
              output: ({ callId }) => step('settle', 'output', callId, at(callId).output, undefined),
            },
            approve: ({ callId }) => step('gate', 'approve', callId, at(callId).approve, true),
          });
          const result = await runner.run(agent(), 'go');
          expect(result.status).to.equal('completed');
          expect(peak, 'steps of one kind at once').to.deep.equal({ gate: 1, settle: 1 });
          const entered = (kind: Kind) => entries.filter((e) => e.kind === kind && e.at === 'enter').map((e) => `${e.step} ${e.callId}`);
          const ids = world.map((_c, i) => `c${i}`);
          expect(entered('gate')).to.deep.equal(ids.flatMap((id) => [`start ${id}`, `input ${id}`, ...(at(id).tool === 'book' ? [`approve ${id}`] : [])]));
          expect(entered('settle')).to.deep.equal(ids.flatMap((id) => [...(at(id).fails ? [] : [`output ${id}`]), `end ${id}`]));
          for (const id of ids) {
            const lastGate = entries.map((e) => e.kind === 'gate' && e.callId === id).lastIndexOf(true);
            const firstSettle = entries.findIndex((e) => e.kind === 'settle' && e.callId === id);
            expect(lastGate, `${id}: its gate steps were over before its settle steps began`).to.be.below(firstSettle);
          }
        }),
        { numRuns: 200, seed },
      );
    });

    it('does not hold back the end hooks and results of earlier calls behind a slow approval of a later one', async () => {
      const approval = deferred<boolean>();
      const log: string[] = [];
      const tools = new ToolRegistry()
        .register({ name: 'lookup' }, async (_args, ctx) => (await hops(3), ctx.callId))
        .register({ name: 'book', needsApproval: true }, () => 'booked');
      const events: RunEvent[] = [];
      const runner = new AgentRunner({
        provider: scripted(call('a', 'lookup'), call('b', 'lookup'), call('c', 'book')),
        tools,
        approve: ({ callId }) => (log.push(`approve ${callId}`), approval.promise),
        hooks: { onToolEnd: ({ callId }) => void log.push(`end ${callId}`) },
      });
      const done = new Promise<void>((resolve) => runner.run$(agent(), 'go').subscribe({ next: (e) => events.push(e), complete: resolve }));
      await hops(10);
      // c's approval is still open: a and b have ended, and their results are out.
      expect(log).to.deep.equal(['approve c', 'end a', 'end b']);
      expect(events.filter(isOutcome).map(brief)).to.deep.equal(['a=a', 'b=b']);
      approval.resolve(true);
      await done;
      expect(log).to.deep.equal(['approve c', 'end a', 'end b', 'end c']);
      expect(events.filter(isOutcome).map(brief)).to.deep.equal(['a=a', 'b=b', 'c=booked']);
    });

    it('does not hold back the gate and dispatch of a later phase behind a slow end hook of an earlier call', async () => {
      const ended = deferred();
      const log: string[] = [];
      const tools = new ToolRegistry()
        .register({ name: 'write', parallelSafe: false }, () => (log.push('body w'), 'written'))
        .register({ name: 'lookup' }, () => (log.push('body l'), 'found'));
      const runner = new AgentRunner({
        provider: scripted(call('w', 'write'), call('l', 'lookup')),
        tools,
        hooks: {
          onToolStart: ({ callId }) => void log.push(`start ${callId}`),
          onToolEnd: ({ callId }) => (log.push(`end ${callId}`), callId === 'w' ? ended.promise : undefined),
        },
      });
      const done = runner.run(agent(), 'go');
      await hops(10);
      // w's end hook is still open; l, in the next phase, has passed the gate and run.
      expect(log).to.deep.equal(['start w', 'body w', 'end w', 'start l', 'body l']);
      ended.resolve();
      const result = await done;
      expect(log).to.deep.equal(['start w', 'body w', 'end w', 'start l', 'body l', 'end l']);
      expect(result.events.filter(isOutcome).map(brief)).to.deep.equal(['w=written', 'l=found']);
    });

    it('holds back a later call\'s end hook behind an earlier call\'s, whichever finished first', async () => {
      const first = deferred();
      const log: string[] = [];
      const tools = new ToolRegistry().register({ name: 'lookup' }, async (_args, ctx) => (ctx.callId === 'a' ? (await hops(5), 'A') : 'B'));
      const runner = new AgentRunner({
        provider: scripted(call('a', 'lookup'), call('b', 'lookup')),
        tools,
        hooks: { onToolEnd: ({ callId }) => (log.push(`end ${callId}`), callId === 'a' ? first.promise.then(() => void log.push('end a done')) : undefined) },
      });
      const done = runner.run(agent(), 'go');
      await hops(20);
      expect(log).to.deep.equal(['end a']);
      first.resolve();
      await done;
      expect(log).to.deep.equal(['end a', 'end a done', 'end b']);
    });

    it('lets a stop abandon a gate step in progress: the call ends never dispatched, its late answer ignored', async () => {
      const approval = deferred<boolean>();
      const log: string[] = [];
      const booked = sinon.spy(() => 'booked');
      const tools = new ToolRegistry()
        .register({ name: 'lookup' }, async () => (await hops(3), 'found'))
        .register({ name: 'book', needsApproval: true }, booked);
      const controller = new AbortController();
      const runner = new AgentRunner({
        provider: scripted(call('a', 'lookup'), call('b', 'book'), call('c', 'lookup')),
        tools,
        approve: ({ callId }) => (log.push(`approve ${callId}`), approval.promise.then((answer) => (log.push(`approved ${callId}`), answer))),
        hooks: {
          onToolStart: ({ callId }) => void log.push(`start ${callId}`),
          onToolEnd: ({ callId }, event) => void log.push(`end ${callId} ${event.type}`),
        },
      });
      const done = runner.run(agent(), 'go', { signal: controller.signal });
      await hops(10);
      controller.abort('user left');
      const result = await done;
      // b's end hook ran while its approval was still open, and c never reached the gate.
      expect(log).to.deep.equal(['start a', 'start b', 'approve b', 'end a TOOL_RESULT', 'end b TOOL_ERROR', 'end c TOOL_ERROR']);
      approval.resolve(true);
      await hops(10);
      expect(log[log.length - 1]).to.equal('approved b');
      expect(booked.called).to.equal(false);
      expect(result.events.filter(isOutcome).map(brief)).to.deep.equal(['a=found', 'b!CallStoppedError', 'c!CallStoppedError']);
    });

    it('keeps runs apart: a slow approval in one run holds back no step of another run on the same runner', async () => {
      const approval = deferred<boolean>();
      const log: string[] = [];
      const tools = new ToolRegistry().register({ name: 'book', needsApproval: true }, (_args, ctx) => `booked ${ctx.callId}`);
      const runner = new AgentRunner({
        provider: new ScriptedProvider({ slow: [{ toolCalls: [call('s', 'book')] }, { text: 'done' }], quick: [{ toolCalls: [call('q', 'book')] }, { text: 'done' }] }),
        tools,
        approve: ({ callId }) => (log.push(`approve ${callId}`), callId === 's' ? approval.promise : true),
        hooks: { onToolEnd: ({ callId }) => void log.push(`end ${callId}`) },
      });
      const slow = runner.run(new Agent({ name: 'slow', instructions: '', model: 'm' }), 'go');
      const quick = await runner.run(new Agent({ name: 'quick', instructions: '', model: 'm' }), 'go');
      expect(quick.status).to.equal('completed');
      expect(log).to.deep.equal(['approve s', 'approve q', 'end q']);
      approval.resolve(true);
      expect((await slow).status).to.equal('completed');
      expect(log).to.deep.equal(['approve s', 'approve q', 'end q', 'end s']);
    });
  });

  describe('results the model cannot read', () => {
    it('fails a call whose result is circular with a clear TOOL_ERROR, keeping its siblings\' results', async () => {
      const tools = new ToolRegistry()
        .register({ name: 'graph' }, () => {
          const node: Record<string, unknown> = { id: 1 };
          node['self'] = node;
          return node;
        })
        .register({ name: 'lookup' }, (_args, ctx) => `found ${ctx.callId}`);
      const { provider, result, outcomes } = await runTurn({ tools }, [call('a', 'lookup'), call('g', 'graph'), call('c', 'lookup')]);
      const error = errorOf(outcomes['g']);
      expect(error.name).to.equal('ToolResultError');
      expect(error.message).to.match(/^the result of graph cannot be sent to the model as JSON \(.*circular/i);
      expect(outcomes['a']).to.include({ type: 'TOOL_RESULT', result: 'found a' });
      expect(outcomes['c']).to.include({ type: 'TOOL_RESULT', result: 'found c' });
      expect(provider.requests[1]!.messages.find((message) => message.toolCallId === 'g')).to.include({ isError: true });
      expect(result.status).to.equal('completed');
    });
  });
});
