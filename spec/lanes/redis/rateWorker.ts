// A runner process of the fleet rate-lane spec (rate.spec.ts), forked with `node --import tsx`.
// Its runs call a tool under the fleet's perToolRate; each body stamps its start with Redis's
// own clock (so stamps from every process compare), and the process tells its parent when it is
// ready, and how its calls ended.
import { ConcurrencyConfig } from '../../../lib/config/index.js';
import { RedisLaneStore } from '../../../lib/lanes/index.js';
import { ScriptedProvider } from '../../../lib/providers/ScriptedProvider.js';
import { Agent, AgentRunner, type ModelResponse } from '../../../lib/runner/index.js';
import { ToolRegistry } from '../../../lib/tools/index.js';
import { tally } from './tally.js';
import { letGo, readyThenGo, stampStart, teller, workerConfig, workerRedis } from './workerSide.js';

export interface RateWorkerConfig {
  readonly prefix: string;
  readonly rate: { readonly limit: number; readonly perSeconds: number; readonly burst: number };
  /** Runs of one turn each, and calls per turn. */
  readonly runs: number;
  readonly calls: number;
  /** A fleet-wide concurrency lane behind the rate lane (perTool), and how long a body runs (ms; the first call of the first run `firstMs`). */
  readonly perTool?: number;
  readonly bodyMs?: number;
  readonly firstMs?: number;
}

/** What a worker tells its parent. */
export type RateWorkerMessage = { readonly type: 'ready' } | { readonly type: 'done'; readonly results: number; readonly others: readonly string[] };

const config = workerConfig<RateWorkerConfig>();
const tell = teller<RateWorkerMessage>();
const client = workerRedis();
const lanes = new RedisLaneStore({ client, prefix: config.prefix, leaseSeconds: 5 });

let bodies = 0;
const body = async (): Promise<string> => {
  const ms = bodies++ === 0 && config.firstMs !== undefined ? config.firstMs : (config.bodyMs ?? 0);
  await stampStart(client, config.prefix);
  if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
  return 'ok';
};

const tools = new ToolRegistry().register({ name: 'stamp' }, body);
const script: Record<string, ModelResponse[]> = {};
const agents = Array.from({ length: config.runs }, (_, run) => {
  script[`r${run}`] = [{ toolCalls: Array.from({ length: config.calls }, (_, i) => ({ id: `c${i}`, name: 'stamp', arguments: {} })) }, { text: 'done' }];
  return new Agent({ name: `r${run}`, instructions: '', model: 'scripted' });
});
const concurrency = new ConcurrencyConfig({ perToolRate: { stamp: config.rate }, ...(config.perTool === undefined ? {} : { perTool: { stamp: config.perTool } }) });
const runner = new AgentRunner({ provider: new ScriptedProvider(script), tools, concurrency, lanes });
await client.ping();
await readyThenGo(tell);
const results = await Promise.all(agents.map((agent, run) => runner.run(agent, 'go', { tenant: `t${run % 2}` })));
tell({ type: 'done', ...tally(results) });
await letGo(lanes, client);
