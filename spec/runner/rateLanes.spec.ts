// Rate lanes through AgentRunner, in virtual time: the runner's perToolRate spaces a turn's
// calls, a body's RateLimitedError pauses its tool (shown on activity$ and in runner.lanes),
// and a key that names no tool is refused.
import { expect } from 'chai';
import * as t from 'io-ts';
import { filter, map, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { Agent, AgentRunner, ConfigError, RateLimitedError, ScriptedProvider, ToolRegistry, type ModelResponse, type RunnerActivity } from '../../lib/index.js';

const planner = new Agent({ name: 'planner', instructions: 'Plan the trip.', model: 'test-model' });

function lookups(n: number): ModelResponse {
  return { toolCalls: Array.from({ length: n }, (_, i) => ({ id: `c${i + 1}`, name: 'lookup', arguments: JSON.stringify({ q: `q${i + 1}` }) })) };
}

describe('AgentRunner rate lanes', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it("spaces a turn's calls by the runner's perToolRate: two at once (the burst), then one every 10 ms", () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ q: t.string }) }, ({ q }) => cold('(r|)', { r: q }));
      const runner = new AgentRunner({
        provider: new ScriptedProvider([lookups(4), { text: 'done' }]),
        tools,
        scheduler: testScheduler,
        concurrency: { perToolRate: { lookup: { limit: 1, perSeconds: 0.01, burst: 2 } } },
      });
      const started$: Observable<string> = runner.activity$.pipe(
        filter((a): a is Extract<RunnerActivity, { type: 'started' }> => a.type === 'started'),
        map((a) => a.callId),
      );
      expectObservable(started$).toBe('(ab) 6ms c 9ms d', { a: 'c1', b: 'c2', c: 'c3', d: 'c4' });
      testScheduler.schedule(() => void runner.run(planner, 'go'), 0);
    });
  });

  it("pauses a tool whose body says slow down: the pause shows on activity$ and in runner.lanes, and the turn's other calls wait it out", () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ q: t.string }) }, ({ q }) =>
        q === 'q1' ? cold('-#', undefined, new RateLimitedError('lookup answered 429', 0.03)) : cold('(r|)', { r: q }),
      );
      const runner = new AgentRunner({
        provider: new ScriptedProvider([lookups(3), { text: 'done' }]),
        tools,
        scheduler: testScheduler,
        concurrency: { perToolRate: { lookup: { limit: 1, perSeconds: 0.01 } } },
      });
      const seen$ = runner.activity$.pipe(
        filter((a) => a.type === 'started' || a.type === 'lane-paused'),
        map((a) => (a.type === 'started' ? a.callId : a.type === 'lane-paused' ? `${a.key} until ${a.until}` : '')),
      );
      // c1 starts, fails at frame 1 and pauses the lane until 31; c2 (due at 10) and c3 wait, then go at the steady rate.
      expectObservable(seen$).toBe('ap 29ms b 9ms c', { a: 'c1', p: 'rate:tool:lookup until 31', b: 'c2', c: 'c3' });
      testScheduler.schedule(() => void runner.run(planner, 'go'), 0);
      testScheduler.schedule(() => expect(runner.lanes.occupancy()).to.deep.include({ key: 'rate:tool:lookup', limit: 1, perSeconds: 0.01, burst: 1, holders: 0, waiters: 2, pausedUntil: 31 }), 5);
    });
  });

  it('refuses a perToolRate key that names no registered tool', () => {
    const tools = new ToolRegistry().register({ name: 'lookup' }, () => 1);
    const make = () => new AgentRunner({ provider: new ScriptedProvider([]), tools, concurrency: { perToolRate: { lokup: { limit: 1, perSeconds: 1 } } } });
    expect(make).to.throw(ConfigError, 'concurrency.perToolRate names "lokup", which is not a registered tool');
  });
});
