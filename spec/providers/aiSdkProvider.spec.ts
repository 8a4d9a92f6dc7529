// aiSdkProvider against the AI SDK's own mock models of both majors it takes (MockLanguageModelV3
// from ai 6's `ai/test`, MockLanguageModelV4 from ai 7's), streaming (doStream) and not
// (doGenerate): the prompt and tools it sends (JSON Schema from the io-ts codecs, results back in
// call order as tool-result parts), a tool-call stream whose calls start before the stream ends,
// an error part, a rejected call, a cancel mid-stream, and the same transcript either way.
import { readdirSync, readFileSync } from 'node:fs';
import { expect } from 'chai';
import * as t from 'io-ts';
import type { LanguageModelV3CallOptions, LanguageModelV3Content, LanguageModelV3GenerateResult, LanguageModelV3StreamPart, LanguageModelV3Usage } from '@ai-sdk/provider';
import { MockLanguageModelV3 } from 'ai/test';
import { MockLanguageModelV4 } from 'ai7/test';
import { Agent, AgentRunner, ConfigError, ToolRegistry, type RunResult } from '../../lib/index.js';
import { deterministicTranscript } from '../../lib/testing.js';
import { toJsonSchema } from '../../lib/tools/jsonSchema.js';
import { aiSdkProvider, type AiSdkLanguageModel } from '../../lib/providers/aiSdkProvider.js';

const planner = new Agent({ name: 'planner', instructions: 'Find hotels.', model: 'mock' });
const City = t.type({ city: t.string });

const usage = (input: number, output: number): LanguageModelV3Usage => ({
  inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: output, text: output, reasoning: 0 },
});

/** Lisbon (slow), Atlantis (fails), Porto: each call's start noted. */
function lookupTools(started: string[] = []): ToolRegistry {
  return new ToolRegistry().register({ name: 'lookup', description: 'Hotel prices in a city', args: City }, async ({ city }) => {
    started.push(city);
    if (city === 'Atlantis') throw new Error('no partner covers Atlantis');
    await new Promise((resolve) => setTimeout(resolve, city === 'Lisbon' ? 30 : 0));
    return { city, from: 80 + city.length * 7 };
  });
}

const call = (id: string, city: string) => ({ type: 'tool-call' as const, toolCallId: id, toolName: 'lookup', input: JSON.stringify({ city }) });
const threeCalls: LanguageModelV3Content[] = [{ type: 'text', text: 'Checking all three.' }, call('c1', 'Lisbon'), call('c2', 'Atlantis'), call('c3', 'Porto')];
const finalText: LanguageModelV3Content[] = [{ type: 'text', text: 'Lisbon from 122, Porto from 115.' }];

const generated = (content: LanguageModelV3Content[], reason: 'tool-calls' | 'stop', tokens: [number, number]): LanguageModelV3GenerateResult => ({
  content,
  finishReason: { unified: reason, raw: reason },
  usage: usage(...tokens),
  warnings: [],
});

/** The stream parts a model sends for `content`: text written in pieces, tool input written before each complete call. */
function streamParts(content: LanguageModelV3Content[], reason: 'tool-calls' | 'stop', tokens: [number, number]): LanguageModelV3StreamPart[] {
  const parts: LanguageModelV3StreamPart[] = [{ type: 'stream-start', warnings: [] }, { type: 'response-metadata', id: 'r1', modelId: 'mock' }];
  for (const item of content) {
    if (item.type === 'text') {
      parts.push({ type: 'text-start', id: 't' });
      for (const piece of item.text.match(/.{1,6}/g) ?? []) parts.push({ type: 'text-delta', id: 't', delta: piece });
      parts.push({ type: 'text-end', id: 't' });
    } else if (item.type === 'tool-call') {
      parts.push({ type: 'tool-input-start', id: item.toolCallId, toolName: item.toolName });
      for (const piece of item.input.match(/.{1,4}/g) ?? []) parts.push({ type: 'tool-input-delta', id: item.toolCallId, delta: piece });
      parts.push({ type: 'tool-input-end', id: item.toolCallId }, item);
    }
  }
  parts.push({ type: 'finish', finishReason: { unified: reason, raw: reason }, usage: usage(...tokens) });
  return parts;
}

