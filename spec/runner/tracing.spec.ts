// OpenTelemetry spans by the GenAI conventions, read back from sdk-trace-base's in-memory
// exporter: the span tree (invoke_agent > chat, execute_tool; a nested run under its calling
// tool's span), the attributes (tool name, call id, operation, error.type, lane waits in virtual
// time, stop classes), and that every span started ends on every ending.
import { expect } from 'chai';
import { context, ROOT_CONTEXT, trace, type Context, type ContextManager, type Span } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import * as t from 'io-ts';
import { NEVER } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import {
  Agent,
  AgentRunner,
  CallInterruptedError,
  LaneLostError,
  LaneTable,
  type LaneStore,
  ConcurrencyConfig,
  ConfigError,
  OnToolError,
  ScriptedProvider,
  ToolRegistry,
  type ModelResponse,
  type RunResult,
  type ToolCall,
} from '../../lib/index.js';

const planner = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });
const ask = (id: string, name: string, args: unknown = {}): ToolCall => ({ id, name, arguments: args as ToolCall['arguments'] });

/** Counts spans started and ended, so a spec can say every span that started has ended. */
class Counting implements SpanProcessor {
  started = 0;
  ended = 0;
  onStart(): void {
    this.started++;
  }
  onEnd(): void {
    this.ended++;
  }
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function tracing() {
  const exporter = new InMemorySpanExporter();
  const counting = new Counting();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter), counting] });
  return { exporter, counting, tracer: provider.getTracer('agent-lanes-spec') };
}

const ms = (time: readonly [number, number]): number => time[0] * 1000 + time[1] / 1e6;

/** The finished spans as `name (parent name)`, in the order they started. */
function tree(spans: readonly ReadableSpan[]): string[] {
  const byId = new Map(spans.map((span) => [span.spanContext().spanId, span]));
  return [...spans]
    .sort((a, b) => ms(a.startTime) - ms(b.startTime))
    .map((span) => {
      const parent = span.parentSpanContext === undefined ? undefined : byId.get(span.parentSpanContext.spanId);
      return parent === undefined ? span.name : `${span.name} < ${parent.name}`;
    });
}

function one(spans: readonly ReadableSpan[], test: (span: ReadableSpan) => boolean): ReadableSpan {
  const found = spans.filter(test);
  expect(found, 'exactly one span').to.have.length(1);
  return found[0]!;
}

/** The chat spans, by turn. */
const chats = (spans: readonly ReadableSpan[]) =>
  spans.filter((span) => span.name.startsWith('chat')).sort((a, b) => (a.attributes['agent_lanes.turn'] as number) - (b.attributes['agent_lanes.turn'] as number));

const callSpan = (spans: readonly ReadableSpan[], callId: string) => one(spans, (span) => span.attributes['gen_ai.tool.call.id'] === callId);

