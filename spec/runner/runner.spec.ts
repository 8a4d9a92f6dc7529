// The turn loop through AgentRunner and ScriptedProvider: the transcript's shape and
// fields, tool messages in call order, lanes narrowed per agent, final answers,
// maxTurns, the ToolContext, activity$, and a transcript that ignores finish order.
import { expect } from 'chai';
import * as t from 'io-ts';
import { filter, lastValueFrom, map, type Observable, takeWhile, toArray } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  ConfigError,
  ScriptedProvider,
  type ConcurrencyOptions,
  ToolRegistry,
  type ModelResponse,
  type RunEvent,
  type RunnerActivity,
  type ToolContext,
} from '../../lib/index.js';

const planner = new Agent({ name: 'planner', instructions: 'Plan the trip.', model: 'test-model' });

function lookups(n: number, tool = 'lookup'): ModelResponse {
  return { toolCalls: Array.from({ length: n }, (_, i) => ({ id: `c${i + 1}`, name: tool, arguments: JSON.stringify({ q: `q${i + 1}` }) })) };
}

/** The transcript without what may differ between two runs of one script: the run id. */
function transcript(events: readonly RunEvent[]): unknown[] {
  return events.map((event) => (event.type === 'RUN_STARTED' ? { ...event, runId: '<id>' } : event));
}

