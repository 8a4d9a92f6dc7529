// The spans say what the GenAI conventions ask (provider name, server, response id and model,
// tool description; a usage not reported left out), a streamed turn's calls keep their own
// error.type and stop class, and the chat span is active for the whole request, a streamed
// reply's reading included (sdk-trace-base, context-async-hooks, the AI SDK's mock model).
import { expect } from 'chai';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { MockLanguageModelV3 } from 'ai/test';
import { NEVER, Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  OnToolError,
  ScriptedProvider,
  ToolRegistry,
  type ModelProvider,
  type ModelResponse,
  type ModelStreamPart,
  type ToolCall,
} from '../../lib/index.js';
import { OpenAIChatProvider } from '../../lib/providers.js';
import { aiSdkProvider } from '../../lib/providers/aiSdkProvider.js';

const planner = new Agent({ name: 'planner', instructions: '', model: 'test-model' });
const ask = (id: string, name: string, args: unknown = {}): ToolCall => ({ id, name, arguments: args as ToolCall['arguments'] });
const part = (call: ToolCall): ModelStreamPart => ({ type: 'tool-call', ...call });

function tracing() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { exporter, tracer: provider.getTracer('conventions-spec') };
}

function one(spans: readonly ReadableSpan[], test: (span: ReadableSpan) => boolean): ReadableSpan {
  const found = spans.filter(test);
  expect(found, 'exactly one span').to.have.length(1);
  return found[0]!;
}
const named = (spans: readonly ReadableSpan[], name: string) => one(spans, (span) => span.name === name);
const callSpan = (spans: readonly ReadableSpan[], id: string) => one(spans, (span) => span.attributes['gen_ai.tool.call.id'] === id);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe('Tracing a streamed turn', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('gives each call that settled before MODEL_RESPONSE its own error.type', () => {
    const { exporter, tracer } = tracing();
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry()
        .register({ name: 'broken' }, () => {
          throw new TypeError('no');
        })
        .register({ name: 'slow' }, () => cold('-----(r|)', { r: 'x' }))
        .register({ name: 'fine' }, () => 'ok');
      const concurrency = new ConcurrencyConfig({ perToolSeconds: { slow: 0.002 } });
      // Every call settles (at 0 or 2) long before the stream ends at 10.
      const turn = () => cold<ModelStreamPart>('(abcd) 6ms (f|)', { a: part(ask('b', 'broken')), b: part(ask('s', 'slow')), c: part(ask('u', 'nope')), d: part(ask('k', 'fine')), f: { type: 'finish', finishReason: 'tool-calls' } });
      new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, concurrency, tracer }).run$(planner, 'go').subscribe();
      flush();
    });
    const spans = exporter.getFinishedSpans();
    expect(['b', 's', 'u', 'k'].map((id) => [id, callSpan(spans, id).attributes['error.type'], callSpan(spans, id).attributes['agent_lanes.call.outcome']])).to.deep.equal([
      ['b', 'TypeError', 'error'],
      ['s', 'ToolTimedOutError', 'error'],
      ['u', 'UnknownToolError', 'error'],
      ['k', undefined, 'result'],
    ]);
  });

  it('gives each call stopped before MODEL_RESPONSE its stop class', () => {
    const { exporter, tracer } = tracing();
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry()
        .register({ name: 'charge' }, () => cold('----------(r|)', { r: 'x' }))
        .register({ name: 'search', idempotent: true }, () => cold('----------(r|)', { r: 'x' }));
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2 });
      const turn = () => cold<ModelStreamPart>('(abc)', { a: part(ask('c', 'charge')), b: part(ask('s', 'search')), c: part(ask('q', 'search')) });
      const controller = new AbortController();
      testScheduler.schedule(() => controller.abort('the user left'), 4);
      new AgentRunner({ provider: new ScriptedProvider([turn]), tools, concurrency, tracer }).run$(planner, 'go', { signal: controller.signal }).subscribe();
      flush();
    });
    const spans = exporter.getFinishedSpans();
    expect(['c', 's', 'q'].map((id) => [id, callSpan(spans, id).attributes['agent_lanes.stop.class'], callSpan(spans, id).attributes['error.type']])).to.deep.equal([
      ['c', 'indeterminate', 'indeterminate'],
      ['s', 'safe_to_call_again', 'CallStoppedError'],
      ['q', 'never_dispatched', 'CallStoppedError'],
    ]);
  });

  it('under FAIL_RUN, names the failure and the calls it stopped', () => {
    const { exporter, tracer } = tracing();
    testScheduler.run(({ cold, flush }) => {
      const tools = new ToolRegistry()
        .register({ name: 'wait' }, () => NEVER)
        .register({ name: 'broken' }, () => cold('--#', undefined, new RangeError('bad')));
      const turn = () => cold<ModelStreamPart>('(ab) 9ms (f|)', { a: part(ask('w', 'wait')), b: part(ask('b', 'broken')), f: { type: 'finish', finishReason: 'tool-calls' } });
      const agent = new Agent({ name: 'planner', instructions: '', model: 'test-model', onToolError: OnToolError.FAIL_RUN });
      new AgentRunner({ provider: new ScriptedProvider([turn]), tools, tracer }).run$(agent, 'go').subscribe();
      flush();
    });
    const spans = exporter.getFinishedSpans();
    expect(callSpan(spans, 'b').attributes['error.type']).to.equal('RangeError');
    expect(callSpan(spans, 'w').attributes).to.deep.include({ 'error.type': 'indeterminate', 'agent_lanes.stop.class': 'indeterminate' });
  });
});

