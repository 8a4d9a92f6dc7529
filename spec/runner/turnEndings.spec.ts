// How a turn ends when its run is left or its provider misbehaves at the edges: a consumer that
// leaves on MODEL_RESPONSE, a run left in a later turn, a provider that stops its own run while
// it is asked, a provider whose teardown throws, and a Promise that resolves to a stream part.
import { expect } from 'chai';
import { config, Observable, takeWhile } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type ModelResponse, type RunnerActivity } from '../../lib/index.js';

const planner = new Agent({ name: 'planner', instructions: '', model: 'test-model' });
const oneCall = (id: string): ModelResponse => ({ toolCalls: [{ id, name: 'lookup', arguments: '{}' }] });

// activity$ as short lines: the run's start and end, and each call's scheduling events.
function watch(runner: AgentRunner): string[] {
  const seen: string[] = [];
  runner.activity$.subscribe((a: RunnerActivity) => {
    if (a.type === 'run-ended') seen.push(`run-ended ${a.status}`);
    else if (a.type === 'started' || a.type === 'ended' || a.type === 'settled') seen.push(`${a.type} ${a.callId}`);
  });
  return seen;
}

describe('a turn at its edges', () => {
  it('ends a run left on its final MODEL_RESPONSE once, as cancelled: no final event, no second run-ended', () => {
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: new ToolRegistry() });
    const seen = watch(runner);
    const events: string[] = [];
    runner
      .run$(planner, 'go')
      .pipe(takeWhile((event) => event.type !== 'MODEL_RESPONSE', true))
      .subscribe((event) => events.push(event.type));
    expect(events).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE']);
    expect(seen).to.deep.equal(['run-ended cancelled']);
  });

  it('tells watchers how the calls of a later turn ended before it tells them the run ended, when the run is left then', () => {
    const testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
    let seen: string[] = [];
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => cold('----(r|)', { r: 'x' }));
      const runner = new AgentRunner({ provider: new ScriptedProvider([oneCall('c1'), oneCall('c2'), { text: 'done' }]), tools });
      seen = watch(runner);
      const run = runner.run$(planner, 'go').subscribe();
      // c1 runs from frame 0 to 4; turn 2's c2 from 4: the run is left at frame 6, c2 in flight.
      testScheduler.schedule(() => run.unsubscribe(), 6);
      flush();
    });
    expect(seen).to.deep.equal(['started c1', 'ended c1', 'settled c1', 'started c2', 'ended c2', 'settled c2', 'run-ended cancelled']);
  });

  it('does not subscribe the reply of a provider that stopped its own run while it was asked, and aborts its signal at the stop', async () => {
    const controller = new AbortController();
    let subscribed = false;
    let abortedWhenAnswering: boolean | undefined;
    const provider = {
      respond: (_request: unknown, signal: AbortSignal) => {
        controller.abort(new Error('stopped by the provider'));
        abortedWhenAnswering = signal.aborted;
        return new Observable<ModelResponse>((subscriber) => {
          subscribed = true;
          subscriber.next({ text: 'too late' });
        });
      },
    };
    const runner = new AgentRunner({ provider, tools: new ToolRegistry() });
    const result = await runner.run(planner, 'go', { signal: controller.signal });
    expect(result.status).to.equal('cancelled');
    expect(abortedWhenAnswering).to.equal(true);
    expect(subscribed).to.equal(false);
  });

  it("keeps the answer of a provider whose Observable's teardown throws, and reports the teardown's error", async () => {
    const reported: unknown[] = [];
    const before = config.onUnhandledError;
    config.onUnhandledError = (error) => reported.push(error);
    try {
      const provider = {
        respond: () =>
          new Observable<ModelResponse>((subscriber) => {
            const timer = setTimeout(() => subscriber.next({ text: 'answered' }), 1);
            return () => {
              clearTimeout(timer);
              throw new Error('teardown broke');
            };
          }),
      };
      const runner = new AgentRunner({ provider, tools: new ToolRegistry() });
      const result = await runner.run(planner, 'go');
      expect(result.status).to.equal('completed');
      expect(result.output).to.equal('answered');
      expect(reported).to.have.length(1);
      expect(String(reported[0])).to.contain('teardown broke');
    } finally {
      config.onUnhandledError = before;
    }
  });

  it('takes a Promise that resolves to a stream part as a stream of that one part, ended', async () => {
    const provider = { respond: () => Promise.resolve({ type: 'text-delta', delta: 'one part' }) as unknown as Promise<ModelResponse> };
    const runner = new AgentRunner({ provider, tools: new ToolRegistry() });
    const result = await runner.run(planner, 'go');
    expect(result.status).to.equal('completed');
    expect(result.output).to.equal('one part');
  });
});
