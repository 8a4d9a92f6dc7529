// Adaptive tool lanes through the runner, in virtual time: the tool lane's limit falls on a
// partner's RateLimitedError and on a call that outran its ceiling, grows back as calls succeed,
// stays within min..max, and every change is on activity$.
import { expect } from 'chai';
import * as t from 'io-ts';
import { TestScheduler } from 'rxjs/testing';
import { Agent, AgentRunner, LaneTable, RateLimitedError, ScriptedProvider, ToolRegistry, type LaneStore, type ModelRequest, type RunnerActivity } from '../../lib/index.js';

const Call = t.type({ call: t.string });
const agent = new Agent({ name: 'planner', instructions: 'Plan.', model: 'm', freeText: true });

// Turn after turn, `perTurn[n]` calls to the partner (their arguments say which call it is), then an answer.
function turns(perTurn: readonly number[]) {
  return (request: ModelRequest) => {
    const n = request.messages.filter((m) => m.role === 'assistant').length;
    if (n >= perTurn.length) return { text: 'done' };
    return { text: '', toolCalls: Array.from({ length: perTurn[n]! }, (_, i) => ({ id: `t${n}c${i}`, name: 'partner', arguments: { call: `t${n}c${i}` } })) };
  };
}

// What activity$ says of the partner's lane: when each call started, and each change of the limit.
function watch(runner: AgentRunner, now: () => number) {
  const started: Record<string, number> = {};
  const limits: string[] = [];
  runner.activity$.subscribe((a: RunnerActivity) => {
    if (a.type === 'started') started[a.callId] = now();
    if (a.type === 'limit-changed') limits.push(`${a.at} ${a.lane} ${a.previous}->${a.limit} ${a.cause} (${a.callId})`);
  });
  return { started, limits };
}