describe('AgentRunner', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  describe('the transcript', () => {
    it('emits RUN_STARTED, MODEL_RESPONSE, one tool event per call in call order, then RUN_COMPLETED', async () => {
      const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ q: t.string }) }, ({ q }) => `found ${q}`);
      const runner = new AgentRunner({ provider: new ScriptedProvider([lookups(2), { text: 'All booked.' }]), tools });
      const events = await lastValueFrom(runner.run$(planner, 'Book Lisbon', { tenant: 'acme' }).pipe(toArray()));
      expect(transcript(events)).to.deep.equal([
        { type: 'RUN_STARTED', runId: '<id>', agent: 'planner', tenant: 'acme', input: 'Book Lisbon' },
        { type: 'MODEL_RESPONSE', turn: 1, toolCalls: lookups(2).toolCalls },
        { type: 'TOOL_RESULT', turn: 1, callId: 'c1', tool: 'lookup', result: 'found q1' },
        { type: 'TOOL_RESULT', turn: 1, callId: 'c2', tool: 'lookup', result: 'found q2' },
        { type: 'MODEL_RESPONSE', turn: 2, text: 'All booked.', toolCalls: [] },
        { type: 'RUN_COMPLETED', output: 'All booked.' },
      ]);
    });

    it('is cold: nothing runs until subscribed, and each subscription is a new run', async () => {
      let invoked = 0;
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => ++invoked);
      const provider = new ScriptedProvider([lookups(1), { text: 'one' }, lookups(1), { text: 'two' }]);
      const run$ = new AgentRunner({ provider, tools }).run$(planner, 'go');
      expect(invoked).to.equal(0);
      const first = await lastValueFrom(run$.pipe(toArray()));
      const second = await lastValueFrom(run$.pipe(toArray()));
      expect(invoked).to.equal(2);
      expect((first[0] as { runId: string }).runId).to.not.equal((second[0] as { runId: string }).runId);
      expect(second[second.length - 1]).to.deep.equal({ type: 'RUN_COMPLETED', output: 'two' });
    });

    it('does not depend on which call finished first', () => {
      const finishOrders = [
        ['-a|', '--b|', '---c|', '----d|'],
        ['----a|', '---b|', '--c|', '-d|'],
        ['--a|', '----b|', '-c|', '---d|'],
      ];
      const transcripts = finishOrders.map((marbles) => {
        let events: RunEvent[] = [];
        testScheduler.run(({ cold, flush }) => {
          const bodies = new Map(marbles.map((m, i) => [`q${i + 1}`, m]));
          const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ q: t.string }) }, ({ q }) => cold(bodies.get(q)!, { a: 'A', b: 'B', c: 'C', d: 'D' }));
          const runner = new AgentRunner({ provider: new ScriptedProvider([lookups(4), { text: 'done' }]), tools });
          runner.run$(planner, 'go').pipe(toArray()).subscribe((all) => (events = all));
          flush();
        });
        return transcript(events);
      });
      expect(transcripts[0]).to.have.length(8);
      expect(transcripts[1]).to.deep.equal(transcripts[0]);
      expect(transcripts[2]).to.deep.equal(transcripts[0]);
    });
  });

  describe('the turn loop', () => {
    it('sends the results back as tool messages in call order, failures marked isError', async () => {
      const tools = new ToolRegistry()
        .register({ name: 'lookup', args: t.type({ q: t.string }) }, async ({ q }) => {
          await new Promise((resolve) => setTimeout(resolve, q === 'q1' ? 20 : 1));
          return { q, hits: 3 };
        })
        .register({ name: 'broken' }, () => {
          throw new RangeError('partner down');
        });
      const provider = new ScriptedProvider([
        { text: 'Looking.', toolCalls: [...lookups(2).toolCalls!, { id: 'c3', name: 'broken', arguments: '{}' }] },
        { text: 'done' },
      ]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'go');
      expect(result.status).to.equal('completed');
      expect(provider.requests[1]!.messages).to.deep.equal([
        { role: 'user', content: 'go' },
        { role: 'assistant', content: 'Looking.', toolCalls: provider.requests[1]!.messages[1]!.toolCalls },
        { role: 'tool', toolCallId: 'c1', content: '{"q":"q1","hits":3}' },
        { role: 'tool', toolCallId: 'c2', content: '{"q":"q2","hits":3}' },
        { role: 'tool', toolCallId: 'c3', content: 'RangeError: partner down', isError: true },
      ]);
      expect(result.messages).to.have.length(6);
    });

    it('sends each request with the agent, model, instructions and the tools it may call', async () => {
      const tools = new ToolRegistry().register({ name: 'lookup', description: 'Look up' }, () => 1).register({ name: 'secret' }, () => 2);
      const provider = new ScriptedProvider([{ text: 'hi' }]);
      const agent = new Agent({ name: 'planner', instructions: 'Be brief.', model: 'm-1', tools: ['lookup'] });
      await new AgentRunner({ provider, tools }).run(agent, 'hello');
      const [request] = provider.requests;
      expect(request).to.deep.include({ agent: 'planner', model: 'm-1', instructions: 'Be brief.' });
      expect(request!.tools.map((tool) => tool.name)).to.deep.equal(['lookup']);
    });

    it('refuses a call to a registered tool the agent may not call, listing the ones it may', async () => {
      const invoked: string[] = [];
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => invoked.push('lookup')).register({ name: 'secret' }, () => invoked.push('secret'));
      const agent = new Agent({ name: 'planner', instructions: '', model: 'm', tools: ['lookup'] });
      const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'secret', arguments: '{}' }] }, { text: 'ok' }]);
      const result = await new AgentRunner({ provider, tools }).run(agent, 'go');
      expect(invoked).to.deep.equal([]);
      expect(result.events[2]).to.deep.equal({ type: 'TOOL_ERROR', turn: 1, callId: 'c1', tool: 'secret', error: { name: 'UnknownToolError', message: 'unknown tool "secret"; known tools: lookup' } });
    });

    it('fails a call with bad arguments alone, never dispatching it', async () => {
      const seen: string[] = [];
      const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ q: t.string }) }, ({ q }) => (seen.push(q), q));
      const provider = new ScriptedProvider([
        { toolCalls: [{ id: 'c1', name: 'lookup', arguments: { q: 42 } }, { id: 'c2', name: 'lookup', arguments: '{"q":"fine"}' }, { id: 'c3', name: 'lookup', arguments: 'not json' }] },
        { text: 'ok' },
      ]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'go');
      expect(seen).to.deep.equal(['fine']);
      const errors = result.events.filter((e) => e.type === 'TOOL_ERROR').map((e) => (e.type === 'TOOL_ERROR' ? `${e.callId} ${e.error.message}` : ''));
      expect(errors[0]).to.equal('c1 bad arguments for lookup: args.q: expected string, got 42');
      expect(errors[1]).to.match(/^c3 bad arguments for lookup: arguments are not valid JSON/);
    });

    it('fails a second call with a duplicate call id alone', async () => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => 'ok');
      const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{}' }, { id: 'c1', name: 'lookup', arguments: '{}' }] }, { text: 'ok' }]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'go');
      expect(result.events.slice(2, 4).map((e) => e.type)).to.deep.equal(['TOOL_RESULT', 'TOOL_ERROR']);
    });

    it('fails the run once maxTurns is reached, saying so', async () => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => 1);
      const provider = new ScriptedProvider([lookups(1), lookups(1), lookups(1)]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'go', { maxTurns: 2 });
      expect(result.status).to.equal('failed');
      expect(result.error).to.deep.equal({ name: 'RunError', message: 'planner reached maxTurns (2) without a final answer' });
      expect(provider.requests).to.have.length(2);
    });
  });

  describe('final answers', () => {
    const Answer = t.type({ city: t.string, nights: t.number });

    it('decodes a structured final answer with the agent\'s output codec', async () => {
      const agent = new Agent({ name: 'planner', instructions: '', model: 'm', output: Answer });
      const provider = new ScriptedProvider([{ text: '{"city":"Lisbon","nights":3}' }]);
      const result = await new AgentRunner({ provider, tools: new ToolRegistry() }).run(agent, 'go');
      expect(result).to.deep.include({ status: 'completed', output: { city: 'Lisbon', nights: 3 } });
    });

    const bad = [
      { title: 'is not JSON', text: 'Lisbon, 3 nights', message: /^the final answer of planner is not JSON \(/ },
      { title: 'does not decode', text: '{"city":"Lisbon","nights":"three"}', message: /^the final answer of planner does not decode: output\.nights: expected number, got "three"$/ },
    ];
    for (const c of bad) {
      it(`fails the run with a clear error when the final answer ${c.title}`, async () => {
        const agent = new Agent({ name: 'planner', instructions: '', model: 'm', output: Answer });
        const result = await new AgentRunner({ provider: new ScriptedProvider([{ text: c.text }]), tools: new ToolRegistry() }).run(agent, 'go');
        expect(result.status).to.equal('failed');
        expect(result.error!.name).to.equal('RunError');
        expect(result.error!.message).to.match(c.message);
      });
    }
  });

  describe('lanes', () => {
    function runMarble(runnerConcurrency: ConcurrencyConfig | ConcurrencyOptions, agent: Agent, expected: string, values: Record<string, string>, n = 4): void {
      testScheduler.run(({ cold, expectObservable }) => {
        const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ q: t.string }) }, ({ q }) => cold('-----(r|)', { r: q }));
        const runner = new AgentRunner({ provider: new ScriptedProvider([lookups(n), { text: 'done' }]), tools, concurrency: runnerConcurrency });
        const results$: Observable<string> = runner.run$(agent, 'go').pipe(
          map((e) => (e.type === 'TOOL_RESULT' ? String(e.result) : e.type)),
        );
        expectObservable(results$).toBe(expected, values);
      });
    }
    const v = { s: 'RUN_STARTED', m: 'MODEL_RESPONSE', a: 'q1', b: 'q2', c: 'q3', d: 'q4', e: 'RUN_COMPLETED' };

    it('runs a turn\'s four calls at once under a wide runner', () => {
      runMarble(new ConcurrencyConfig({ maxConcurrentTools: 8 }), planner, '(sm)-(abcdme|)', v);
    });

    it('narrows the turn to the agent\'s own maxConcurrentTools', () => {
      const narrow = new Agent({ name: 'planner', instructions: '', model: 'm', concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }) });
      runMarble(new ConcurrencyConfig({ maxConcurrentTools: 8 }), narrow, '(sm)-(ab)-(cdme|)', v);
    });

    it('never lets an agent widen the runner\'s turn lane', () => {
      const wide = new Agent({ name: 'planner', instructions: '', model: 'm', concurrency: new ConcurrencyConfig({ maxConcurrentTools: 10 }) });
      runMarble(new ConcurrencyConfig({ maxConcurrentTools: 2 }), wide, '(sm)-(ab)-(cdme|)', v);
    });

    it('takes plain options for the runner\'s and the agent\'s concurrency alike', () => {
      const narrow = new Agent({ name: 'planner', instructions: '', model: 'm', concurrency: { maxConcurrentTools: 2 } });
      expect(narrow.concurrency).to.be.instanceOf(ConcurrencyConfig);
      runMarble({ maxConcurrentTools: 8 }, narrow, '(sm)-(ab)-(cdme|)', v);
    });

    it('never lets an agent widen a shared per-tool lane', () => {
      const wide = new Agent({ name: 'planner', instructions: '', model: 'm', concurrency: new ConcurrencyConfig({ perTool: { lookup: 4 } }) });
      runMarble(new ConcurrencyConfig({ perTool: { lookup: 1 } }), wide, '(sm)-a----b----c----(dme|)', v);
    });

    it('keeps the shared lanes at the runner\'s numbers while one agent narrows its own turn', () => {
      testScheduler.run(({ cold, expectObservable }) => {
        const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ q: t.string }) }, ({ q }) => cold('-----(r|)', { r: q }));
        const provider = new ScriptedProvider({ narrow: [lookups(2), { text: 'n' }], wide: [lookups(2), { text: 'w' }] });
        const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ perTool: { lookup: 3 } }) });
        const narrow = new Agent({ name: 'narrow', instructions: '', model: 'm', concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
        const wide = new Agent({ name: 'wide', instructions: '', model: 'm' });
        const ends = (agent: Agent) =>
          runner.run$(agent, 'go').pipe(
            map((e) => (e.type === 'TOOL_RESULT' ? `${agent.name}:${String(e.result)}` : e.type === 'RUN_COMPLETED' ? 'done' : '')),
            filter((text) => text !== ''),
          );
        // narrow runs one call at a time inside its own turn; wide gets two of the three shared permits at once
        expectObservable(ends(narrow)).toBe('-----a----(bC|)', { a: 'narrow:q1', b: 'narrow:q2', C: 'done' });
        expectObservable(ends(wide)).toBe('-----(abC|)', { a: 'wide:q1', b: 'wide:q2', C: 'done' });
      });
    });

    it('leaves every shared lane idle after the run', async () => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => new Promise((resolve) => setTimeout(resolve, 2, 'x')));
      const runner = new AgentRunner({ provider: new ScriptedProvider([lookups(6), { text: 'ok' }]), tools, concurrency: new ConcurrencyConfig({ perTenant: 2, perTool: { lookup: 3 } }) });
      await runner.run(planner, 'go', { tenant: 'acme' });
      expect(runner.lanes.occupancy()).to.deep.equal([]);
    });
  });

  describe('the ToolContext', () => {
    it('gives the body its call id, tool, tenant, run id, idempotency key, signal and a frozen state snapshot', async () => {
      let seen: ToolContext | undefined;
      const tools = new ToolRegistry().register({ name: 'lookup' }, (_args, ctx) => {
        seen = ctx;
        return 'ok';
      });
      const result = await new AgentRunner({ provider: new ScriptedProvider([lookups(1), { text: 'done' }]), tools }).run(planner, 'go', {
        tenant: 'acme',
        state: { city: 'Lisbon', prefs: { view: 'sea' } },
      });
      const runId = (result.events[0] as { runId: string }).runId;
      expect(seen).to.deep.include({ callId: 'c1', tool: 'lookup', tenant: 'acme', runId, idempotencyKey: `${runId}:c1` });
      expect(seen!.signal).to.be.instanceOf(AbortSignal);
      expect(seen!.state).to.deep.equal({ city: 'Lisbon', prefs: { view: 'sea' } });
      expect(Object.isFrozen(seen!.state) && Object.isFrozen(seen!.state.prefs)).to.equal(true);
    });

    it('survives being spread into a wrapper: { ...ctx } keeps every field, the live signal included', async () => {
      const seen: { keys?: string[]; aborted?: boolean; wrappedSignal?: AbortSignal; ownSignal?: AbortSignal } = {};
      const tools = new ToolRegistry().register({ name: 'lookup' }, (_args, ctx) => {
        const wrapped = { ...ctx, extra: true };
        seen.keys = Object.keys(wrapped).sort();
        seen.wrappedSignal = wrapped.signal;
        seen.ownSignal = ctx.signal;
        return new Promise((resolve) => wrapped.signal.addEventListener('abort', () => resolve((seen.aborted = true))));
      });
      const controller = new AbortController();
      const running = new AgentRunner({ provider: new ScriptedProvider([lookups(1), { text: 'done' }]), tools }).run(planner, 'go', { signal: controller.signal });
      await new Promise((resolve) => setTimeout(resolve, 5));
      controller.abort();
      const result = await running;
      expect(result.status).to.equal('cancelled');
      expect(seen.keys).to.deep.equal(['callId', 'extra', 'idempotencyKey', 'messages', 'record', 'runAgent', 'runId', 'signal', 'state', 'tenant', 'tool']);
      expect(seen.wrappedSignal).to.equal(seen.ownSignal);
      expect(seen.aborted).to.equal(true);
    });

    it('merges recorded deltas of successful calls in call order into the run\'s state', async () => {
      const tools = new ToolRegistry()
        .register({ name: 'lookup', args: t.type({ q: t.string }) }, async ({ q }, ctx) => {
          await new Promise((resolve) => setTimeout(resolve, q === 'q1' ? 15 : 1));
          ctx.record({ last: q, [q]: true });
          return q;
        })
        .register({ name: 'broken' }, (_args, ctx) => {
          ctx.record({ last: 'broken' });
          throw new Error('no');
        });
      const provider = new ScriptedProvider([{ toolCalls: [...lookups(2).toolCalls!, { id: 'c3', name: 'broken', arguments: '{}' }] }, { text: 'done' }]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'go', { state: { city: 'Lisbon' } });
      expect(result.state).to.deep.equal({ city: 'Lisbon', last: 'q2', q1: true, q2: true });
    });

    it('shows the next batch the state the previous batches left', async () => {
      const seen: unknown[] = [];
      const tools = new ToolRegistry().register({ name: 'count' }, (_args, ctx) => {
        seen.push(ctx.state.count);
        ctx.record({ count: ((ctx.state.count as number | undefined) ?? 0) + 1 });
        return 'ok';
      });
      const call = { toolCalls: [{ id: 'c1', name: 'count', arguments: '{}' }] };
      const result = await new AgentRunner({ provider: new ScriptedProvider([call, call, { text: 'done' }]), tools }).run(planner, 'go');
      expect(seen).to.deep.equal([undefined, 1]);
      expect(result.state).to.deep.equal({ count: 2 });
    });
  });

  describe('activity$', () => {
    it('reports runs and calls as they happen, with lanes and virtual times', () => {
      const seen: string[] = [];
      testScheduler.run(({ cold, flush }) => {
        const tools = new ToolRegistry().register({ name: 'lookup' }, () => cold('--(r|)', { r: 'x' }));
        const runner = new AgentRunner({ provider: new ScriptedProvider([lookups(2), { text: 'done' }]), tools, concurrency: new ConcurrencyConfig({ maxConcurrentTools: 1 }) });
        runner.activity$.subscribe((a: RunnerActivity) => {
          const detail = a.type === 'queued' ? ` ${a.callId} on ${a.lane}` : a.type === 'started' ? ` ${a.callId}` : a.type === 'settled' || a.type === 'ended' ? ` ${a.callId} ${a.outcome}` : a.type === 'run-ended' ? ` ${a.status}` : '';
          seen.push(`${a.at} ${a.type}${detail}`);
        });
        runner.run$(planner, 'go').subscribe();
        flush();
      });
      expect(seen).to.deep.equal([
        '0 run-started',
        '0 started c1',
        '0 queued c2 on turn',
        '2 ended c1 result',
        // c1's permit goes back before its outcome goes on: c2 starts before c1 is settled.
        '2 started c2',
        '2 settled c1 result',
        '4 ended c2 result',
        '4 settled c2 result',
        '4 run-ended completed',
      ]);
    });
  });

  describe('activity$ when a run is left', () => {
    it('reports run-ended (cancelled) for a run whose subscriber unsubscribed', () => {
      const seen: string[] = [];
      testScheduler.run(({ cold, flush }) => {
        const tools = new ToolRegistry().register({ name: 'lookup' }, () => cold('-----(r|)', { r: 'x' }));
        const runner = new AgentRunner({ provider: new ScriptedProvider([lookups(1), { text: 'done' }]), tools });
        runner.activity$.subscribe((a) => (a.type === 'run-started' || a.type === 'run-ended') && seen.push(`${a.at} ${a.type}${a.type === 'run-ended' ? ` ${a.status}` : ''}`));
        const subscription = runner.run$(planner, 'go').subscribe();
        testScheduler.schedule(() => subscription.unsubscribe(), 2);
        flush();
      });
      expect(seen).to.deep.equal(['0 run-started', '2 run-ended cancelled']);
    });
  });

  describe('a consumer that leaves on a tool event', () => {
    it('starts no further call, aborts none that never ran, asks the model nothing more, and leaves the lanes idle', () => {
      const started: string[] = [];
      const slowSignals: AbortSignal[] = [];
      const tools = new ToolRegistry()
        .register({ name: 'fast' }, (_args, ctx) => {
          started.push(ctx.callId);
          return 'fast';
        })
        .register({ name: 'slow' }, (_args, ctx) => {
          started.push(ctx.callId);
          slowSignals.push(ctx.signal);
          return new Promise(() => undefined);
        });
      const provider = new ScriptedProvider([
        { toolCalls: [{ id: 'a', name: 'fast', arguments: '{}' }, { id: 'b', name: 'slow', arguments: '{}' }, { id: 'c', name: 'fast', arguments: '{}' }] },
        { text: 'done' },
      ]);
      const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ perTool: { slow: 1 }, perTenant: 4 }) });
      const seen: string[] = [];
      // The scripted model and the fast bodies answer at once: the whole run would go by inside
      // subscribe, so the consumer leaves from within (takeWhile unsubscribes as it completes).
      runner
        .run$(planner, 'go')
        .pipe(takeWhile((event) => event.type !== 'TOOL_RESULT', true))
        .subscribe((event) => seen.push(event.type));
      expect(seen).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'TOOL_RESULT']);
      expect(started).to.deep.equal(['a']);
      expect(slowSignals).to.deep.equal([]);
      expect(provider.requests).to.have.length(1);
      expect(runner.lanes.occupancy()).to.deep.equal([]);
    });
  });

  describe('tools registered as the runner goes', () => {
    it('shows the next run a tool registered after an earlier run, and lets an agent that named it run', async () => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => 1);
      const provider = new ScriptedProvider([{ text: 'one' }, { text: 'two' }, { toolCalls: [{ id: 'c1', name: 'late', arguments: {} }] }, { text: 'three' }]);
      const runner = new AgentRunner({ provider, tools });
      const picky = new Agent({ name: 'picky', instructions: '', model: 'm', tools: ['late'] });
      expect(() => runner.run$(picky, 'go')).to.throw(ConfigError, 'agent picky lists tools the registry does not have: late');
      await runner.run(planner, 'go');
      tools.register({ name: 'late' }, () => 'here');
      await runner.run(planner, 'go');
      const result = await runner.run(picky, 'go');
      expect(provider.requests.map((request) => request.tools.map((tool) => tool.name))).to.deep.equal([['lookup'], ['lookup', 'late'], ['late'], ['late']]);
      expect(result.status).to.equal('completed');
      expect(result.events.find((event) => event.type === 'TOOL_RESULT')).to.deep.include({ callId: 'c1', result: 'here' });
    });
  });

  describe('bad options', () => {
    const tools = new ToolRegistry().register({ name: 'lookup' }, () => 1);
    const provider = new ScriptedProvider([]);
    const cases: Array<{ title: string; make: () => unknown; message: string | RegExp }> = [
      { title: 'a runner without a provider', make: () => new AgentRunner({ tools } as never), message: 'provider must have a respond(request, signal) method, got undefined' },
      { title: 'a runner whose tools are not a registry', make: () => new AgentRunner({ provider, tools: [] as never }), message: 'tools must be a ToolRegistry, got []' },
      { title: 'a runner with a number for concurrency', make: () => new AgentRunner({ provider, tools, concurrency: 2 as never }), message: 'concurrency must be a ConcurrencyConfig or its options, got 2' },
      { title: 'a runner with invalid plain concurrency options', make: () => new AgentRunner({ provider, tools, concurrency: { maxConcurrentTools: 0 } }), message: 'maxConcurrentTools must be a positive integer, got 0' },
      { title: 'an agent with invalid plain concurrency options', make: () => new Agent({ name: 'a', instructions: '', model: 'm', concurrency: { perTool: { x: -1 } } }), message: 'perTool.x must be a positive integer, got -1' },
      { title: 'a runner with an unknown option', make: () => new AgentRunner({ provider, tools, concurency: 1 } as never), message: /^AgentRunner has no field concurency/ },
      { title: 'a run with an empty tenant', make: () => new AgentRunner({ provider, tools }).run$(planner, 'go', { tenant: '' }), message: 'tenant must be a non-empty string, got ""' },
      { title: 'a run with a fractional maxTurns', make: () => new AgentRunner({ provider, tools }).run$(planner, 'go', { maxTurns: 1.5 }), message: 'maxTurns must be a positive integer, got 1.5' },
      { title: 'an agent whose name model APIs cannot take', make: () => new Agent({ name: 'travel desk', instructions: '', model: 'm' }), message: 'Agent name must be 1 to 64 letters, digits, "_" or "-", got "travel desk"' },
      { title: 'an agent whose name is longer than 64 characters', make: () => new Agent({ name: 'a'.repeat(65), instructions: '', model: 'm' }), message: /^Agent name must be 1 to 64 letters, digits, "_" or "-", got "a{56}\.\.\.$/ },
      { title: 'an agent without a model', make: () => new Agent({ name: 'a', instructions: '' } as never), message: 'Agent model must be a non-empty string, got undefined' },
      { title: 'an agent listing an unregistered tool', make: () => new AgentRunner({ provider, tools }).run$(new Agent({ name: 'a', instructions: '', model: 'm', tools: ['nope'] }), 'go'), message: 'agent a lists tools the registry does not have: nope' },
      { title: 'an agent with both freeText and an output codec', make: () => new Agent({ name: 'a', instructions: '', model: 'm', freeText: true, output: t.string }), message: 'Agent freeText cannot be true with an output codec: the final answer is either free text or decoded JSON' },
    ];
    it('refuses bad options to run() with a rejected Promise, never a throw, even called without its runner', async () => {
      const runner = new AgentRunner({ provider, tools });
      const refused = runner.run(planner, 'go', { tenant: '' });
      expect(refused).to.be.instanceOf(Promise);
      const error = await refused.then(
        () => undefined,
        (reason: unknown) => reason,
      );
      expect(error).to.be.instanceOf(ConfigError);
      const { run } = runner;
      const unbound = run(planner, 'go');
      expect(unbound).to.be.instanceOf(Promise);
      expect(await unbound.then(() => undefined, (reason: unknown) => reason)).to.be.instanceOf(TypeError);
    });

    for (const c of cases) {
      it(`refuses ${c.title} with a ConfigError`, () => {
        let caught: unknown;
        try {
          c.make();
        } catch (error) {
          caught = error;
        }
        expect(caught).to.be.instanceOf(ConfigError);
        if (c.message instanceof RegExp) expect((caught as Error).message).to.match(c.message);
        else expect((caught as Error).message).to.equal(c.message);
      });
    }
  });
});
