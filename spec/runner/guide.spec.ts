// The marble example of docs/getting-started.md, run as written, so the guide cannot drift.
import { expect } from 'chai';
import { filter, map } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, ToolRegistry, type ToolResultEvent } from '../../lib/index.js';

describe('docs/getting-started.md', () => {
  it('runs its marble example as written: four calls two at a time', () => {
    const planner = new Agent({ name: 'planner', instructions: 'Plan the trip.', model: 'your-model' });
    const testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
    const fourCalls = { toolCalls: ['c1', 'c2', 'c3', 'c4'].map((id) => ({ id, name: 'search', arguments: '{}' })) };

    testScheduler.run(({ cold, expectObservable }) => {
      const tools = new ToolRegistry().register({ name: 'search' }, () => cold('-----(r|)', { r: 'ok' }));
      const provider = new ScriptedProvider([fourCalls, { text: 'done' }]);
      const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }), scheduler: testScheduler });
      const results$ = runner.run$(planner, 'go').pipe(
        filter((e): e is ToolResultEvent => e.type === 'TOOL_RESULT'),
        map((e) => e.callId),
      );
      // two calls at 5ms, the other two at 10ms, when the run completes
      expectObservable(results$).toBe('-----(ab)-(cd|)', { a: 'c1', b: 'c2', c: 'c3', d: 'c4' });
    });
  });
});
