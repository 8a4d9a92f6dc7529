// Runs that wait for a person: a call that needs approval, in a runner that defers it (no approve
// policy, or one answering 'defer'), holds no permit and keeps its run from nothing else the
// order rules allow; the run ends interrupted with its pending calls and a plain JSON snapshot,
// and runner.resume goes on with it in any runner with the same agent and tools.
import { expect } from 'chai';
import fc from 'fast-check';
import { from, map } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import sinon from 'sinon';
import { Agent, AgentRunner, ConcurrencyConfig, OnToolError, ScriptedProvider, ToolRegistry, type ModelStreamPart, type RunEvent, type RunnerOptions, type RunResult, type ScriptStep, type ToolCall } from '../../lib/index.js';
import { seed } from '../reliability/seed.js';
import { toolsWithSpies } from './approvalTools.js';
import { summary } from './summary.js';

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });
const call = (id: string, name: string, args: Readonly<Record<string, unknown>> = {}): ToolCall => ({ id, name, arguments: JSON.stringify(args) });

const withoutIds = (events: readonly RunEvent[]) => events.map((event) => (event.type === 'RUN_STARTED' ? { ...event, runId: '' } : event));
const script = (...turns: ToolCall[][]): ScriptStep[] => [...turns.map((toolCalls) => ({ toolCalls })), { text: 'done' }];
const runnerWith = (tools: ToolRegistry, steps: ScriptStep[], extra: Partial<RunnerOptions> = {}) => new AgentRunner({ provider: new ScriptedProvider(steps), tools, ...extra });
const interruptedOf = (result: RunResult) => {
  if (result.status !== 'interrupted') throw new Error(`expected an interrupted run, got ${result.status}`);
  return result;
};

