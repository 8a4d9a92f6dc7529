// A process of the AI SDK fleet spec (aiSdkFleet.spec.ts), forked with `node --import tsx`: its
// requests are ai 6 generateText loops whose model asks for several calls of one tool, the tools
// wrapped by withLanes on a RedisLaneStore shared with the other processes. Each body stamps its
// start with Redis's own clock (so the stamps of every process compare); a body told to answers
// the SDK's 429 with a Retry-After. The process tells its parent when it is ready and how its
// calls ended, and falls off the end of its script once done.
import { APICallError } from '@ai-sdk/provider';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';
import { ConcurrencyConfig, ToolLanes } from '../../lib/index.js';
import { RedisLaneStore } from '../../lib/lanes/index.js';
import { withLanes } from '../../lib/providers/aiSdkProvider.js';
import { letGo, readyThenGo, stampStart, teller, workerConfig, workerRedis } from '../lanes/redis/workerSide.js';
import { askedIn, scriptedModel, stepOf, toolResultsIn } from './aiSdkFixture.js';

export interface FleetWorkerConfig {
  readonly prefix: string;
  readonly rate: { readonly limit: number; readonly perSeconds: number; readonly burst?: number };
  /** Requests, and calls the model asks for in each request's one step of tool calls. */
  readonly requests: number;
  readonly calls: number;
  /** The call (`<request>-<index>`) whose body answers 429, and the wait it asks for (ms). */
  readonly limited?: { readonly callId: string; readonly retryAfterMs: number };
}

/** What a worker tells its parent: ready; then each call's result or error text the model was sent. */
export type FleetWorkerMessage = { readonly type: 'ready' } | { readonly type: 'done'; readonly results: number; readonly errors: readonly string[] };

const config = workerConfig<FleetWorkerConfig>();
const tell = teller<FleetWorkerMessage>();
const client = workerRedis();
const store = new RedisLaneStore({ client, prefix: config.prefix, leaseSeconds: 5 });
const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perToolRate: { quote: config.rate } }), lanes: store });

const tools = {
  quote: tool({
    description: 'A price quote from the partner',
    inputSchema: z.object({ n: z.number() }),
    execute: async ({ n }, { toolCallId }) => {
      await stampStart(client, config.prefix);
      if (config.limited?.callId === toolCallId) {
        throw new APICallError({ message: 'Too Many Requests', url: 'https://quotes.example/v1', requestBodyValues: {}, statusCode: 429, responseHeaders: { 'retry-after-ms': String(config.limited.retryAfterMs) } });
      }
      return `quote ${n}`;
    },
  }),
};

const model = scriptedModel(6, (prompt) =>
  stepOf(prompt) === 0 ? { calls: Array.from({ length: config.calls }, (_, i) => ({ id: `${askedIn(prompt)}-${i}`, tool: 'quote', input: { n: i } })) } : { text: JSON.stringify(toolResultsIn(prompt)) },
);

await client.ping();
await readyThenGo(tell);
const answers = await Promise.all(
  Array.from({ length: config.requests }, async (_, r) => {
    const { text } = await generateText({ model, tools: withLanes(tools, toolLanes, { tenant: `t${r % 2}` }), prompt: `r${r}`, stopWhen: stepCountIs(2) });
    return Object.values(JSON.parse(text) as Record<string, { type: string; value: unknown }>);
  }),
);
const outputs = answers.flat();
tell({ type: 'done', results: outputs.filter((o) => o.type === 'text').length, errors: outputs.filter((o) => o.type !== 'text').map((o) => String(o.value)) });
await letGo(store, client);