describe('Tracing by the GenAI conventions', () => {
  it('names the provider on chat and invoke_agent spans, with its server; `_OTHER` when it names none', async () => {
    const { exporter, tracer } = tracing();
    const scripted = new ScriptedProvider([{ text: 'done' }]);
    const provider: ModelProvider = { respond: (request, signal) => scripted.respond(request, signal), providerName: 'aws.bedrock', server: { address: 'bedrock.example', port: 8443 } };
    await new AgentRunner({ provider, tools: new ToolRegistry(), tracer }).run(planner, 'go');
    const spans = exporter.getFinishedSpans();
    for (const name of ['chat test-model', 'invoke_agent planner']) {
      expect(named(spans, name).attributes, name).to.deep.include({ 'gen_ai.provider.name': 'aws.bedrock', 'server.address': 'bedrock.example', 'server.port': 8443 });
    }
    const plain = tracing();
    await new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: new ToolRegistry(), tracer: plain.tracer }).run(planner, 'go');
    const chat = named(plain.exporter.getFinishedSpans(), 'chat test-model');
    expect(chat.attributes['gen_ai.provider.name']).to.equal('_OTHER');
    expect(chat.attributes).to.not.have.property('server.address');
  });

  it('reads the response id and model from a whole reply and from a streamed one', async () => {
    const { exporter, tracer } = tracing();
    const streamed = (): Observable<ModelStreamPart> =>
      new Observable<ModelStreamPart>((subscriber) => {
        subscriber.next({ type: 'response', id: 'resp-2', model: 'test-model-0613' });
        subscriber.next({ type: 'text-delta', delta: 'done' });
        subscriber.complete();
      });
    const provider = new ScriptedProvider([{ toolCalls: [ask('c1', 'work')], response: { id: 'resp-1', model: 'test-model-0612' } } as ModelResponse, streamed]);
    const result = await new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'work' }, () => 1), tracer }).run(planner, 'go');
    expect(result.output).to.equal('done');
    const chats = exporter.getFinishedSpans().filter((span) => span.name === 'chat test-model');
    expect(chats.map((span) => [span.attributes['gen_ai.response.id'], span.attributes['gen_ai.response.model']])).to.deep.equal([
      ['resp-1', 'test-model-0612'],
      ['resp-2', 'test-model-0613'],
    ]);
    // Not part of the transcript: a traced run's events are the untraced run's.
    expect(JSON.stringify(result.events)).to.not.include('resp-1');
  });

  it('says the built-in OpenAI adapter\'s server, and the response id and model from the wire, whole or streamed', async () => {
    const completion = { id: 'chatcmpl-1', model: 'gpt-x-2025', choices: [{ message: { content: 'done' }, finish_reason: 'stop' }] };
    const chunk = (body: object) => `data: ${JSON.stringify({ id: 'chatcmpl-2', model: 'gpt-x-2026', ...body })}\n\n`;
    const sse = chunk({ choices: [{ delta: { content: 'do' } }] }) + chunk({ choices: [{ delta: { content: 'ne' }, finish_reason: 'stop' }] }) + 'data: [DONE]\n\n';
    for (const stream of [false, true]) {
      const { exporter, tracer } = tracing();
      const fetch = (async () =>
        stream ? new Response(sse, { headers: { 'content-type': 'text/event-stream' } }) : new Response(JSON.stringify(completion), { headers: { 'content-type': 'application/json' } })) as typeof globalThis.fetch;
      const provider = new OpenAIChatProvider({ baseURL: 'http://127.0.0.1:8099/v1', apiKey: 'k', fetch, stream, retry: { attempts: 1 } });
      const result = await new AgentRunner({ provider, tools: new ToolRegistry(), tracer }).run(planner, 'go');
      expect(result.output).to.equal('done');
      expect(named(exporter.getFinishedSpans(), 'chat test-model').attributes, `stream ${stream}`).to.deep.include({
        'gen_ai.provider.name': 'openai',
        'server.address': '127.0.0.1',
        'server.port': 8099,
        'gen_ai.response.id': stream ? 'chatcmpl-2' : 'chatcmpl-1',
        'gen_ai.response.model': stream ? 'gpt-x-2026' : 'gpt-x-2025',
      });
    }
  });

  it('gives an execute_tool span its tool\'s description', async () => {
    const { exporter, tracer } = tracing();
    const tools = new ToolRegistry().register({ name: 'work', description: 'Does the work' }, () => 1).register({ name: 'bare' }, () => 2);
    const provider = new ScriptedProvider([{ toolCalls: [ask('c1', 'work'), ask('c2', 'bare')] }, { text: 'done' }]);
    await new AgentRunner({ provider, tools, tracer }).run(planner, 'go');
    const spans = exporter.getFinishedSpans();
    expect(callSpan(spans, 'c1').attributes['gen_ai.tool.description']).to.equal('Does the work');
    const bare = tools.get('bare')!.declaration.description;
    expect(callSpan(spans, 'c2').attributes['gen_ai.tool.description']).to.equal(bare === '' ? undefined : bare);
  });

  it('leaves out a usage the model did not report, on the chat span and the run\'s', async () => {
    const { exporter, tracer } = tracing();
    const provider = new ScriptedProvider([{ toolCalls: [ask('c1', 'work')] }, { text: 'done' }]);
    const result = await new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'work' }, () => 1), tracer }).run(planner, 'go');
    expect(result).to.not.have.property('usage');
    expect(result).to.not.have.property('totalUsage');
    for (const span of exporter.getFinishedSpans()) {
      expect(span.attributes, span.name).to.not.have.property('gen_ai.usage.input_tokens');
      expect(span.attributes, span.name).to.not.have.property('gen_ai.usage.output_tokens');
    }
  });
});

