// A runner process of the multi-process spec (fleet.spec.ts), forked with `node --import tsx`.
// It runs an AgentRunner on a RedisLaneStore, its tool bodies counting themselves in Redis (so
// the most bodies running at once, fleet-wide, is measured from the bodies' side), and tells
// its parent what it does. A `victim` takes every permit of the lane and holds it until killed;
// a `hammer` runs its runs to the end and leaves. The lane is a plain perTool one, an adaptive
// one (`perToolAdaptive`, max `limit`) whose bodies say "slow down" above `slowAbove` running at
// once, as a partner would; or each call costs 1 of a tenant's `budget`. Each starts its runs when its parent says go,
// so the processes can all start up (the slow part) at once. It uses ioredis, where the other
// specs mostly use node-redis: both clients are exercised.
import { ConcurrencyConfig } from '../../../lib/config/index.js';
import { RateLimitedError } from '../../../lib/errors.js';
import { RedisLaneStore } from '../../../lib/lanes/index.js';
import { ScriptedProvider } from '../../../lib/providers/ScriptedProvider.js';
import { Agent, AgentRunner, type ModelResponse } from '../../../lib/runner/index.js';
import { ToolRegistry } from '../../../lib/tools/index.js';
import { tally } from './tally.js';
import { letGo, readyThenGo, teller, workerConfig, workerRedis } from './workerSide.js';

export interface WorkerConfig {
  readonly role: 'victim' | 'hammer';
  readonly prefix: string;
  readonly limit: number;
  readonly leaseSeconds: number;
  /** Runs of one turn each, and calls per turn. */
  readonly runs: number;
  readonly calls: number;
  /** The tool's lane: perTool `limit` (default), perToolAdaptive 1..`limit`, or a cost budget of `budget` for one tenant. */
  readonly kind?: 'fixed' | 'adaptive' | 'budget';
  /** With `adaptive`: a body that finds more than this many running (itself included) fails with RateLimitedError. */
  readonly slowAbove?: number;
  readonly budget?: number;
}

/** What a worker tells its parent. */
export type WorkerMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'running' }
  | { readonly type: 'started'; readonly at: number }
  | { readonly type: 'done'; readonly results: number; readonly others: readonly string[] };

const config = workerConfig<WorkerConfig>();
const tell = teller<WorkerMessage>();
const client = workerRedis();
const lanes = new RedisLaneStore({ client, prefix: config.prefix, leaseSeconds: config.leaseSeconds });

// One more body running, and the most ever seen, in one step.
const enter = `local n = redis.call('INCR', KEYS[1]) if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end return n`;
const keys = [`${config.prefix}running`, `${config.prefix}most`];

const body = async (): Promise<string> => {
  const running = Number(await client.eval(enter, keys.length, ...keys));
  tell({ type: 'started', at: Date.now() });
  if (config.role === 'victim') return new Promise<string>(() => undefined);
  if (config.slowAbove !== undefined && running > config.slowAbove) {
    // The partner's side: too many at once, "slow down" (counted, so the parent can read how many).
    await client.decr(keys[0]!);
    await client.incr(`${config.prefix}limited`);
    throw new RateLimitedError('the partner answered 429', 0.02);
  }
  await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 4));
  await client.decr(keys[0]!);
  return 'ok';
};

const tools = new ToolRegistry().register({ name: 'work', ...(config.kind === 'budget' ? { cost: 1 } : {}) }, body);
const script: Record<string, ModelResponse[]> = {};
const agents = Array.from({ length: config.runs }, (_, run) => {
  script[`r${run}`] = [{ toolCalls: Array.from({ length: config.calls }, (_, i) => ({ id: `c${i}`, name: 'work', arguments: {} })) }, { text: 'done' }];
  return new Agent({ name: `r${run}`, instructions: '', model: 'scripted' });
});
const concurrency =
  config.kind === 'adaptive'
    ? new ConcurrencyConfig({ perToolAdaptive: { work: { min: 1, max: config.limit } } })
    : config.kind === 'budget'
      ? new ConcurrencyConfig({ perTool: { work: config.limit }, perTenantBudget: { cost: config.budget ?? 1, perSeconds: 3600 } })
      : new ConcurrencyConfig({ perTool: { work: config.limit } });
// No loop monitor: on a loaded machine it would cut calls off for the machine's stalls, which this
// spec is not about (the lanes' bounds, a killed holder's permits).
const runner = new AgentRunner({ provider: new ScriptedProvider(script), tools, concurrency, lanes, loopStallMs: false });
await client.ping();
await readyThenGo(tell);
// A budget is one tenant's: every run of the fleet spends from it.
const runs = agents.map((agent, run) => runner.run(agent, 'go', { tenant: config.kind === 'budget' ? 'acme' : `t${run % 3}` }));
tell({ type: 'running' });
const results = await Promise.all(runs);
tell({ type: 'done', ...tally(results) });
await letGo(lanes, client);
