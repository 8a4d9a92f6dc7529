// Streamed model turns, run for real against scripted models (no network, no keys):
//   1. a ScriptedProvider step that streams its turn: text, then 4 lookups 100 ms apart; each
//      lookup takes 200 ms and starts as soon as its call is complete, so the turn's calls are
//      done about 100*3 + 200 ms after the model began, not 100*4 + 200;
//   2. the Vercel AI SDK's own mock model (MockLanguageModelV3) behind aiSdkProvider, streaming
//      the same way, as any AI SDK provider (openai(...), anthropic(...)) would.
// It prints the text as it is written (from activity$), when each call started, the transcript
// and the tokens used. Run it with `npm run example:streaming`.
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { simulateReadableStream } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import * as t from 'io-ts';
import { concat, map, timer, type Observable } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type ModelProvider, type ModelStreamPart, type RunEvent } from '../lib/index.js';
import { aiSdkProvider } from '../lib/providers/aiSdkProvider.js'; // agent-lanes/ai-sdk, installed

const cities = ['Lisbon', 'Porto', 'Madrid', 'Seville'];
const LOOKUP_MS = 200;
const GAP_MS = 100;

const tools = new ToolRegistry().register(
  { name: 'lookup', description: 'Hotel prices in a city', args: t.type({ city: t.string }), idempotent: true },
  async ({ city }) => {
    await new Promise((resolve) => setTimeout(resolve, LOOKUP_MS));
    return { city, from: 60 + city.length * 9 };
  },
);

const planner = new Agent({ name: 'planner', instructions: 'Find the cheapest city.', model: 'scripted' });

/** The model's first turn, written over time: a sentence, then one lookup every GAP_MS, then its usage and finish. */
function firstTurn(): Observable<ModelStreamPart> {
  const parts: ModelStreamPart[] = [
    { type: 'text-delta', delta: 'Checking ' },
    { type: 'text-delta', delta: 'all four cities.' },
    ...cities.map((city, i): ModelStreamPart => ({ type: 'tool-call', id: `c${i + 1}`, name: 'lookup', arguments: JSON.stringify({ city }) })),
    { type: 'usage', inputTokens: 120, outputTokens: 64 },
    { type: 'finish', finishReason: 'tool-calls' },
  ];
  // The text at once, the calls at 0, 100, 200 and 300 ms, the usage and finish at 400.
  const at = [0, 0, 0, 1, 2, 3, 4, 4].map((step) => step * GAP_MS);
  return concat(...parts.map((part, i) => timer(i === 0 ? 0 : at[i]! - at[i - 1]!).pipe(map(() => part))));
}

/** The final answer, streamed word by word. */
function answer(text: string): Observable<ModelStreamPart> {
  const words = text.split(/(?<= )/).map((delta): ModelStreamPart => ({ type: 'text-delta', delta }));
  return concat(...[...words, { type: 'finish', finishReason: 'stop' } as const].map((part) => timer(20).pipe(map((): ModelStreamPart => part))));
}

/** The same two turns as the AI SDK's mock model streams them. */
function mockModel(): MockLanguageModelV3 {
  const finish = (reason: 'tool-calls' | 'stop', input: number, output: number): LanguageModelV3StreamPart => ({
    type: 'finish',
    finishReason: { unified: reason, raw: reason },
    usage: { inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: output, text: output, reasoning: 0 } },
  });
  const first: LanguageModelV3StreamPart[] = [
    { type: 'stream-start', warnings: [] },
    { type: 'text-delta', id: 't1', delta: 'Checking all four cities.' },
    ...cities.map((city, i): LanguageModelV3StreamPart => ({ type: 'tool-call', toolCallId: `call_${i + 1}`, toolName: 'lookup', input: JSON.stringify({ city }) })),
    finish('tool-calls', 120, 64),
  ];
  const second: LanguageModelV3StreamPart[] = [
    { type: 'text-delta', id: 't2', delta: 'Madrid, ' },
    { type: 'text-delta', id: 't2', delta: 'from 114.' },
    finish('stop', 260, 9),
  ];
  return new MockLanguageModelV3({
    doStream: [{ stream: simulateReadableStream({ chunks: first, chunkDelayInMs: GAP_MS }) }, { stream: simulateReadableStream({ chunks: second, chunkDelayInMs: 20 }) }],
  });
}

async function play(title: string, provider: ModelProvider): Promise<void> {
  console.log(`\n${title}`);
  const runner = new AgentRunner({ provider, tools });
  const started = performance.now();
  const ms = (): string => `${String(Math.round(performance.now() - started)).padStart(4)} ms`;
  // When the model finished its first turn, and when the last lookup ended.
  let written = 0;
  let done = 0;
  // Live activity: the model's text as it is written, and each call as it starts.
  const watching = runner.activity$.subscribe((a) => {
    if (a.type === 'text-delta') console.log(`  ${ms()}  model writes  ${JSON.stringify(a.delta)}`);
    if (a.type === 'started') console.log(`  ${ms()}  ${a.callId} started`);
    if (a.type === 'ended') done = performance.now() - started;
  });
  const events: RunEvent[] = [];
  const result = await new Promise<RunEvent[]>((resolve) =>
    runner.run$(planner, 'Where is it cheapest: Lisbon, Porto, Madrid or Seville?').subscribe({
      next: (event) => {
        events.push(event);
        if (event.type === 'MODEL_RESPONSE' && event.turn === 1) written = performance.now() - started;
        if (event.type === 'MODEL_RESPONSE') console.log(`  ${ms()}  MODEL_RESPONSE turn ${event.turn}: ${event.toolCalls.length} calls, finish ${event.finishReason ?? '-'}`);
        if (event.type === 'TOOL_RESULT') console.log(`  ${ms()}  TOOL_RESULT ${event.callId} ${JSON.stringify(event.result)}`);
        if (event.type === 'RUN_COMPLETED') console.log(`  ${ms()}  RUN_COMPLETED ${JSON.stringify(event.output)}`);
      },
      complete: () => resolve(events),
    }),
  );
  watching.unsubscribe();
  const usage = result.filter((e) => e.type === 'MODEL_RESPONSE').reduce((sum, e) => sum + (e.type === 'MODEL_RESPONSE' ? (e.usage?.inputTokens ?? 0) + (e.usage?.outputTokens ?? 0) : 0), 0);
  console.log(`  tokens used: ${usage}`);
  console.log(
    `  the model finished its turn at ${Math.round(written)} ms and the lookups were all done at ${Math.round(done)} ms;` +
      ` read whole, the turn's lookups would only have started at ${Math.round(written)} ms and been done at about ${Math.round(written) + LOOKUP_MS} ms`,
  );
}

await play('1. A scripted stream (ScriptedProvider)', new ScriptedProvider([firstTurn, () => answer('Madrid, from 114.')]));
await play('2. The AI SDK mock model through aiSdkProvider', aiSdkProvider(mockModel()));