describe('RunResult usage', () => {
  it('says the run\'s own usage, and its whole tree\'s with every nested run at any depth', async () => {
    const used = (response: ModelResponse, input: number, output: number): ModelResponse => ({ ...response, usage: { inputTokens: input, outputTokens: output } });
    const researcher = new Agent({ name: 'researcher', instructions: '', model: 'small', tools: ['dig'] });
    const digger = new Agent({ name: 'digger', instructions: '', model: 'tiny' });
    const tools = new ToolRegistry()
      .register({ name: 'delegate' }, async (_args, ctx) => {
        const nested = await ctx.runAgent(researcher, 'find');
        // A nested run's result says its usage too, typed.
        return { own: nested.usage?.inputTokens, tree: nested.totalUsage?.inputTokens };
      })
      .register({ name: 'dig' }, async (_args, ctx) => (await ctx.runAgent(digger, 'deeper')).output);
    const provider = new ScriptedProvider({
      planner: [used({ toolCalls: [ask('d1', 'delegate')] }, 100, 10), used({ text: 'planned' }, 200, 20)],
      researcher: [used({ toolCalls: [ask('g1', 'dig')] }, 30, 3), used({ text: 'found' }, 40, 4)],
      // The innermost run reports no usage on its first turn: it is left out, not counted as 0.
      digger: [{ text: 'bottom' }],
    });
    const agent = new Agent({ name: 'planner', instructions: '', model: 'big', tools: ['delegate'] });
    const result = await new AgentRunner({ provider, tools }).run(agent, 'go');
    expect(result.status).to.equal('completed');
    expect(result.usage).to.deep.equal({ inputTokens: 300, outputTokens: 30 });
    expect(result.totalUsage).to.deep.equal({ inputTokens: 370, outputTokens: 37 });
    const delegated = result.events.find((event) => event.type === 'TOOL_RESULT' && event.callId === 'd1');
    expect(delegated).to.deep.include({ result: { own: 70, tree: 70 } });
  });
});