describe('AgentRunner with a tracer', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('emits invoke_agent, a chat span per model turn and an execute_tool span per call, under the run', async () => {
    const { exporter, tracer } = tracing();
    const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ q: t.string }) }, ({ q }) => `found ${q}`);
    const provider = new ScriptedProvider([{ toolCalls: [ask('c1', 'lookup', { q: 'a' }), ask('c2', 'lookup', { q: 'b' })] }, { text: 'done' }]);
    const result = await new AgentRunner({ provider, tools, tracer }).run(planner, 'go', { tenant: 'acme' });
    expect(result.status).to.equal('completed');
    const spans = exporter.getFinishedSpans();
    expect(tree(spans)).to.have.members(['invoke_agent planner', 'chat test-model < invoke_agent planner', 'execute_tool lookup < invoke_agent planner', 'execute_tool lookup < invoke_agent planner', 'chat test-model < invoke_agent planner']);
    const run = one(spans, (span) => span.name === 'invoke_agent planner');
    expect(run.parentSpanContext).to.equal(undefined);
    expect(run.attributes).to.deep.equal({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.provider.name': '_OTHER',
      'gen_ai.agent.name': 'planner',
      'gen_ai.request.model': 'test-model',
      'agent_lanes.run.id': (result.events[0] as { runId: string }).runId,
      'agent_lanes.tenant': 'acme',
      'agent_lanes.run.status': 'completed',
    });
    expect(chats(spans).map((span) => span.attributes)).to.deep.equal([
      { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': '_OTHER', 'gen_ai.request.model': 'test-model', 'gen_ai.agent.name': 'planner', 'agent_lanes.turn': 1 },
      { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': '_OTHER', 'gen_ai.request.model': 'test-model', 'gen_ai.agent.name': 'planner', 'agent_lanes.turn': 2 },
    ]);
    expect(callSpan(spans, 'c2').attributes).to.deep.equal({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'lookup',
      'gen_ai.tool.call.id': 'c2',
      'gen_ai.tool.type': 'function',
      'agent_lanes.turn': 1,
      'agent_lanes.call.index': 1,
      'agent_lanes.lane.wait_ms': 0,
      'agent_lanes.call.outcome': 'result',
      'agent_lanes.call.dispatched': true,
    });
  });

  it('says how long a call waited in its lanes, and which held it, in virtual time', () => {
    const { exporter, tracer } = tracing();
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry().register({ name: 'lookup' }, () => cold('---(r|)', { r: 'x' }));
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2, perTool: { lookup: 1 } });
      const provider = new ScriptedProvider([{ toolCalls: [ask('c1', 'lookup'), ask('c2', 'lookup')] }, { text: 'done' }]);
      new AgentRunner({ provider, tools, concurrency, tracer }).run$(planner, 'go').subscribe();
      flush();
    });
    const spans = exporter.getFinishedSpans();
    const [first, second] = [callSpan(spans, 'c1'), callSpan(spans, 'c2')];
    expect(first.attributes['agent_lanes.lane.wait_ms']).to.equal(0);
    expect(second.attributes).to.deep.include({ 'agent_lanes.lane.wait_ms': 3, 'agent_lanes.lane.queued_on': ['tool:lookup'], 'agent_lanes.lane.held_by': 'tool:lookup' });
    // The span starts when the call is queued, and ends when its body answers.
    expect(ms(first.duration)).to.equal(3);
    expect(ms(second.duration)).to.equal(6);
    expect(second.events.map((event) => [event.name, ms(event.time) - ms(second.startTime), event.attributes])).to.deep.equal([
      ['agent_lanes.lane.queued', 0, { 'agent_lanes.lane': 'tool:lookup' }],
      ['agent_lanes.call.started', 3, {}],
    ]);
  });

  it('gives a failed call error.type and an error status; a timed-out one ends at its ceiling', () => {
    const { exporter, counting, tracer } = tracing();
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry()
        .register({ name: 'broken' }, () => {
          throw new TypeError('no');
        })
        .register({ name: 'slow' }, () => cold('-----(r|)', { r: 'x' }))
        .register({ name: 'typed', args: t.type({ q: t.string }) }, () => 'x');
      const concurrency = new ConcurrencyConfig({ perToolSeconds: { slow: 0.002 } });
      const provider = new ScriptedProvider([{ toolCalls: [ask('b', 'broken'), ask('s', 'slow'), ask('u', 'nope'), ask('a', 'typed', { q: 1 })] }, { text: 'done' }]);
      new AgentRunner({ provider, tools, concurrency, tracer }).run$(planner, 'go').subscribe();
      flush();
    });
    const spans = exporter.getFinishedSpans();
    const errors = ['b', 's', 'u', 'a'].map((id) => {
      const span = callSpan(spans, id);
      return [id, span.attributes['error.type'], span.status.code, span.attributes['agent_lanes.call.dispatched'], ms(span.duration)];
    });
    expect(errors).to.deep.equal([
      ['b', 'TypeError', 2, true, 0],
      ['s', 'ToolTimedOutError', 2, true, 2],
      ['u', 'UnknownToolError', 2, false, 0],
      ['a', 'ToolArgumentsError', 2, false, 0],
    ]);
    expect(callSpan(spans, 'b').status.message).to.equal('no');
    expect(counting.ended).to.equal(counting.started);
  });

  it('classifies stopped calls by their stop class, and ends the run span cancelled', () => {
    const { exporter, counting, tracer } = tracing();
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry()
        .register({ name: 'charge' }, () => cold('----------(r|)', { r: 'x' }))
        .register({ name: 'search', idempotent: true }, () => cold('----------(r|)', { r: 'x' }));
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2 });
      const provider = new ScriptedProvider([{ toolCalls: [ask('c', 'charge'), ask('s', 'search'), ask('q', 'search')] }, { text: 'never' }]);
      const controller = new AbortController();
      testScheduler.schedule(() => controller.abort('the user left'), 4);
      new AgentRunner({ provider, tools, concurrency, tracer }).run$(planner, 'go', { signal: controller.signal }).subscribe();
      flush();
    });
    const spans = exporter.getFinishedSpans();
    const classes = ['c', 's', 'q'].map((id) => {
      const { attributes } = callSpan(spans, id);
      return [id, attributes['agent_lanes.stop.class'], attributes['error.type'], attributes['agent_lanes.call.outcome']];
    });
    expect(classes).to.deep.equal([
      ['c', 'indeterminate', 'indeterminate', 'indeterminate'],
      ['s', 'safe_to_call_again', 'CallStoppedError', 'error'],
      ['q', 'never_dispatched', 'CallStoppedError', 'error'],
    ]);
    expect(ms(callSpan(spans, 'c').duration)).to.equal(4);
    const run = one(spans, (span) => span.name === 'invoke_agent planner');
    expect(run.attributes).to.deep.include({ 'agent_lanes.run.status': 'cancelled', 'error.type': 'cancelled' });
    expect(run.status).to.deep.equal({ code: 2, message: 'the run was cancelled: the user left' });
    expect(counting.ended).to.equal(counting.started);
  });

  it('gives a call cut off alone (its request got no answer) the stop class its outcome has, and a call that failed by itself none', () => {
    const { exporter, counting, tracer } = tracing();
    testScheduler.run(({ cold, flush }) => {
      const cutOff = () => cold('--#', undefined, new CallInterruptedError('its request to MCP server files got no answer in time'));
      const tools = new ToolRegistry()
        .register({ name: 'search', idempotent: true }, cutOff)
        .register({ name: 'charge' }, cutOff)
        .register({ name: 'broken', idempotent: true }, () => cold('--#', undefined, new RangeError('bad page')));
      const provider = new ScriptedProvider([{ toolCalls: [ask('s', 'search'), ask('c', 'charge'), ask('b', 'broken')] }, { text: 'done' }]);
      new AgentRunner({ provider, tools, tracer }).run$(planner, 'go').subscribe();
      flush();
    });
    const spans = exporter.getFinishedSpans();
    const classes = ['s', 'c', 'b'].map((id) => {
      const { attributes } = callSpan(spans, id);
      return [id, attributes['agent_lanes.stop.class'], attributes['error.type'], attributes['agent_lanes.call.outcome']];
    });
    expect(classes).to.deep.equal([
      ['s', 'safe_to_call_again', 'CallInterruptedError', 'error'],
      ['c', 'indeterminate', 'indeterminate', 'indeterminate'],
      ['b', undefined, 'RangeError', 'error'],
    ]);
    expect(counting.ended).to.equal(counting.started);
  });

  it('gives an idempotent call whose fleet lease was lost the stop class safe_to_call_again, from its outcome', () => {
    const { exporter, tracer } = tracing();
    testScheduler.run(({ cold, flush }) => {
      // A store that loses the lease of every tool lane 2ms after granting it, as a fleet store whose Redis lost its data.
      const table = new LaneTable();
      const lanes: LaneStore = {
        changes$: table.changes$,
        occupancy: () => table.occupancy(),
        enter(key, limit, onGrant, party) {
          const permit = table.enter(key, limit, onGrant, party);
          const { lost } = onGrant as { lost?: (error: Error) => void };
          if (key.startsWith('tool:') && typeof lost === 'function') {
            testScheduler.schedule(() => lost.call(onGrant, new LaneLostError(key, `its lease on ${key} was lost (Redis lost its data)`)), 2);
          }
          return permit;
        },
      };
      const tools = new ToolRegistry()
        .register({ name: 'search', idempotent: true }, () => cold('----------(r|)', { r: 'x' }))
        .register({ name: 'charge' }, () => cold('----------(r|)', { r: 'x' }));
      const concurrency = new ConcurrencyConfig({ perTool: { search: 1, charge: 1 } });
      const provider = new ScriptedProvider([{ toolCalls: [ask('s', 'search'), ask('c', 'charge')] }, { text: 'done' }]);
      new AgentRunner({ provider, tools, concurrency, lanes, tracer }).run$(planner, 'go').subscribe();
      flush();
    });
    const spans = exporter.getFinishedSpans();
    const classes = ['s', 'c'].map((id) => {
      const { attributes } = callSpan(spans, id);
      return [id, attributes['agent_lanes.stop.class'], attributes['error.type']];
    });
    expect(classes).to.deep.equal([
      ['s', 'safe_to_call_again', 'LaneLostError'],
      ['c', 'indeterminate', 'indeterminate'],
    ]);
  });

  it('ends every span when the run is left by unsubscribing, the stopped calls classified', () => {
    const { exporter, counting, tracer } = tracing();
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry()
        .register({ name: 'quick' }, () => cold('-(r|)', { r: 'x' }))
        .register({ name: 'charge' }, () => cold('----------(r|)', { r: 'x' }))
        .register({ name: 'search', idempotent: true }, () => cold('----------(r|)', { r: 'x' }));
      // c and k start at once; s takes k's place at 1; q waits.
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2 });
      const provider = new ScriptedProvider([{ toolCalls: [ask('c', 'charge'), ask('k', 'quick'), ask('s', 'search'), ask('q', 'search')] }, { text: 'never' }]);
      const subscription = new AgentRunner({ provider, tools, concurrency, tracer }).run$(planner, 'go').subscribe();
      testScheduler.schedule(() => subscription.unsubscribe(), 4);
      flush();
    });
    const spans = exporter.getFinishedSpans();
    expect(counting.started).to.equal(6);
    expect(counting.ended).to.equal(6);
    const classes = ['c', 'k', 's', 'q'].map((id) => [id, callSpan(spans, id).attributes['agent_lanes.stop.class'] ?? callSpan(spans, id).attributes['agent_lanes.call.outcome']]);
    // k had answered, but went out after c in call order: its result stands.
    expect(classes).to.deep.equal([
      ['c', 'indeterminate'],
      ['k', 'result'],
      ['s', 'safe_to_call_again'],
      ['q', 'never_dispatched'],
    ]);
    expect(one(spans, (span) => span.name === 'invoke_agent planner').attributes).to.deep.include({ 'agent_lanes.run.status': 'cancelled', 'error.type': 'cancelled' });
  });

  const endings: Array<{ title: string; run: (runner: AgentRunner) => Promise<RunResult>; tools: ToolRegistry; provider: () => ScriptedProvider | { respond: () => Promise<ModelResponse> }; status: string; onToolError?: boolean }> = [
    {
      title: 'a result',
      tools: new ToolRegistry().register({ name: 'work' }, () => 1),
      provider: () => new ScriptedProvider([{ toolCalls: [ask('c1', 'work')] }, { text: 'done' }]),
      run: (runner) => runner.run(planner, 'go'),
      status: 'completed',
    },
    {
      title: 'a failure under FAIL_RUN',
      tools: new ToolRegistry().register({ name: 'work' }, () => Promise.reject(new Error('no'))).register({ name: 'wait' }, () => NEVER),
      provider: () => new ScriptedProvider([{ toolCalls: [ask('c1', 'wait'), ask('c2', 'work')] }, { text: 'done' }]),
      run: (runner) => runner.run(new Agent({ name: 'planner', instructions: '', model: 'test-model', onToolError: OnToolError.FAIL_RUN }), 'go'),
      status: 'failed',
    },
    {
      title: 'a provider that fails',
      tools: new ToolRegistry(),
      provider: () => ({ respond: () => Promise.reject(new Error('503')) }),
      run: (runner) => runner.run(planner, 'go'),
      status: 'failed',
    },
    {
      title: 'a cancel while the model is asked',
      tools: new ToolRegistry(),
      provider: () => ({ respond: () => new Promise<ModelResponse>(() => undefined) }),
      run: (runner) => {
        const controller = new AbortController();
        const result = runner.run(planner, 'go', { signal: controller.signal });
        setTimeout(() => controller.abort(), 5);
        return result;
      },
      status: 'cancelled',
    },
  ];
  for (const ending of endings) {
    it(`ends every span it started on ${ending.title}`, async () => {
      const { exporter, counting, tracer } = tracing();
      const result = await ending.run(new AgentRunner({ provider: ending.provider(), tools: ending.tools, tracer }));
      expect(result.status).to.equal(ending.status);
      expect(counting.started).to.be.greaterThan(1);
      expect(counting.ended).to.equal(counting.started);
      expect(one(exporter.getFinishedSpans(), (span) => span.name === 'invoke_agent planner').attributes['agent_lanes.run.status']).to.equal(ending.status);
    });
  }

  it('says why a model request failed, and why the run did', async () => {
    const { exporter, tracer } = tracing();
    const failing = { respond: () => Promise.reject(Object.assign(new Error('overloaded'), { name: 'ProviderHttpError' })) };
    await new AgentRunner({ provider: failing, tools: new ToolRegistry(), tracer }).run(planner, 'go');
    const spans = exporter.getFinishedSpans();
    expect(one(spans, (span) => span.name === 'chat test-model').attributes['error.type']).to.equal('ProviderHttpError');
    expect(one(spans, (span) => span.name === 'invoke_agent planner').attributes['error.type']).to.equal('ProviderError');
  });

  it('ends a chat span cancelled when the run stops while the model is asked', async () => {
    const { exporter, tracer } = tracing();
    const controller = new AbortController();
    const running = new AgentRunner({ provider: { respond: () => new Promise<ModelResponse>(() => undefined) }, tools: new ToolRegistry(), tracer }).run(planner, 'go', { signal: controller.signal });
    controller.abort();
    await running;
    const chat = one(exporter.getFinishedSpans(), (span) => span.name === 'chat test-model');
    expect(chat.attributes['error.type']).to.equal('cancelled');
  });

  it('reads the usage and finish reason a reply reports, and sums the run\'s usage', async () => {
    const { exporter, tracer } = tracing();
    const reply = (response: ModelResponse, inputTokens: number, outputTokens: number): ModelResponse =>
      ({ ...response, usage: { inputTokens, outputTokens }, finishReason: response.text === undefined ? 'tool-calls' : 'stop' }) as ModelResponse;
    const provider = new ScriptedProvider([reply({ toolCalls: [ask('c1', 'work')] }, 10, 3), reply({ text: 'done' }, 20, 5)]);
    await new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'work' }, () => 1), tracer }).run(planner, 'go');
    const spans = exporter.getFinishedSpans();
    expect(chats(spans).map((span) => [span.attributes['gen_ai.usage.input_tokens'], span.attributes['gen_ai.usage.output_tokens'], span.attributes['gen_ai.response.finish_reasons']])).to.deep.equal([
      [10, 3, ['tool-calls']],
      [20, 5, ['stop']],
    ]);
    expect(one(spans, (span) => span.name === 'invoke_agent planner').attributes).to.deep.include({ 'gen_ai.usage.input_tokens': 30, 'gen_ai.usage.output_tokens': 8 });
  });

  it('nests a nested run\'s spans under the span of the tool that started it', async () => {
    const { exporter, tracer } = tracing();
    const researcher = new Agent({ name: 'researcher', instructions: '', model: 'small-model', tools: ['search'] });
    const tools = new ToolRegistry()
      .register({ name: 'delegate' }, async (_args, ctx) => (await ctx.runAgent(researcher, 'find')).output)
      .register({ name: 'search' }, () => 'hit');
    const provider = new ScriptedProvider({
      planner: [{ toolCalls: [ask('d1', 'delegate')] }, { text: 'planned' }],
      researcher: [{ toolCalls: [ask('s1', 'search')] }, { text: 'found' }],
    });
    const result = await new AgentRunner({ provider, tools, tracer }).run(new Agent({ name: 'planner', instructions: '', model: 'test-model', tools: ['delegate'] }), 'go');
    expect(result.output).to.equal('planned');
    const spans = exporter.getFinishedSpans();
    expect(tree(spans)).to.have.members([
      'invoke_agent planner',
      'chat test-model < invoke_agent planner',
      'execute_tool delegate < invoke_agent planner',
      'invoke_agent researcher < execute_tool delegate',
      'chat small-model < invoke_agent researcher',
      'execute_tool search < invoke_agent researcher',
      'chat small-model < invoke_agent researcher',
      'chat test-model < invoke_agent planner',
    ]);
    const traceIds = new Set(spans.map((span) => span.spanContext().traceId));
    expect(traceIds.size).to.equal(1);
  });

  describe('with a context manager', () => {
    // A synchronous context manager: enough to see which span is active while a body starts.
    class StackContextManager implements ContextManager {
      private stack: Context[] = [];
      active(): Context {
        return this.stack[this.stack.length - 1] ?? ROOT_CONTEXT;
      }
      with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
        this.stack.push(ctx);
        try {
          return fn.call(thisArg, ...args);
        } finally {
          this.stack.pop();
        }
      }
      bind<T>(_ctx: Context, target: T): T {
        return target;
      }
      enable(): this {
        return this;
      }
      disable(): this {
        this.stack = [];
        return this;
      }
    }
    const manager = new StackContextManager();
    before(() => context.setGlobalContextManager(manager));
    after(() => context.disable());

    it('runs a body with its call\'s span active, so spans it starts nest under it; and the run under the caller\'s span', async () => {
      const { exporter, tracer } = tracing();
      const active: Array<Span | undefined> = [];
      const tools = new ToolRegistry().register({ name: 'work' }, () => {
        active.push(trace.getActiveSpan());
        tracer.startSpan('inside the body').end();
        return 1;
      });
      const provider = new ScriptedProvider([{ toolCalls: [ask('c1', 'work')] }, { text: 'done' }]);
      const outer = tracer.startSpan('request');
      await context.with(trace.setSpan(context.active(), outer), () => new AgentRunner({ provider, tools, tracer }).run(planner, 'go'));
      outer.end();
      const spans = exporter.getFinishedSpans();
      expect(tree(spans)).to.include.members(['request', 'invoke_agent planner < request', 'inside the body < execute_tool work']);
      expect(active[0]!.spanContext().spanId).to.equal(callSpan(spans, 'c1').spanContext().spanId);
    });
  });

  it('refuses a tracer that is not one, naming the field', () => {
    const make = () => new AgentRunner({ provider: new ScriptedProvider([]), tools: new ToolRegistry(), tracer: {} as never });
    expect(make).to.throw(ConfigError, 'tracer must be an OpenTelemetry Tracer (startSpan), got object');
  });

  it('traces nothing, and watches no activity, without a tracer', async () => {
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [ask('c1', 'work')] }, { text: 'done' }]), tools: new ToolRegistry().register({ name: 'work' }, () => 1) });
    const observed = (runner as unknown as { activity: { observed: boolean } }).activity;
    expect(observed.observed).to.equal(false);
    expect((await runner.run(planner, 'go')).status).to.equal('completed');
  });
});