/** A stream fed by hand: `push` parts, then `close` or `fail`. */
function handFed(): { stream: ReadableStream<LanguageModelV3StreamPart>; push(...parts: LanguageModelV3StreamPart[]): void; close(): void; cancelled: Promise<unknown> } {
  let controller!: ReadableStreamDefaultController<LanguageModelV3StreamPart>;
  let cancelled!: (reason: unknown) => void;
  const stream = new ReadableStream<LanguageModelV3StreamPart>({
    start: (c) => void (controller = c),
    cancel: (reason) => cancelled(reason),
  });
  return {
    stream,
    push: (...parts) => parts.forEach((p) => controller.enqueue(p)),
    close: () => controller.close(),
    cancelled: new Promise((resolve) => (cancelled = resolve)),
  };
}

const fromArray = <T>(items: readonly T[]): ReadableStream<T> =>
  new ReadableStream<T>({
    start(controller) {
      for (const item of items) controller.enqueue(item);
      controller.close();
    },
  });

const outline = (result: RunResult): string[] =>
  result.events.flatMap((e) =>
    e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE' ? [`${e.type} ${e.callId}`] : e.type === 'RUN_STARTED' ? [] : [e.type],
  );

/** A mock model of one major, as the specs below drive it (the V4 mock takes the same parts and results). */
type Mock = AiSdkLanguageModel & { readonly doGenerateCalls: LanguageModelV3CallOptions[]; readonly doStreamCalls: LanguageModelV3CallOptions[] };
type MockOptions = { doGenerate?: unknown; doStream?: unknown };

const majors: ReadonlyArray<{ readonly title: string; mock(options?: MockOptions): Mock }> = [
  { title: 'ai 6, MockLanguageModelV3', mock: (options = {}) => new MockLanguageModelV3(options as never) as Mock },
  { title: 'ai 7, MockLanguageModelV4', mock: (options = {}) => new MockLanguageModelV4(options as never) as unknown as Mock },
];

it('aiSdkProvider takes a model of either major as it is typed, without a cast', () => {
  expect(aiSdkProvider(new MockLanguageModelV3()).respond).to.be.a('function');
  expect(aiSdkProvider(new MockLanguageModelV4()).respond).to.be.a('function');
});