describe('adaptive tool lanes', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it("halves the tool lane's limit on a RateLimitedError, once for the calls that were in flight together", () => {
    testScheduler.run(({ cold, flush }) => {
      // Turn one: four calls at a limit of four; two are told to slow down at 1 ms, with no wait
      // named (a wait would also pause the tool's rate lane, which is not what this tests). Turn two: four calls.
      const tools = new ToolRegistry().register({ name: 'partner', args: Call }, ({ call }) =>
        call === 't0c0' || call === 't0c1' ? cold('-#', undefined, new RateLimitedError('slow down', 0)) : cold('10ms a|', { a: call }),
      );
      const runner = new AgentRunner({
        provider: new ScriptedProvider(Array.from({ length: 3 }, () => turns([4, 4]))),
        tools,
        concurrency: { perToolAdaptive: { partner: { min: 1, max: 4 } } },
      });
      const seen = watch(runner, () => testScheduler.now());
      runner.run$(agent, 'go').subscribe();
      flush();
      // t0c1's slow down, from a call granted before the fall, halves nothing more. The two
      // successes of turn one at 10 ms are a limit's worth: it grows to three.
      expect(seen.limits).to.deep.equal([
        '1 tool:partner 4->2 overload (t0c0)',
        '10 tool:partner 2->3 success (t0c3)',
        '20 tool:partner 3->4 success (t1c2)',
      ]);
      // The second turn starts three calls at 10 ms and the fourth as the first of them ends.
      expect([seen.started.t1c0, seen.started.t1c1, seen.started.t1c2, seen.started.t1c3]).to.deep.equal([10, 10, 10, 20]);
    });
  });

  it('falls on a call that outran its ceiling (ToolTimedOutError)', () => {
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry().register({ name: 'partner', args: Call }, ({ call }) => (call === 't0c0' ? cold('-') : cold('2ms a|', { a: call })));
      const runner = new AgentRunner({
        provider: new ScriptedProvider(Array.from({ length: 3 }, () => turns([2]))),
        tools,
        concurrency: { perToolAdaptive: { partner: { min: 1, max: 8 } }, perToolSeconds: { partner: 0.005 } },
      });
      const seen = watch(runner, () => testScheduler.now());
      runner.run$(agent, 'go').subscribe();
      flush();
      expect(seen.limits).to.deep.equal(['5 tool:partner 8->4 overload (t0c0)']);
    });
  });

  it('grows back on success and stays within min..max', () => {
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry().register({ name: 'partner', args: Call }, ({ call }) => cold('1ms a|', { a: call }));
      // Eight turns of one call each, from a limit of one: it grows to two, then three, and stops at max.
      const runner = new AgentRunner({
        provider: new ScriptedProvider(Array.from({ length: 9 }, () => turns([1, 1, 1, 1, 1, 1, 1, 1]))),
        tools,
        concurrency: { perToolAdaptive: { partner: { min: 1, max: 3, initial: 1 } } },
      });
      const seen = watch(runner, () => testScheduler.now());
      runner.run$(agent, 'go').subscribe();
      flush();
      expect(seen.limits).to.deep.equal(['1 tool:partner 1->2 success (t0c0)', '3 tool:partner 2->3 success (t2c0)']);
      expect(runner.lanes.limits!()).to.deep.equal([{ key: 'tool:partner', limit: 3, min: 1, max: 3 }]);
    });
  });

  it('never falls below min, and a failure of the call itself moves nothing', () => {
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry().register({ name: 'partner', args: Call }, ({ call }) =>
        call.endsWith('c0') ? cold('-#', undefined, new RateLimitedError('slow down', 0)) : cold('-#', undefined, new RangeError('bad input')),
      );
      const runner = new AgentRunner({
        provider: new ScriptedProvider(Array.from({ length: 6 }, () => turns([2, 2, 2, 2, 2]))),
        tools,
        concurrency: { perToolAdaptive: { partner: { min: 2, max: 8 } } },
      });
      const seen = watch(runner, () => testScheduler.now());
      runner.run$(agent, 'go').subscribe();
      flush();
      expect(seen.limits).to.deep.equal(['1 tool:partner 8->4 overload (t0c0)', '2 tool:partner 4->2 overload (t1c0)']);
      expect(runner.lanes.limits!()[0]!.limit).to.equal(2);
    });
  });

  it('pays nothing without an adaptive lane: no report, no limit on activity$', () => {
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry().register({ name: 'partner' }, () => cold('-#', undefined, new RateLimitedError('slow down', 0)));
      const runner = new AgentRunner({ provider: new ScriptedProvider(Array.from({ length: 2 }, () => turns([2]))), tools, concurrency: { perTool: { partner: 4 } } });
      const seen = watch(runner, () => testScheduler.now());
      runner.run$(agent, 'go').subscribe();
      flush();
      expect(seen.limits).to.deep.equal([]);
      expect(runner.lanes.limits!()).to.deep.equal([]);
    });
  });

  it('takes the lane at its max on a store without adaptive lanes', () => {
    testScheduler.run(({ cold, flush }) => {
      const table = new LaneTable();
      // A store that only counts: no enterAdaptive.
      const plain: LaneStore = { enter: (key, limit, onGrant, party) => table.enter(key, limit, onGrant, party), occupancy: () => table.occupancy(), changes$: table.changes$ };
      const tools = new ToolRegistry().register({ name: 'partner', args: Call }, ({ call }) => cold('10ms a|', { a: call }));
      const runner = new AgentRunner({
        provider: new ScriptedProvider(Array.from({ length: 2 }, () => turns([3]))),
        tools,
        lanes: plain,
        concurrency: { perToolAdaptive: { partner: { min: 1, max: 2 } } },
      });
      const seen = watch(runner, () => testScheduler.now());
      runner.run$(agent, 'go').subscribe();
      flush();
      expect([seen.started.t0c0, seen.started.t0c1, seen.started.t0c2]).to.deep.equal([0, 0, 10]);
      expect(seen.limits).to.deep.equal([]);
    });
  });
});
