// A streamed turn whose second call's JSON never closes, through AgentRunner.run, with each
// streamed provider the library has: aiSdkProvider over the AI SDK's mock models (ai 6 and 7),
// and the OpenAI and Anthropic wire adapters against a stand-in vendor writing fabricated
// server-sent events. The model asks g1..g4, g2's arguments unterminated; what is checked is what
// the model and the tool bodies see: MODEL_RESPONSE's calls, the outcomes in the transcript, the
// calls and results of the next request, all in call order, and which part of the stream had been
// written when each body started.
import { expect } from 'chai';
import * as t from 'io-ts';
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { MockLanguageModelV3 } from 'ai/test';
import { MockLanguageModelV4 } from 'ai7/test';
import { Agent, AgentRunner, ToolRegistry, type ModelProvider, type RunResult } from '../../lib/index.js';
import { AnthropicMessagesProvider, OpenAIChatProvider } from '../../lib/providers.js';
import { aiSdkProvider, type AiSdkLanguageModel } from '../../lib/providers/aiSdkProvider.js';
import { sseChunks, startWireServer, type WireServer } from '../providers/wireServer.js';

const planner = new Agent({ name: 'planner', instructions: 'Find hotels.', model: 'test-model' });
const KEY = 'sk-test-0123456789abcdefWXYZ';

/** What the model writes, as every wire can say it: a call starts, a piece of its arguments, its end (where the wire has one), the reply's finish. */
type Writing = { readonly kind: 'start' | 'end'; readonly id: string } | { readonly kind: 'piece'; readonly id: string; readonly text: string } | { readonly kind: 'finish' };

const start = (id: string): Writing => ({ kind: 'start', id });
const piece = (id: string, text: string): Writing => ({ kind: 'piece', id, text });
const end = (id: string): Writing => ({ kind: 'end', id });
const finish: Writing = { kind: 'finish' };
const whole = (id: string, city: string): Writing[] => [start(id), piece(id, '{"city":'), piece(id, `"${city}"}`)];

/** A reply written in three segments: the stand-in model waits after the first until g1's body has started, after the second a moment for g3's. */
interface Scenario {
  readonly title: string;
  readonly segments: readonly [readonly Writing[], readonly Writing[], readonly Writing[]];
  /** The segment (1-based) in which g3 and g4 start, by wire: 2 where the wire says g2 is over before the finish, 3 where only the finish does. */
  readonly laterCallsStartIn: Readonly<Record<WireName, 2 | 3>>;
  readonly wires?: readonly WireName[];
}

type WireName = 'ai-sdk' | 'openai' | 'anthropic';

const scenarios: Scenario[] = [
  {
    title: 'one call after another, each ended where the wire ends calls',
    segments: [
      [...whole('g1', 'Lisbon'), end('g1')],
      [start('g2'), piece('g2', '{"city":"Atl'), end('g2'), ...whole('g3', 'Porto'), end('g3'), ...whole('g4', 'Faro'), end('g4')],
      [finish],
    ],
    // OpenAI's wire has no end of a call: g2 is over only at the finish, and g3 and g4 wait for it.
    laterCallsStartIn: { 'ai-sdk': 2, openai: 3, anthropic: 2 },
  },
  {
    title: 'one call after another, every end written at the close (as the AI SDK’s OpenAI chat model does)',
    segments: [whole('g1', 'Lisbon'), [start('g2'), piece('g2', '{"city":"Atl'), ...whole('g3', 'Porto'), ...whole('g4', 'Faro')], [end('g1'), end('g2'), end('g3'), end('g4'), finish]],
    laterCallsStartIn: { 'ai-sdk': 3, openai: 3, anthropic: 3 },
    // OpenAI's wire has no ends (the first scenario is this one there); Anthropic's ends each block before the next starts.
    wires: ['ai-sdk'],
  },
  {
    title: 'pieces going back to earlier calls, g2 never ended',
    segments: [
      [start('g1'), piece('g1', '{"city":'), start('g2'), piece('g2', '{"city":'), piece('g1', '"Lisbon"}'), end('g1')],
      [start('g3'), piece('g2', '"Atl'), piece('g3', '{"city":'), start('g4'), piece('g4', '{"city":"Faro"}'), piece('g3', '"Porto"}'), end('g3'), end('g4')],
      [finish],
    ],
    laterCallsStartIn: { 'ai-sdk': 3, openai: 3, anthropic: 3 },
  },
];

