// W5 over the wire: how soon each tool call starts while a real vendor stream is still being
// written. A server on 127.0.0.1 writes the recorded OpenAI (Chat Completions and Responses) and
// Anthropic streams of a turn with three calls (spec/fixtures/wire), an event every GAP_MS ms;
// the figure is the time from the stream's first event to each call's start, for the built-in
// adapters, for aiSdkProvider with
// the real provider packages of ai 6 and ai 7, and for the AI SDK's own streamText with the
// same model and the same tools, executing against the same server.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createAnthropic as createAnthropicV4 } from '@ai-sdk/anthropic-v4';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAI as createOpenAIV4 } from '@ai-sdk/openai-v4';
import { jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { jsonSchema as jsonSchemaV7, stepCountIs as stepCountIsV7, streamText as streamTextV7, tool as toolV7 } from 'ai7';
import * as t from 'io-ts';
import { Agent, AgentRunner, ToolRegistry, type ModelProvider } from '../lib/index.js';
import { AnthropicMessagesProvider, OpenAIChatProvider } from '../lib/providers.js';
import { aiSdkProvider, type AiSdkLanguageModel } from '../lib/providers/aiSdkProvider.js';
import type { Row } from './row.js';

/** The wait between two events of the stream, in ms. */
const GAP_MS = 25;
const CITIES = ['Lisbon', 'Atlantis', 'Porto'] as const;
const KEY = 'sk-bench-0123456789abcdef';

// The recorded streams, one event a chunk; read from the repository (`npm run bench` runs there).
const fixtures = new URL('spec/fixtures/wire/', pathToFileURL(`${process.cwd()}/`));
const events = (name: string): string[] => readFileSync(new URL(`${name}.sse`, fixtures), 'utf8').split(/(?<=\n\n)/);

/** One measured turn's server: the three-call stream written slowly, then the answer at once. */
interface Vendor {
  readonly url: string;
  /** performance.now() when the first event of the three-call stream was written. */
  startedAt(): number;
  /** ms from the first event to the last. */
  streamMs(): number;
  close(): Promise<void>;
}

/** The recorded streams a vendor writes: `<name>-stream-three-calls.sse`, then `<name>-stream-final-text.sse`. */
type Streams = 'openai' | 'openai-responses' | 'anthropic';

async function vendor(prefix: Streams): Promise<Vendor> {
  const calls = events(`${prefix}-stream-three-calls`);
  const answer = events(`${prefix}-stream-final-text`);
  let requests = 0;
  let first = 0;
  let last = 0;
  const timers = new Set<NodeJS.Timeout>();
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const chunks = requests++ === 0 ? calls : answer;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const write = (i: number): void => {
        if (res.destroyed) return;
        if (i === chunks.length) {
          res.end();
          return;
        }
        res.write(chunks[i]!);
        if (chunks === calls) {
          if (i === 0) first = performance.now();
          last = performance.now();
        }
        if (chunks === answer) {
          write(i + 1);
          return;
        }
        const timer = setTimeout(() => {
          timers.delete(timer);
          write(i + 1);
        }, GAP_MS);
        timers.add(timer);
      };
      write(0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    startedAt: () => first,
    streamMs: () => last - first,
    close: () =>
      new Promise((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** When each call started, in ms from the stream's first event, by city; and the stream's length. */
type Starts = { readonly calls: Record<string, number>; readonly streamMs: number };

/** One turn through `drive`, which calls `started(city)` as each call's body begins. */
async function measure(prefix: Streams, drive: (url: string, started: (city: string) => void) => Promise<void>): Promise<Starts> {
  const server = await vendor(prefix);
  const calls: Record<string, number> = {};
  try {
    await drive(server.url, (city) => {
      calls[city] = performance.now() - server.startedAt();
    });
  } finally {
    await server.close();
  }
  for (const city of CITIES) if (calls[city] === undefined) throw new Error(`W5 wire: ${city} never started`);
  return { calls, streamMs: server.streamMs() };
}

const agent = new Agent({ name: 'bench', instructions: 'Find hotels.', model: 'bench' });

function lanes(provider: (url: string) => ModelProvider) {
  return async (url: string, started: (city: string) => void): Promise<void> => {
    const tools = new ToolRegistry().register({ name: 'lookup', description: 'Hotel prices in a city', args: t.type({ city: t.string }) }, async ({ city }) => {
      started(city);
      if (city === 'Atlantis') throw new Error('no partner covers Atlantis');
      return { city, from: 80 + city.length * 7 };
    });
    const result = await new AgentRunner({ provider: provider(url), tools }).run(agent, 'Hotels in Lisbon, Atlantis and Porto?');
    if (result.status !== 'completed') throw new Error(`W5 wire: the run ${result.status}: ${result.error?.message ?? ''}`);
  };
}

// Mutable arrays: the JSON Schema type the SDK takes (from @types/json-schema) has no readonly ones.
const citySchema = { type: 'object' as const, properties: { city: { type: 'string' as const } }, required: ['city'], additionalProperties: false };

const lookup = async ({ city }: { city: string }, started: (city: string) => void) => {
  started(city);
  if (city === 'Atlantis') throw new Error('no partner covers Atlantis');
  return { city, from: 80 + city.length * 7 };
};

/** The AI SDK's own loop, ai 6: streamText with the tools executing, two steps. */
function sdk6(model: (url: string) => Parameters<typeof streamText>[0]['model']) {
  return async (url: string, started: (city: string) => void): Promise<void> => {
    const result = streamText({
      model: model(url),
      prompt: 'Hotels in Lisbon, Atlantis and Porto?',
      tools: { lookup: tool({ description: 'Hotel prices in a city', inputSchema: jsonSchema<{ city: string }>(citySchema), execute: (input) => lookup(input, started) }) },
      stopWhen: stepCountIs(2),
    });
    await result.consumeStream();
  };
}

/** The same with ai 7. */
function sdk7(model: (url: string) => Parameters<typeof streamTextV7>[0]['model']) {
  return async (url: string, started: (city: string) => void): Promise<void> => {
    const result = streamTextV7({
      model: model(url),
      prompt: 'Hotels in Lisbon, Atlantis and Porto?',
      tools: { lookup: toolV7({ description: 'Hotel prices in a city', inputSchema: jsonSchemaV7<{ city: string }>(citySchema), execute: (input) => lookup(input, started) }) },
      stopWhen: stepCountIsV7(2),
    });
    await result.consumeStream();
  };
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

export async function w5Wire(row: (r: Row) => void, quick: boolean): Promise<void> {
  const repeats = quick ? 3 : 5;
  const openai6 = (url: string) => createOpenAI({ baseURL: `${url}/v1`, apiKey: KEY }).chat('gpt-4.1-mini');
  const openaiResponses6 = (url: string) => createOpenAI({ baseURL: `${url}/v1`, apiKey: KEY }).responses('gpt-4.1-mini');
  const openai7 = (url: string) => createOpenAIV4({ baseURL: `${url}/v1`, apiKey: KEY }).chat('gpt-4.1-mini');
  const anthropic6 = (url: string) => createAnthropic({ baseURL: `${url}/v1`, apiKey: KEY })('claude-sonnet-4-5');
  const anthropic7 = (url: string) => createAnthropicV4({ baseURL: `${url}/v1`, apiKey: KEY })('claude-sonnet-4-5');
  const viaAdapter = (model: (url: string) => AiSdkLanguageModel) => lanes((url) => aiSdkProvider(model(url)));
  const cases: ReadonlyArray<readonly [Streams, string, (url: string, started: (city: string) => void) => Promise<void>]> = [
    ['openai', 'OpenAIChatProvider (built-in)', lanes((url) => new OpenAIChatProvider({ baseURL: `${url}/v1`, apiKey: KEY }))],
    ['openai', 'aiSdkProvider(@ai-sdk/openai 3 chat)', viaAdapter(openai6)],
    ['openai', 'ai 6 streamText(@ai-sdk/openai 3 chat)', sdk6(openai6)],
    ['openai', 'aiSdkProvider(@ai-sdk/openai 4 chat)', viaAdapter(openai7)],
    ['openai', 'ai 7 streamText(@ai-sdk/openai 4 chat)', sdk7(openai7)],
    ['openai-responses', 'aiSdkProvider(@ai-sdk/openai 3 responses)', viaAdapter(openaiResponses6)],
    ['openai-responses', 'ai 6 streamText(@ai-sdk/openai 3 responses)', sdk6(openaiResponses6)],
    ['anthropic', 'AnthropicMessagesProvider (built-in)', lanes((url) => new AnthropicMessagesProvider({ baseURL: url, apiKey: KEY }))],
    ['anthropic', 'aiSdkProvider(@ai-sdk/anthropic 3)', viaAdapter(anthropic6)],
    ['anthropic', 'ai 6 streamText(@ai-sdk/anthropic 3)', sdk6(anthropic6)],
    ['anthropic', 'aiSdkProvider(@ai-sdk/anthropic 4)', viaAdapter(anthropic7)],
    ['anthropic', 'ai 7 streamText(@ai-sdk/anthropic 4)', sdk7(anthropic7)],
  ];
  for (const [prefix, figure, drive] of cases) {
    await measure(prefix, drive); // warm-up: the imports, the JIT
    const runs: Starts[] = [];
    for (let i = 0; i < repeats; i++) runs.push(await measure(prefix, drive));
    const at = CITIES.map((city) => median(runs.map((r) => r.calls[city]!)));
    const streamMs = median(runs.map((r) => r.streamMs));
    row({
      workload: `W5 wire, ${prefix} stream of 3 calls, an event every ${GAP_MS}ms`,
      figure: `${figure}: first call starts`,
      value: at[0]!,
      unit: 'ms',
      note: `calls at ${at.map((ms) => ms.toFixed(0)).join(' / ')} ms of a ${streamMs.toFixed(0)} ms stream`,
    });
  }
}