describe('The chat span, with a context manager that follows async work', () => {
  const manager = new AsyncLocalStorageContextManager();
  before(() => context.setGlobalContextManager(manager.enable()));
  after(() => {
    manager.disable();
    context.disable();
  });

  it('is active for the whole request: spans made as a streamed reply is fetched and read nest under it', async () => {
    const { exporter, tracer } = tracing();
    const later = () => new Promise((resolve) => setTimeout(resolve, 1));
    const provider: ModelProvider = {
      respond: () =>
        new Observable<ModelStreamPart>((subscriber) => {
          // As an instrumented fetch would: a span for the request when it is sent, one as the body is read.
          void (async () => {
            await later();
            tracer.startSpan('POST /chat').end();
            subscriber.next({ type: 'text-delta', delta: 'do' });
            await later();
            tracer.startSpan('read body').end();
            subscriber.next({ type: 'text-delta', delta: 'ne' });
            subscriber.complete();
          })();
        }),
    };
    const result = await new AgentRunner({ provider, tools: new ToolRegistry(), tracer }).run(planner, 'go');
    expect(result.output).to.equal('done');
    const spans = exporter.getFinishedSpans();
    const chat = named(spans, 'chat test-model').spanContext().spanId;
    expect(parentOf(named(spans, 'POST /chat'))).to.equal(chat);
    expect(parentOf(named(spans, 'read body'))).to.equal(chat);
  });

  it('is active while an AI SDK model streams (doStream and the reading of its stream)', async () => {
    const { exporter, tracer } = tracing();
    const parts: LanguageModelV3StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'response-metadata', id: 'r1', modelId: 'mock' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'done' },
      { type: 'text-end', id: 't' },
      { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } } },
    ];
    const model = new MockLanguageModelV3({
      doStream: async () => {
        tracer.startSpan('doStream').end();
        return {
          stream: new ReadableStream<LanguageModelV3StreamPart>({
            async pull(controller) {
              await new Promise((resolve) => setTimeout(resolve, 1));
              const next = parts.shift();
              if (next === undefined) {
                tracer.startSpan('stream read').end();
                controller.close();
              } else controller.enqueue(next);
            },
          }),
        };
      },
    });
    const result = await new AgentRunner({ provider: aiSdkProvider(model), tools: new ToolRegistry(), tracer }).run(planner, 'go');
    expect(result.output).to.equal('done');
    const spans = exporter.getFinishedSpans();
    const chat = named(spans, 'chat test-model').spanContext().spanId;
    expect(parentOf(named(spans, 'doStream'))).to.equal(chat);
    expect(parentOf(named(spans, 'stream read'))).to.equal(chat);
    expect(trace.getActiveSpan()).to.equal(undefined);
  });
});