const ids = ['g1', 'g2', 'g3', 'g4'];
const index = (id: string): number => ids.indexOf(id);

/** A stand-in model: the provider, how many segments it has begun writing, the next request's calls and results by id. */
interface Model {
  readonly provider: ModelProvider;
  begun(): number;
  next(): { asked: string[]; answered: string[] };
  close(): Promise<void>;
}

interface Wire {
  readonly title: string;
  readonly name: WireName;
  make(scenario: Scenario, after: readonly [() => Promise<unknown>, () => Promise<unknown>]): Promise<Model>;
}

// --- AI SDK stream parts ---

function aiSdkParts(writing: Writing): LanguageModelV3StreamPart[] {
  switch (writing.kind) {
    case 'start':
      return [{ type: 'tool-input-start', id: writing.id, toolName: 'lookup' }];
    case 'piece':
      return [{ type: 'tool-input-delta', id: writing.id, delta: writing.text }];
    case 'end':
      return [{ type: 'tool-input-end', id: writing.id }];
    case 'finish':
      return [{ type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage: { inputTokens: { total: 9, noCache: 9, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 9, text: 9, reasoning: 0 } } }];
  }
}

const finalParts: LanguageModelV3StreamPart[] = [
  { type: 'text-delta', id: 't', delta: 'Lisbon, Porto and Faro have rooms.' },
  { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: { inputTokens: { total: 9, noCache: 9, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 9, text: 9, reasoning: 0 } } },
];

function aiSdkWire(title: string, mock: (options: object) => AiSdkLanguageModel & { doStreamCalls: Array<{ prompt: unknown }> }): Wire {
  return {
    title,
    name: 'ai-sdk',
    make: async (scenario, after) => {
      // Segments begun so far.
      let begun = 0;
      const stream = new ReadableStream<LanguageModelV3StreamPart>({
        start: async (controller) => {
          for (const [i, segment] of scenario.segments.entries()) {
            begun = i + 1;
            for (const part of segment.flatMap(aiSdkParts)) controller.enqueue(part);
            if (i < 2) await after[i]!();
          }
          controller.close();
        },
      });
      const final = new ReadableStream<LanguageModelV3StreamPart>({
        start: (controller) => {
          for (const part of finalParts) controller.enqueue(part);
          controller.close();
        },
      });
      const model = mock({ doStream: [{ stream }, { stream: final }] });
      return {
        provider: aiSdkProvider(model),
        begun: () => begun,
        next: () => {
          const prompt = model.doStreamCalls[1]!.prompt as Array<{ role: string; content: Array<{ type: string; toolCallId?: string }> }>;
          const of = (role: string, type: string): string[] => prompt.filter((m) => m.role === role).flatMap((m) => m.content.filter((c) => c.type === type).map((c) => c.toolCallId!));
          return { asked: of('assistant', 'tool-call'), answered: of('tool', 'tool-result') };
        },
        close: async () => undefined,
      };
    },
  };
}

// --- OpenAI chat completion chunks (the index of a call is its place among g1..g4) ---

const openaiChunk = (choice: object, usage: object | null = null): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-order', object: 'chat.completion.chunk', created: 1745312043, model: 'gpt-4.1-mini', choices: [{ index: 0, logprobs: null, finish_reason: null, ...choice }], usage })}\n\n`;