describe('interrupts', () => {
  const turn1 = [call('a', 'lookup', { q: 'lisbon' }), call('b', 'book', { room: 7 }), call('c', 'lookup', { q: 'porto' })];

  it('without an approve policy, runs every call that needs none and ends interrupted, the booking pending', async () => {
    const { tools, lookup, book } = toolsWithSpies();
    const runner = runnerWith(tools, script(turn1));
    const result = interruptedOf(await runner.run(agent, 'go'));
    expect(book.called).to.equal(false);
    expect(lookup.callCount).to.equal(2);
    expect(result.pending).to.deep.equal([{ callId: 'b', tool: 'book', args: { room: 7 } }]);
    // Outcomes after the waiting call are held: the transcript goes on from b when resumed.
    expect(result.events.map(summary)).to.deep.equal(['START', 'MODEL 1', 'RESULT a', 'INTERRUPTED b']);
    expect(JSON.parse(JSON.stringify(result.snapshot))).to.deep.equal(result.snapshot);
    expect(result.snapshot).to.include({ format: 'agent-lanes/run-snapshot', version: 1, tenant: 'default', turn: 1, agent: 'planner' });
    expect(result.snapshot.calls.map((c) => c.status)).to.deep.equal(['told', 'approval', 'settled']);
    // No permit is held while the run waits: it has ended.
    expect(runner.lanes.occupancy().filter((lane) => lane.holders > 0 || lane.waiters > 0)).to.deep.equal([]);
  });

  it('resumed in another runner, runs the approved booking once and no lookup again; the transcript is the in-process one', async () => {
    const first = toolsWithSpies();
    const interrupted = interruptedOf(await runnerWith(first.tools, script(turn1)).run(agent, 'go'));
    const second = toolsWithSpies();
    const provider = new ScriptedProvider([{ text: 'done' }]);
    const resumed = await new AgentRunner({ provider, tools: second.tools }).resume(agent, interrupted.snapshot, { approvals: { b: true } });
    expect(second.book.callCount).to.equal(1);
    expect(second.lookup.called).to.equal(false);
    expect(resumed.events.map(summary)).to.deep.equal(['RESULT b', 'RESULT c', 'MODEL 2', 'COMPLETED done']);
    const approved = await runnerWith(toolsWithSpies().tools, script(turn1), { approve: () => true }).run(agent, 'go');
    expect(withoutIds([...interrupted.events.slice(0, -1), ...resumed.events])).to.deep.equal(withoutIds(approved.events));
    expect(resumed.messages).to.deep.equal(approved.messages);
    expect(resumed.state).to.deep.equal({ booked: 7 });
    expect(provider.requests[0]!.messages).to.deep.equal(approved.messages.slice(0, -1));
  });

  it('turns a refusal into the call\'s TOOL_ERROR, with the reason the model reads', async () => {
    const { tools } = toolsWithSpies();
    const interrupted = interruptedOf(await runnerWith(tools, script(turn1)).run(agent, 'go'));
    const provider = new ScriptedProvider([{ text: 'done' }]);
    const { tools: again, book } = toolsWithSpies();
    const resumed = await new AgentRunner({ provider, tools: again }).resume(agent, interrupted.snapshot, { approvals: { b: { approved: false, reason: 'over budget' } } });
    expect(book.called).to.equal(false);
    const error = resumed.events.find((e) => e.type === 'TOOL_ERROR');
    expect(error).to.deep.include({ callId: 'b', error: { name: 'ToolRejectedError', message: 'approval rejected the call: over budget' } });
    expect(provider.requests[0]!.messages.find((m) => m.toolCallId === 'b')).to.deep.include({ isError: true, content: 'ToolRejectedError: approval rejected the call: over budget' });
    expect(resumed.status).to.equal('completed');
  });

  it('defers the calls an approve policy answers \'defer\' for, and runs those it approves', async () => {
    const { tools, book } = toolsWithSpies();
    const approve = sinon.spy((c: { callId: string }) => (c.callId === 'b2' ? 'defer' : true) as boolean | 'defer');
    const runner = runnerWith(tools, script([call('b1', 'book', { room: 1 }), call('b2', 'book', { room: 2 })]), { approve });
    const result = interruptedOf(await runner.run(agent, 'go'));
    expect(book.callCount).to.equal(1);
    expect(result.pending.map((p) => p.callId)).to.deep.equal(['b2']);
    const resumed = await runner.resume(agent, result.snapshot, { approvals: { b2: true } });
    expect(book.callCount).to.equal(2);
    // The approved call is not asked about again.
    expect(approve.callCount).to.equal(2);
    expect(resumed.status).to.equal('completed');
  });

  it('holds the calls of later phases behind a waiting call, unasked and not run, and runs them on resume in order', async () => {
    const { tools, lookup, audit, book } = toolsWithSpies();
    const onToolStart = sinon.spy();
    const turn = [call('b', 'book', { room: 1 }), call('c', 'lookup', { q: 'x' }), call('s', 'audit'), call('d', 'lookup', { q: 'y' })];
    const runner = runnerWith(tools, script(turn), { hooks: { onToolStart } });
    const result = interruptedOf(await runner.run(agent, 'go'));
    expect(lookup.callCount).to.equal(1); // c shares b's phase; s and d come after it
    expect(audit.called).to.equal(false);
    expect(onToolStart.getCalls().map((c) => (c.args[0] as { callId: string }).callId)).to.deep.equal(['b', 'c']);
    expect(result.snapshot.calls.map((c) => c.status)).to.deep.equal(['approval', 'settled', 'held', 'held']);
    book.resetHistory();
    audit.resetHistory();
    const resumed = await runner.resume(agent, result.snapshot, { approvals: { b: true } });
    expect(book.calledBefore(audit)).to.equal(true);
    expect(audit.callCount).to.equal(1);
    expect(lookup.callCount).to.equal(2);
    expect(onToolStart.getCalls().map((c) => (c.args[0] as { callId: string }).callId)).to.deep.equal(['b', 'c', 's', 'd']);
    expect(resumed.events.map(summary)).to.deep.equal(['RESULT b', 'RESULT c', 'RESULT s', 'RESULT d', 'MODEL 2', 'COMPLETED done']);
  });

  it('may be interrupted again on resume, in a later turn, and goes on to the end', async () => {
    const { tools, book } = toolsWithSpies();
    const runner = runnerWith(tools, script([call('b1', 'book', { room: 1 })], [call('b2', 'book', { room: 2 })]));
    const first = interruptedOf(await runner.run(agent, 'go'));
    const second = interruptedOf(await runner.resume(agent, first.snapshot, { approvals: { b1: true } }));
    expect(second.snapshot.turn).to.equal(2);
    expect(second.events.map(summary)).to.deep.equal(['RESULT b1', 'MODEL 2', 'INTERRUPTED b2']);
    const third = await runner.resume(agent, second.snapshot, { approvals: { b2: true } });
    expect(third.status).to.equal('completed');
    expect(book.callCount).to.equal(2);
    expect(third.state).to.deep.equal({ booked: 2 });
  });

  it('counts the tokens of the turns before the run waited in the resumed result\'s usage', async () => {
    const { tools } = toolsWithSpies();
    const runner = runnerWith(tools, [{ toolCalls: [call('b', 'book', { room: 1 })], usage: { inputTokens: 10, outputTokens: 2 } }, { text: 'done', usage: { inputTokens: 20, outputTokens: 3 } }]);
    const first = interruptedOf(await runner.run(agent, 'go'));
    expect(first.snapshot.usage).to.deep.equal({ inputTokens: 10, outputTokens: 2 });
    const resumed = await runner.resume(agent, first.snapshot, { approvals: { b: true } });
    expect(resumed.usage).to.deep.equal({ inputTokens: 30, outputTokens: 5 });
  });

  it('does not fail a FAIL_RUN agent\'s run for a call that waits', async () => {
    const { tools } = toolsWithSpies();
    const strict = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model', onToolError: OnToolError.FAIL_RUN });
    const result = await runnerWith(tools, script(turn1)).run(strict, 'go');
    expect(result.status).to.equal('interrupted');
  });

  it('tells the waiting call as never dispatched when the run is cancelled before its batch is over', async () => {
    const tools = new ToolRegistry()
      .register({ name: 'slow' }, (_args, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('late'))))
      .register({ name: 'book', needsApproval: true }, () => 'booked');
    const controller = new AbortController();
    const done = runnerWith(tools, script([call('b', 'book'), call('s', 'slow')])).run(agent, 'go', { signal: controller.signal });
    setTimeout(() => controller.abort('user left'), 5);
    const result = await done;
    expect(result.status).to.equal('cancelled');
    expect(result.events.map(summary)).to.deep.equal(['START', 'MODEL 1', 'ERROR b CallStoppedError', 'INDET s', 'CANCELLED']);
  });

  it('interrupts a streamed turn the same way: the calls that need no approval run as they come', async () => {
    const { tools, lookup, book } = toolsWithSpies();
    const streamed = (...calls: ToolCall[]): ScriptStep => () => from([...calls.map((c) => ({ type: 'tool-call', ...c }) as ModelStreamPart), { type: 'finish', finishReason: 'tool-calls' } as ModelStreamPart]);
    const runner = new AgentRunner({ provider: new ScriptedProvider([streamed(...turn1), { text: 'done' }]), tools });
    const result = interruptedOf(await runner.run(agent, 'go'));
    expect(book.called).to.equal(false);
    expect(lookup.callCount).to.equal(2);
    expect(result.pending.map((p) => p.callId)).to.deep.equal(['b']);
    const resumed = await runner.resume(agent, result.snapshot, { approvals: { b: true } });
    expect(resumed.events.map(summary)).to.deep.equal(['RESULT b', 'RESULT c', 'MODEL 2', 'COMPLETED done']);
  });

  it('holds no permit for a waiting call: the others fill the turn lane (virtual time)', () => {
    const testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const c = cold('----(x|)');
      const d = cold('----(y|)');
      const tools = new ToolRegistry()
        .register({ name: 'book', needsApproval: true }, () => 'booked')
        .register({ name: 'lookup' }, (_args, ctx) => (ctx.callId === 'c' ? c : d));
      const runner = new AgentRunner({ provider: new ScriptedProvider(script([call('b', 'book'), call('c', 'lookup'), call('d', 'lookup')])), tools, concurrency: new ConcurrencyConfig({ maxConcurrentTools: 1 }), scheduler: testScheduler, loopStallMs: false });
      expectObservable(runner.run$(agent, 'go').pipe(map(summary))).toBe('(ab) 4ms (c|)', { a: 'START', b: 'MODEL 1', c: 'INTERRUPTED b' });
      expectSubscriptions(c.subscriptions).toBe('^---!');
      expectSubscriptions(d.subscriptions).toBe('----^---!');
    });
  });
  it('runs the waiting call\'s phase and never subscribes to a later phase\'s body (virtual time)', () => {
    const testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const c = cold('----(x|)');
      const s = cold('--(y|)');
      const tools = new ToolRegistry()
        .register({ name: 'book', needsApproval: true }, () => 'booked')
        .register({ name: 'lookup' }, () => c)
        .register({ name: 'audit', parallelSafe: false }, () => s);
      const runner = new AgentRunner({ provider: new ScriptedProvider(script([call('b', 'book'), call('c', 'lookup'), call('s', 'audit')])), tools, scheduler: testScheduler, loopStallMs: false });
      expectObservable(runner.run$(agent, 'go').pipe(map(summary))).toBe('(ab)(c|)', { a: 'START', b: 'MODEL 1', c: 'INTERRUPTED b' });
      expectSubscriptions(c.subscriptions).toBe('^---!');
      expectSubscriptions(s.subscriptions).toBe([]);
    });
  });
  it('hands the tools of a resumed run its state frozen, as read back from JSON', async () => {
    const seen: boolean[] = [];
    const tools = new ToolRegistry().register({ name: 'book', needsApproval: true }, (_args, ctx) => (seen.push(Object.isFrozen(ctx.state) && Object.isFrozen(ctx.state['cart'])), 'booked'));
    const runner = runnerWith(tools, script([call('b', 'book')]));
    const first = interruptedOf(await runner.run(agent, 'go', { state: { cart: { rooms: [7] } } }));
    const resumed = await runner.resume(agent, JSON.parse(JSON.stringify(first.snapshot)), { approvals: { b: true } });
    expect(seen).to.deep.equal([true]);
    expect(resumed.state).to.deep.equal({ cart: { rooms: [7] } });
  });
  it('gives, interrupted then resumed, the transcript, messages and state of the run approved in process, for any turn (property)', async () => {
    const tool = fc.constantFrom('lookup', 'book', 'audit');
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(tool, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 3 }), async (turns) => {
        const steps = turns.map((names, t) => names.map((name, i) => call(`t${t}c${i}`, name, name === 'book' ? { room: i } : name === 'lookup' ? { q: `q${i}` } : {})));
        const approved = await runnerWith(toolsWithSpies().tools, script(...steps), { approve: () => true }).run(agent, 'go');
        const { tools, book, audit, lookup } = toolsWithSpies();
        const runner = runnerWith(tools, script(...steps));
        const events: RunEvent[] = [];
        let result = await runner.run(agent, 'go');
        for (let rounds = 0; result.status === 'interrupted' && rounds < 20; rounds++) {
          events.push(...result.events.slice(0, -1));
          const approvals = Object.fromEntries(result.pending.map((p) => [p.callId, true]));
          result = await runner.resume(agent, JSON.parse(JSON.stringify(result.snapshot)), { approvals });
        }
        events.push(...result.events);
        expect(withoutIds(events)).to.deep.equal(withoutIds(approved.events));
        expect(result.messages).to.deep.equal(approved.messages);
        expect(result.state).to.deep.equal(approved.state);
        // Every call ran once, whatever it waited for.
        const count = (name: string) => turns.flat().filter((n) => n === name).length;
        expect([book.callCount, audit.callCount, lookup.callCount]).to.deep.equal([count('book'), count('audit'), count('lookup')]);
      }),
      { numRuns: 60, seed },
    );
  });

  describe('stop classes of a resumed run', () => {
    // `book` needs approval and, once approved, waits until it is stopped; `look` (idempotent) waits too, in a later phase.
    const waiting = (signal: AbortSignal): Promise<never> => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true }));
    const classed = (events: readonly RunEvent[]) =>
      events.flatMap((e) => (e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE' ? [[e.callId, e.type, 'stopClass' in e ? e.stopClass : '-']] : []));

    async function waitingRun() {
      const started: string[] = [];
      const tools = new ToolRegistry()
        .register({ name: 'book', needsApproval: true }, (_args, ctx) => (started.push(ctx.callId), waiting(ctx.signal)))
        .register({ name: 'look', idempotent: true, parallelSafe: false }, (_args, ctx) => (started.push(ctx.callId), waiting(ctx.signal)));
      const runner = runnerWith(tools, [{ toolCalls: [call('b', 'book'), call('l', 'look'), call('m', 'look')] }, { text: 'done' }], { concurrency: new ConcurrencyConfig({ perTool: { look: 1 } }) });
      const first = interruptedOf(await runner.run(agent, 'go'));
      // Kept as JSON, as a store keeps it.
      return { runner, started, snapshot: JSON.parse(JSON.stringify(first.snapshot)) as typeof first.snapshot };
    }

    it('classes the calls a cancel stops after resuming: in flight by idempotency, queued never dispatched', async () => {
      const { runner, started, snapshot } = await waitingRun();
      const controller = new AbortController();
      const resumed = runner.resume(agent, snapshot, { approvals: { b: true }, signal: controller.signal });
      for (let i = 0; i < 20 && started.length < 1; i++) await new Promise((resolve) => setImmediate(resolve));
      controller.abort();
      const result = await resumed;
      expect(result.status).to.equal('cancelled');
      expect(started).to.deep.equal(['b']);
      expect(classed(result.events)).to.deep.equal([
        ['b', 'TOOL_INDETERMINATE', 'indeterminate'],
        ['l', 'TOOL_ERROR', 'never_dispatched'],
        ['m', 'TOOL_ERROR', 'never_dispatched'],
      ]);
    });

    it('gives a refused call no class: it was not stopped, a person said no', async () => {
      const { runner, snapshot } = await waitingRun();
      const controller = new AbortController();
      const resumed = runner.resume(agent, snapshot, { approvals: { b: { approved: false, reason: 'no' } }, signal: controller.signal });
      for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
      controller.abort();
      const result = await resumed;
      expect(classed(result.events)).to.deep.equal([
        ['b', 'TOOL_ERROR', '-'],
        ['l', 'TOOL_ERROR', 'safe_to_call_again'],
        ['m', 'TOOL_ERROR', 'never_dispatched'],
      ]);
    });
  });
});
