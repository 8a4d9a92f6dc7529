// Token budgets through the runner, in virtual time: a tenant's turns are charged the tokens
// their provider reports; a turn the budget cannot cover is not started and the run fails with a
// BudgetExceededError saying how much and until when; another tenant's runs are not touched.
import { expect } from 'chai';
import { map, mergeMap, timer } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type ModelRequest, type RunEvent } from '../../lib/index.js';

const agent = new Agent({ name: 'planner', instructions: 'Plan.', model: 'm', freeText: true });

// Every turn asks for one lookup and reports 40 tokens, until `turns` turns were asked; then it answers.
// (An agent named 'brief' asks for one lookup fewer.)
function lookingUp(lookups: number) {
  return (request: ModelRequest) => {
    const turns = request.agent === 'brief' ? lookups - 1 : lookups;
    const asked = request.messages.filter((m) => m.role === 'assistant').length;
    return asked < turns
      ? { text: '', toolCalls: [{ id: `c${asked}`, name: 'lookup', arguments: {} }], usage: { inputTokens: 30, outputTokens: 10 } }
      : { text: 'done', usage: { inputTokens: 30, outputTokens: 10 } };
  };
}

// What a marble shows of an event: its type's first letter, and for a failure its error.
const letters: Record<RunEvent['type'], string> = {
  RUN_STARTED: 's',
  MODEL_RESPONSE: 'm',
  TOOL_RESULT: 'r',
  TOOL_ERROR: 'e',
  TOOL_INDETERMINATE: 'i',
  RUN_COMPLETED: 'c',
  RUN_FAILED: 'f',
  RUN_CANCELLED: 'x',
} as Record<RunEvent['type'], string>;