function openaiChunks(writing: Writing): string[] {
  switch (writing.kind) {
    case 'start':
      return [openaiChunk({ delta: { tool_calls: [{ index: index(writing.id), id: writing.id, type: 'function', function: { name: 'lookup', arguments: '' } }] } })];
    case 'piece':
      return [openaiChunk({ delta: { tool_calls: [{ index: index(writing.id), function: { arguments: writing.text } }] } })];
    case 'end':
      return [];
    case 'finish':
      return [
        openaiChunk({ delta: {}, finish_reason: 'tool_calls' }),
        `data: ${JSON.stringify({ id: 'chatcmpl-order', object: 'chat.completion.chunk', created: 1745312043, model: 'gpt-4.1-mini', choices: [], usage: { prompt_tokens: 9, completion_tokens: 9, total_tokens: 18 } })}\n\n`,
        'data: [DONE]\n\n',
      ];
  }
}

// --- Anthropic Messages events (a call's block index is its place among g1..g4) ---

const anthropicEvent = (type: string, data: object): string => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

function anthropicEvents(writing: Writing): string[] {
  switch (writing.kind) {
    case 'start':
      return [anthropicEvent('content_block_start', { index: index(writing.id), content_block: { type: 'tool_use', id: writing.id, name: 'lookup', input: {} } })];
    case 'piece':
      return [anthropicEvent('content_block_delta', { index: index(writing.id), delta: { type: 'input_json_delta', partial_json: writing.text } })];
    case 'end':
      return [anthropicEvent('content_block_stop', { index: index(writing.id) })];
    case 'finish':
      return [anthropicEvent('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 9 } }), anthropicEvent('message_stop', {})];
  }
}

function vendorWire(name: 'openai' | 'anthropic'): Wire {
  return {
    title: name === 'openai' ? 'OpenAIChatProvider over its wire' : 'AnthropicMessagesProvider over its wire',
    name,
    make: async (scenario, after) => {
      const opening =
        name === 'openai'
          ? [openaiChunk({ delta: { role: 'assistant', content: null, refusal: null } })]
          : [anthropicEvent('message_start', { message: { id: 'msg_order', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 9, output_tokens: 1 } } })];
      const encode = name === 'openai' ? openaiChunks : anthropicEvents;
      const segments = scenario.segments.map((segment) => segment.flatMap(encode));
      segments[0]!.unshift(...opening);
      // The chunk count at which each segment begins.
      const firsts = [0, segments[0]!.length, segments[0]!.length + segments[1]!.length];
      const first = after[0]();
      const vendor: WireServer = await startWireServer([
        {
          chunks: segments.flat(),
          // The second wait begins once the first is over, as the segment before it is written.
          holds: [
            { after: firsts[1]!, until: first },
            { after: firsts[2]!, until: first.then(after[1]) },
          ],
        },
        { chunks: sseChunks(`${name}-stream-final-text`) },
      ]);
      const provider =
        name === 'openai'
          ? new OpenAIChatProvider({ baseURL: `${vendor.url}/v1`, apiKey: KEY, retry: { sleep: async () => undefined } })
          : new AnthropicMessagesProvider({ baseURL: vendor.url, apiKey: KEY, retry: { sleep: async () => undefined } });
      return {
        provider,
        begun: () => firsts.filter((first) => vendor.written.length > first).length,
        next: () => {
          const messages = vendor.received[1]!.body.messages as Array<Record<string, any>>;
          if (name === 'openai') {
            return {
              asked: messages.filter((m) => m['role'] === 'assistant').flatMap((m) => (m['tool_calls'] ?? []).map((c: { id: string }) => c.id)),
              answered: messages.filter((m) => m['role'] === 'tool').map((m) => m['tool_call_id'] as string),
            };
          }
          const blocks = (role: string, type: string, key: string): string[] =>
            messages.filter((m) => m['role'] === role && Array.isArray(m['content'])).flatMap((m) => (m['content'] as Array<Record<string, string>>).filter((b) => b['type'] === type).map((b) => b[key]!));
          return { asked: blocks('assistant', 'tool_use', 'id'), answered: blocks('user', 'tool_result', 'tool_use_id') };
        },
        close: () => vendor.close(),
      };
    },
  };
}
const wires: Wire[] = [
  aiSdkWire('aiSdkProvider over ai 6’s MockLanguageModelV3', (options) => new MockLanguageModelV3(options as never) as never),
  aiSdkWire('aiSdkProvider over ai 7’s MockLanguageModelV4', (options) => new MockLanguageModelV4(options as never) as never),
  vendorWire('openai'),
  vendorWire('anthropic'),
];

const settle = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves when `promise` does, or after `ms` at the latest; its timer cleared either way. */
function orAfter(promise: Promise<void>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    void promise.then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

describe('A streamed call whose JSON never closes, through the runner (g1..g4, g2 unterminated)', () => {
  for (const wire of wires) {
    describe(wire.title, () => {
      let model: Model | undefined;
      afterEach(async () => {
        await model?.close();
        model = undefined;
      });

      for (const scenario of scenarios.filter((s) => s.wires === undefined || s.wires.includes(wire.name))) {
        it(`keeps call order for the model, the transcript and the next request: ${scenario.title}`, async () => {
          // The segment each body started in (how many the model had begun writing).
          const startedIn = new Map<string, number>();
          // Resolves when a city's body has started.
          const waiters = new Map<string, () => void>();
          const started = (city: string): Promise<void> => new Promise((resolve) => (startedIn.has(city) ? resolve() : waiters.set(city, resolve)));
          const tools = new ToolRegistry().register({ name: 'lookup', description: 'Hotel prices in a city', args: t.type({ city: t.string }) }, async ({ city }) => {
            startedIn.set(city, model!.begun());
            waiters.get(city)?.();
            await settle(city === 'Lisbon' ? 20 : 0);
            return { city, rooms: city.length };
          });
          // After the first segment: until g1's body has started (it must, before anything more is written).
          // After the second: until g3's and g4's have, where the wire says g2 is over there; elsewhere
          // they must not start before the finish, and a moment gives them the chance to show they would.
          const later = Promise.all([started('Porto'), started('Faro')]).then(() => undefined);
          const laterWait = scenario.laterCallsStartIn[wire.name] === 2 ? 2000 : 100;
          model = await wire.make(scenario, [() => orAfter(started('Lisbon'), 2000), () => orAfter(later, laterWait)]);
          const result: RunResult = await new AgentRunner({ provider: model.provider, tools }).run(planner, 'Hotels in Lisbon, Atlantis, Porto and Faro?');

          expect(result.status).to.equal('completed');
          const response = result.events.find((e) => e.type === 'MODEL_RESPONSE');
          expect(response?.type === 'MODEL_RESPONSE' ? response.toolCalls.map((c) => c.id) : []).to.deep.equal(ids);
          const outcomes = result.events.flatMap((e) =>
            e.type === 'TOOL_RESULT' ? [`${e.callId} result ${JSON.stringify(e.result)}`] : e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE' ? [`${e.callId} ${e.type} ${'error' in e ? e.error.name : ''}`] : [],
          );
          expect(outcomes).to.deep.equal([
            'g1 result {"city":"Lisbon","rooms":6}',
            'g2 TOOL_ERROR ToolArgumentsError',
            'g3 result {"city":"Porto","rooms":5}',
            'g4 result {"city":"Faro","rooms":4}',
          ]);
          expect(model.next()).to.deep.equal({ asked: ids, answered: ids });
          // g1 started before anything after it was written; g3 and g4 as soon as g2 was over.
          expect(Object.fromEntries(startedIn)).to.deep.equal({ Lisbon: 1, Porto: scenario.laterCallsStartIn[wire.name], Faro: scenario.laterCallsStartIn[wire.name] });
        });
      }
    });
  }
});