describe('Tracing a run through aiSdkProvider', () => {
  const usage = { inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 2, text: 2, reasoning: 0 } };

  it('names the provider by the conventions and reads the response id and model from a streamed reply', async () => {
    const { exporter, tracer } = tracing();
    const parts: LanguageModelV3StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'response-metadata', id: 'resp-41', modelId: 'gpt-4.1-mini-2025' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'done' },
      { type: 'text-end', id: 't' },
      { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
    ];
    const model = new MockLanguageModelV3({
      provider: 'openai.chat',
      modelId: 'gpt-4.1-mini',
      doStream: async () => ({ stream: new ReadableStream<LanguageModelV3StreamPart>({ start: (controller) => { for (const p of parts) controller.enqueue(p); controller.close(); } }) }),
    });
    const provider = aiSdkProvider(model);
    expect(provider.providerName).to.equal('openai');
    const result = await new AgentRunner({ provider, tools: new ToolRegistry(), tracer }).run(planner, 'go');
    expect(result.output).to.equal('done');
    const spans = exporter.getFinishedSpans();
    const chat = named(spans, 'chat test-model');
    expect(chat.attributes['gen_ai.provider.name']).to.equal('openai');
    expect(chat.attributes['gen_ai.response.id']).to.equal('resp-41');
    expect(chat.attributes['gen_ai.response.model']).to.equal('gpt-4.1-mini-2025');
    expect(named(spans, 'invoke_agent planner').attributes['gen_ai.provider.name']).to.equal('openai');
    // The facts are tracing's alone: the transcript is the same as without them.
    expect(result.events.map((event) => event.type)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
  });

  it('reads the response id and model of a whole reply (doGenerate), and names a Google model gcp.gemini', async () => {
    const { exporter, tracer } = tracing();
    const model = new MockLanguageModelV3({
      provider: 'google.generative-ai',
      modelId: 'gemini-2.5-flash',
      doGenerate: async () => ({
        content: [{ type: 'text', text: 'done' }],
        finishReason: { unified: 'stop', raw: 'STOP' },
        usage,
        warnings: [],
        response: { id: 'gen-7', modelId: 'gemini-2.5-flash-001' },
      }),
    });
    const result = await new AgentRunner({ provider: aiSdkProvider(model, { stream: false }), tools: new ToolRegistry(), tracer }).run(planner, 'go');
    expect(result.output).to.equal('done');
    const chat = named(exporter.getFinishedSpans(), 'chat test-model');
    expect(chat.attributes['gen_ai.provider.name']).to.equal('gcp.gemini');
    expect(chat.attributes['gen_ai.response.id']).to.equal('gen-7');
    expect(chat.attributes['gen_ai.response.model']).to.equal('gemini-2.5-flash-001');
  });

  it('leaves the response facts out when the model names none, and passes an unknown provider package through', async () => {
    const { exporter, tracer } = tracing();
    const model = new MockLanguageModelV3({
      provider: 'acme-llm.chat',
      doGenerate: async () => ({ content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }),
    });
    await new AgentRunner({ provider: aiSdkProvider(model, { stream: false }), tools: new ToolRegistry(), tracer }).run(planner, 'go');
    const chat = named(exporter.getFinishedSpans(), 'chat test-model');
    expect(chat.attributes['gen_ai.provider.name']).to.equal('acme-llm');
    expect(chat.attributes).to.not.have.any.keys('gen_ai.response.id', 'gen_ai.response.model');
  });
});
