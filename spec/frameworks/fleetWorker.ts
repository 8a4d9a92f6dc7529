// A process of the frameworks' fleet spec (fleetRate.spec.ts), forked with `node --import tsx`:
// its requests run a framework's own agent (the OpenAI Agents SDK's Runner, or LangChain's
// createReactAgent) with a scripted model, the tools wrapped by withLanes on a ToolLanes whose
// lanes live on Redis. Each body stamps its start with Redis's own clock (so stamps from every
// process compare); the process tells its parent when it is ready, and what the model was told.
import { Agent, Runner, setTracingDisabled, tool as agentsTool } from '@openai/agents';
import { tool as langchainTool } from '@langchain/core/tools';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';
import { ConcurrencyConfig, ToolLanes } from '../../lib/index.js';
import { withLanes as withAgentsLanes } from '../../lib/openaiAgents.js';
import { withLanes as withLangChainLanes } from '../../lib/langchain.js';
import { RedisLaneStore } from '../../lib/redis.js';
import { letGo, readyThenGo, stampStart, teller, workerConfig, workerRedis } from '../lanes/redis/workerSide.js';
import * as agents from './agentsModel.js';
import * as chat from './chatModel.js';

export interface FleetWorkerConfig {
  readonly framework: 'openai-agents' | 'langchain';
  readonly prefix: string;
  readonly rate: { readonly limit: number; readonly perSeconds: number; readonly burst: number };
  /** Requests (one agent run of one turn of calls each), and calls per turn. */
  readonly runs: number;
  readonly calls: number;
}

/** What a worker tells its parent: ready, then the results the model was told and anything else it was told. */
export type FleetWorkerMessage = { readonly type: 'ready' } | { readonly type: 'done'; readonly results: number; readonly others: readonly string[] };

setTracingDisabled(true);
const config = workerConfig<FleetWorkerConfig>();
const tell = teller<FleetWorkerMessage>();
const client = workerRedis();
const lanes = new RedisLaneStore({ client, prefix: config.prefix, leaseSeconds: 5 });
const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perToolRate: { stamp: config.rate } }), lanes });
// A first request of a tool under no rate, before the process says it is ready: the framework's
// modules loaded and its code warm, so a body's stamp follows its admission closely.
let warming = true;

// The body's start, by Redis's clock, on the fleet's list of stamps.
const stamp = async (): Promise<string> => {
  if (!warming) await stampStart(client, config.prefix);
  return 'ok';
};
const schema = z.object({ n: z.number() });
const callsOf = (run: number, name: string) => Array.from({ length: config.calls }, (_, i) => [name, `r${run}-c${i}`, { n: i }] as const);

// One request: the framework's agent, its tools wrapped for this request, and what the model was told of each call.
async function request(run: number, name = 'stamp'): Promise<Record<string, string>> {
  const tenant = `t${run % 2}`;
  if (config.framework === 'openai-agents') {
    const model = new agents.ScriptedAgentsModel([agents.callsTurn(callsOf(run, name)), agents.textTurn('done')]);
    const tools = withAgentsLanes([agentsTool({ name, description: 'Stamp.', parameters: schema, execute: stamp })], toolLanes, { tenant });
    await new Runner().run(new Agent({ name: `r${run}`, instructions: '', model, tools }), 'go');
    return agents.resultsSeen(model.requests[1]!.input);
  }
  const llm = new chat.ScriptedChatModel([chat.callsTurn(callsOf(run, name)), chat.textTurn('done')]);
  const tools = withLangChainLanes([langchainTool(stamp, { name, description: 'Stamp.', schema })], toolLanes, { tenant });
  await createReactAgent({ llm, tools }).invoke({ messages: [{ role: 'user', content: 'go' }] });
  return chat.resultsSeen(llm.requests[1]!);
}

await client.ping();
await request(0, 'warm');
warming = false;
await readyThenGo(tell);
const told = await Promise.all(Array.from({ length: config.runs }, (_, run) => request(run)));
const texts = told.flatMap((seen) => Object.values(seen));
tell({ type: 'done', results: texts.filter((text) => text === 'ok').length, others: texts.filter((text) => text !== 'ok') });
await letGo(lanes, client);