for (const major of majors)
describe(`aiSdkProvider with the AI SDK mock model (${major.title})`, () => {

  it('sends the instructions, the conversation and the tools as JSON Schema from their codecs, and the results back in call order', async () => {
    const model = major.mock({ doGenerate: [generated(threeCalls, 'tool-calls', [40, 12]), generated(finalText, 'stop', [90, 8])] });
    const result = await new AgentRunner({ provider: aiSdkProvider(model, { stream: false }), tools: lookupTools() }).run(planner, 'Lisbon, Atlantis or Porto?');
    expect(result.status).to.equal('completed');
    expect(result.output).to.equal('Lisbon from 122, Porto from 115.');
    expect(result.usage).to.deep.equal({ inputTokens: 130, outputTokens: 20 });
    const [first, second] = model.doGenerateCalls as [LanguageModelV3CallOptions, LanguageModelV3CallOptions];
    expect(first.tools).to.deep.equal([{ type: 'function', name: 'lookup', description: 'Hotel prices in a city', inputSchema: toJsonSchema(City) }]);
    expect(first.toolChoice).to.deep.equal({ type: 'auto' });
    expect(first.prompt).to.deep.equal([
      { role: 'system', content: 'Find hotels.' },
      { role: 'user', content: [{ type: 'text', text: 'Lisbon, Atlantis or Porto?' }] },
    ]);
    // Lisbon finished last; its result is still first.
    expect(second.prompt.slice(2)).to.deep.equal([
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Checking all three.' },
          { type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: { city: 'Lisbon' } },
          { type: 'tool-call', toolCallId: 'c2', toolName: 'lookup', input: { city: 'Atlantis' } },
          { type: 'tool-call', toolCallId: 'c3', toolName: 'lookup', input: { city: 'Porto' } },
        ],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId: 'c1', toolName: 'lookup', output: { type: 'text', value: '{"city":"Lisbon","from":122}' } },
          { type: 'tool-result', toolCallId: 'c2', toolName: 'lookup', output: { type: 'error-text', value: 'Error: no partner covers Atlantis' } },
          { type: 'tool-result', toolCallId: 'c3', toolName: 'lookup', output: { type: 'text', value: '{"city":"Porto","from":115}' } },
        ],
      },
    ]);
  });

  it('streams by default and gives the same transcript as the whole replies, usage and finish reasons included', async () => {
    const streamed = major.mock({
      doStream: [{ stream: fromArray(streamParts(threeCalls, 'tool-calls', [40, 12])) }, { stream: fromArray(streamParts(finalText, 'stop', [90, 8])) }],
    });
    const whole = major.mock({ doGenerate: [generated(threeCalls, 'tool-calls', [40, 12]), generated(finalText, 'stop', [90, 8])] });
    const a = await new AgentRunner({ provider: aiSdkProvider(streamed), tools: lookupTools() }).run(planner, 'go');
    const b = await new AgentRunner({ provider: aiSdkProvider(whole, { stream: false }), tools: lookupTools() }).run(planner, 'go');
    expect(streamed.doStreamCalls).to.have.length(2);
    expect(streamed.doGenerateCalls).to.have.length(0);
    expect(JSON.stringify(deterministicTranscript(a.events))).to.equal(JSON.stringify(deterministicTranscript(b.events)));
    expect(a.events.find((e) => e.type === 'MODEL_RESPONSE')).to.deep.include({ usage: { inputTokens: 40, outputTokens: 12 }, finishReason: 'tool-calls' });
    expect(streamed.doStreamCalls[1]!.prompt).to.deep.equal(whole.doGenerateCalls[1]!.prompt);
  });

  it('starts each call of a tool-call stream as soon as its part arrives, before the stream ends', async () => {
    const fed = handFed();
    const model = major.mock({ doStream: [{ stream: fed.stream }, { stream: fromArray(streamParts(finalText, 'stop', [1, 1])) }] });
    const started: string[] = [];
    const activity: string[] = [];
    const runner = new AgentRunner({ provider: aiSdkProvider(model), tools: lookupTools(started) });
    runner.activity$.subscribe((a) => {
      if (a.type === 'text-delta') activity.push(a.delta);
    });
    const running = runner.run(planner, 'go');
    fed.push({ type: 'text-delta', id: 't', delta: 'Checking.' }, call('c1', 'Lisbon'));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(started).to.deep.equal(['Lisbon']);
    expect(activity).to.deep.equal(['Checking.']);
    fed.push(call('c2', 'Porto'));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(started).to.deep.equal(['Lisbon', 'Porto']);
    fed.push({ type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage: usage(5, 5) });
    fed.close();
    const result = await running;
    expect(outline(result)).to.deep.equal(['MODEL_RESPONSE', 'TOOL_RESULT c1', 'TOOL_RESULT c2', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
  });

  it('fails the turn on an error part, classifying the call that had started', async () => {
    const apiError = Object.assign(new Error('Overloaded'), { name: 'AI_APICallError', statusCode: 529 });
    const parts: LanguageModelV3StreamPart[] = [{ type: 'stream-start', warnings: [] }, call('c1', 'Lisbon'), { type: 'error', error: apiError }];
    const model = major.mock({ doStream: [{ stream: fromArray(parts) }] });
    const result = await new AgentRunner({ provider: aiSdkProvider(model), tools: lookupTools() }).run(planner, 'go');
    expect(outline(result)).to.deep.equal(['MODEL_RESPONSE', 'TOOL_INDETERMINATE c1', 'RUN_FAILED']);
    expect(result.error).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 1: Overloaded' });
  });

  it('fails the run when the model rejects the call, streaming or not', async () => {
    for (const stream of [true, false]) {
      const fail = async (): Promise<never> => {
        throw new Error('Invalid API key');
      };
      const model = major.mock({ doStream: fail, doGenerate: fail });
      const result = await new AgentRunner({ provider: aiSdkProvider(model, { stream }), tools: lookupTools() }).run(planner, 'go');
      expect(result.error).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 1: Invalid API key' });
    }
  });

  it('aborts the model call and cancels its stream when the run is cancelled mid-stream', async () => {
    const fed = handFed();
    const model = major.mock({ doStream: [{ stream: fed.stream }] });
    const controller = new AbortController();
    const running = new AgentRunner({ provider: aiSdkProvider(model), tools: lookupTools() }).run(planner, 'go', { signal: controller.signal });
    fed.push({ type: 'text-delta', id: 't', delta: 'Thinking' });
    await new Promise((resolve) => setTimeout(resolve, 5));
    controller.abort('the user left');
    const result = await running;
    expect(result.status).to.equal('cancelled');
    expect(model.doStreamCalls[0]!.abortSignal!.aborted).to.equal(true);
    await fed.cancelled;
  });

  it('leaves out calls the provider ran itself, and reasoning', async () => {
    const content: LanguageModelV3Content[] = [
      { type: 'reasoning', text: 'hmm' },
      { type: 'tool-call', toolCallId: 's1', toolName: 'web_search', input: '{}', providerExecuted: true },
      { type: 'tool-result', toolCallId: 's1', toolName: 'web_search', result: { hits: 3 } },
      { type: 'text', text: 'Found it.' },
    ];
    const model = major.mock({ doGenerate: [generated(content, 'stop', [1, 1])] });
    const result = await new AgentRunner({ provider: aiSdkProvider(model, { stream: false }), tools: lookupTools() }).run(planner, 'go');
    expect(result.events.find((e) => e.type === 'MODEL_RESPONSE')).to.deep.equal({ type: 'MODEL_RESPONSE', turn: 1, text: 'Found it.', toolCalls: [], usage: { inputTokens: 1, outputTokens: 1 }, finishReason: 'stop' });
  });

  it('sends the call options given, and refuses what is not a V3 or V4 model or a known option', () => {
    const model = major.mock();
    expect(() => aiSdkProvider('openai/gpt-4.1' as never)).to.throw(ConfigError, "pass the provider's model, e.g. openai('gpt-4.1-mini')");
    expect(() => aiSdkProvider({ ...model, specificationVersion: 'v2', doStream: model.doStream, doGenerate: model.doGenerate } as never)).to.throw(
      ConfigError,
      'LanguageModelV3 (ai 6, @ai-sdk/provider 3) or LanguageModelV4 (ai 7, @ai-sdk/provider 4), got specificationVersion "v2"',
    );
    expect(() => aiSdkProvider(model, { streaming: true } as never)).to.throw(ConfigError, 'streaming');
  });

  it('passes callOptions on every call', async () => {
    const model = major.mock({ doGenerate: [generated(finalText, 'stop', [1, 1])] });
    await new AgentRunner({ provider: aiSdkProvider(model, { stream: false, callOptions: { temperature: 0, maxOutputTokens: 256 } }), tools: new ToolRegistry() }).run(planner, 'go');
    expect(model.doGenerateCalls[0]).to.deep.include({ temperature: 0, maxOutputTokens: 256 });
    expect(model.doGenerateCalls[0]!.tools).to.equal(undefined);
  });

  it('is an optional peer: nothing under lib/ imports the AI SDK at run time, only its types', () => {
    const root = new URL('../../lib/', import.meta.url);
    const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    const runtime = files.flatMap((file) =>
      [...readFileSync(new URL(file, root), 'utf8').matchAll(/^import\s+(?!type\b)[^;]*?from\s+'((?:ai|@ai-sdk\/[^']+)(?:\/[^']*)?)'/gm)].map((m) => `${file}: ${m[1]}`),
    );
    expect(files).to.include('providers/aiSdkProvider.ts');
    expect(runtime).to.deep.equal([]);
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    for (const name of ['ai', '@ai-sdk/provider']) {
      expect(pkg.dependencies).not.to.have.property(name);
      expect(pkg.peerDependenciesMeta[name]).to.deep.equal({ optional: true });
    }
  });
});