describe('token budgets', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('spends no more than the budget plus the turn running when it ran out, then fails the run with a BudgetExceededError', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => cold('10ms a|', { a: 'A' }));
      const steps = Array.from({ length: 10 }, () => lookingUp(10));
      const provider = new ScriptedProvider(steps);
      const runner = new AgentRunner({ provider, tools, concurrency: { perTenantBudget: { tokens: 100, perSeconds: 60 } } });
      // Turns at 0, 10 and 20 ms spend 40 tokens each: 120, one turn over 100. The fourth is not started.
      const events$ = runner.run$(agent, 'go', { tenant: 'acme' }).pipe(map((event) => (event.type === 'RUN_FAILED' ? `${event.error.name}: ${event.error.message}` : letters[event.type])));
      expectObservable(events$).toBe('(sm) 6ms (rm) 6ms (rm) 6ms (rf|)', {
        s: 's',
        m: 'm',
        r: 'r',
        f: "BudgetExceededError: the tenant's budget is spent until 1970-01-01T00:01:00.000Z: acme needs 1 tokens and has 0 left in its window",
      });
      testScheduler.flush();
      expect(provider.requests).to.have.length(3);
      expect(runner.lanes.budgets!()).to.deep.equal([{ key: 'budget:tokens:acme', measure: 'tokens', limit: 100, spent: 120, until: 60_000 }]);
    });
  });

  it('with turnTokens, reserves each turn before it is asked, so runs in flight together cannot overspend it', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => cold('10ms a|', { a: 'A' }));
      // Five runs of one tenant start together; each turn reports 40 tokens. 100 tokens, 40 a turn
      // reserved: two first turns start, the other three runs are refused before the model is
      // asked, and so are the two runs' second turns (80 spent, 40 more would pass 100).
      const provider = new ScriptedProvider(Array.from({ length: 5 }, () => lookingUp(1)));
      const runner = new AgentRunner({ provider, tools, concurrency: { perTenantBudget: { tokens: 100, perSeconds: 60, turnTokens: 40 } } });
      const run = () => runner.run$(agent, 'go', { tenant: 'acme' }).pipe(map((event) => (event.type === 'RUN_FAILED' ? event.error.name : letters[event.type])));
      expectObservable(run()).toBe('(sm) 6ms (rf|)', { s: 's', m: 'm', r: 'r', f: 'BudgetExceededError' });
      expectObservable(run()).toBe('(sm) 6ms (rf|)', { s: 's', m: 'm', r: 'r', f: 'BudgetExceededError' });
      for (let i = 0; i < 3; i += 1) expectObservable(run()).toBe('(sf|)', { s: 's', f: 'BudgetExceededError' });
      testScheduler.flush();
      // Two turns asked, 80 tokens spent: never more than the budget.
      expect(provider.requests).to.have.length(2);
      expect(runner.lanes.budgets!()[0]).to.include({ spent: 80, limit: 100 });
    });
  });

  it('without turnTokens, lets every run in flight start a turn while something is left (one turn each over)', () => {
    testScheduler.run(({ cold }) => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => cold('10ms a|', { a: 'A' }));
      const provider = new ScriptedProvider(Array.from({ length: 5 }, () => lookingUp(1)));
      const runner = new AgentRunner({ provider, tools, concurrency: { perTenantBudget: { tokens: 100, perSeconds: 60 } } });
      for (let i = 0; i < 5; i += 1) runner.run$(agent, 'go', { tenant: 'acme' }).subscribe();
      testScheduler.flush();
      expect(provider.requests.length).to.be.greaterThan(2);
      expect(runner.lanes.budgets!()[0]!.spent).to.be.greaterThan(100);
    });
  });

  it("leaves another tenant's runs as they were", () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => cold('10ms a|', { a: 'A' }));
      const provider = new ScriptedProvider(Array.from({ length: 10 }, () => lookingUp(3)));
      const runner = new AgentRunner({ provider, tools, concurrency: { perTenantBudget: { tokens: 100, perSeconds: 60 } } });
      const brief = new Agent({ name: 'brief', instructions: 'Plan.', model: 'm', freeText: true });
      const at = (ms: number, tenant: string, who: Agent) => timer(ms).pipe(mergeMap(() => runner.run$(who, 'go', { tenant })), map((event) => letters[event.type]));
      // acme spends its budget and its fourth turn is refused at 30 ms; globex, starting then, runs
      // all three of its turns (120 tokens, in a window of its own) as if acme had spent nothing.
      expectObservable(at(0, 'acme', agent)).toBe('(sm) 6ms (rm) 6ms (rm) 6ms (rf|)');
      expectObservable(at(30, 'globex', brief)).toBe('30ms (sm) 6ms (rm) 6ms (rmc|)');
    });
  });

  it('opens a new window once the last one closed', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => cold('10ms a|', { a: 'A' }));
      const provider = new ScriptedProvider(Array.from({ length: 10 }, () => lookingUp(1)));
      const runner = new AgentRunner({ provider, tools, concurrency: { perTenantBudget: { tokens: 60, perSeconds: 1 } } });
      const at = (ms: number) => timer(ms).pipe(mergeMap(() => runner.run$(agent, 'go', { tenant: 'acme' })), map((event) => letters[event.type]));
      // The first run spends 80 (two turns); a run at 500 ms is refused; one at 1 s (the window closed) completes.
      expectObservable(at(0)).toBe('(sm) 6ms (rmc|)');
      expectObservable(at(500)).toBe('500ms (sf|)');
      expectObservable(at(1000)).toBe('1000ms (sm) 6ms (rmc|)');
    });
  });

  describe('cost budgets', () => {
    it("does not start a call the tenant's budget cannot cover: it ends TOOL_ERROR never dispatched, saying until when", () => {
      testScheduler.run(({ cold, flush }) => {
        const tools = new ToolRegistry().register({ name: 'lookup', cost: 2 }, () => cold('10ms a|', { a: 'A' }));
        const provider = new ScriptedProvider([{ text: '', toolCalls: ['c1', 'c2', 'c3'].map((id) => ({ id, name: 'lookup', arguments: {} })) }, { text: 'done' }]);
        const runner = new AgentRunner({ provider, tools, concurrency: { perTenantBudget: { cost: 5, perSeconds: 60 } } });
        const events: RunEvent[] = [];
        runner.run$(agent, 'go', { tenant: 'acme' }).subscribe((event) => events.push(event));
        flush();
        const outcomes = events.filter((e) => e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR');
        expect(outcomes.map((e) => e.type)).to.deep.equal(['TOOL_RESULT', 'TOOL_RESULT', 'TOOL_ERROR']);
        expect(outcomes[2]).to.deep.include({
          error: {
            name: 'BudgetExceededError',
            message: "never dispatched: the tenant's budget is spent until 1970-01-01T00:01:00.000Z: acme needs 2 cost and has 1 left in its window",
          },
        });
        expect(runner.lanes.budgets!()).to.deep.equal([{ key: 'budget:cost:acme', measure: 'cost', limit: 5, spent: 4, until: 60_000 }]);
      });
    });

    it("takes the cost a body reports in place of its tool's declared one", () => {
      testScheduler.run(({ cold, flush }) => {
        const tools = new ToolRegistry().register({ name: 'lookup', cost: 1 }, (_args, ctx) => {
          ctx.reportCost(3);
          return cold('1ms a|', { a: 'A' });
        });
        const provider = new ScriptedProvider(Array.from({ length: 4 }, () => lookingUp(3)));
        const runner = new AgentRunner({ provider, tools, concurrency: { perTenantBudget: { cost: 5, perSeconds: 60 } } });
        const events: RunEvent[] = [];
        runner.run$(agent, 'go', { tenant: 'acme' }).subscribe((event) => events.push(event));
        flush();
        // 3 spent, then 6 (the call covered at 3 of 5 reported 3 more): the third call is refused.
        expect(events.filter((e) => e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR').map((e) => e.type)).to.deep.equal(['TOOL_RESULT', 'TOOL_RESULT', 'TOOL_ERROR']);
        expect(runner.lanes.budgets!()[0]!.spent).to.equal(6);
      });
    });

    it('gives back what a call that never started had spent', () => {
      testScheduler.run(({ cold, flush }) => {
        const tools = new ToolRegistry().register({ name: 'lookup', cost: 2 }, () => cold('10ms a|', { a: 'A' }));
        const provider = new ScriptedProvider([{ text: '', toolCalls: ['c1', 'c2'].map((id) => ({ id, name: 'lookup', arguments: {} })) }, { text: 'done' }]);
        // One call at a time: the second waits in the tool lane, its cost spent, when the run is cancelled.
        const runner = new AgentRunner({ provider, tools, concurrency: { perTool: { lookup: 1 }, perTenantBudget: { cost: 10, perSeconds: 60 } } });
        const controller = new AbortController();
        const events: RunEvent[] = [];
        runner.run$(agent, 'go', { tenant: 'acme', signal: controller.signal }).subscribe((event) => events.push(event));
        testScheduler.schedule(() => controller.abort(), 5);
        flush();
        expect(events.at(-1)!.type).to.equal('RUN_CANCELLED');
        expect(runner.lanes.budgets!()[0]!.spent).to.equal(2);
      });
    });
  });
});
