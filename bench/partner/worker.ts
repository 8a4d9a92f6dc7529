// One runner process of the partner bench (bench/partner/index.ts): an AgentRunner whose lanes
// live in a RedisLaneStore shared with three other such processes, running many concurrent runs
// of several tenants against the simulated partner (bench/partner/server.ts). Each run is a
// scripted model asking for turns of tool calls; the tool's body is one HTTP request to the
// partner, and a 429 is thrown as RateLimitedError where the scenario has the runner act on it.
// Told a scenario, the process runs it from `startAt` to `endAt` and sends back what its model
// spent; the partner counts the requests.
import { setMaxListeners } from 'node:events';
import { Redis } from 'ioredis';
import Bottleneck from 'bottleneck';
import { createClient } from 'redis';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  RateLimitedError,
  ScriptedProvider,
  ToolRegistry,
  type ModelRequest,
  type ModelResponse,
  type ToolContext,
} from '../../lib/index.js';
import { RedisLaneStore } from '../../lib/redis.js';
import { callPartner, connections } from './call.js';
import { ADAPTIVE, CALLS_PER_TURN, TOOL_TURNS, TURN_USAGE, type PartnerCommand, type PartnerScenario, type PartnerWorkerMessage, type PartnerWorkerResult } from './scenario.js';

const MODEL_MS = 20;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const tell = (message: PartnerWorkerMessage): void => {
  process.send?.(message);
};

const redis = createClient({ socket: { host: '127.0.0.1', port: 6379 } });
redis.on('error', () => undefined);
await redis.connect();

/** The model: CALLS_PER_TURN calls to the partner per turn, TOOL_TURNS times, then a text answer. */
function modelFor(tokens: Record<string, number>): ScriptedProvider {
  let provider: ScriptedProvider;
  const step = async (request: ModelRequest): Promise<ModelResponse> => {
    // The provider keeps every request; a run of thousands of turns needs none of them.
    provider.requests.length = 0;
    await sleep(MODEL_MS);
    tokens[request.agent] = (tokens[request.agent] ?? 0) + TURN_USAGE.inputTokens + TURN_USAGE.outputTokens;
    const turn = request.messages.filter((message) => message.role === 'assistant').length;
    if (turn >= TOOL_TURNS) return { text: 'done', usage: TURN_USAGE };
    const toolCalls = Array.from({ length: CALLS_PER_TURN }, (_, i) => ({ id: `t${turn}c${i}`, name: 'partner', arguments: {} }));
    return { toolCalls, usage: TURN_USAGE };
  };
  // Every step is the same function of the request, so the script only has to be long enough.
  provider = new ScriptedProvider(Array.from({ length: 500_000 }, () => step));
  return provider;
}

const asRateLimited = (retryAfterSeconds: number): Error => new RateLimitedError('the partner answered 429', retryAfterSeconds);
const asFailure = (): Error => new Error('the partner answered 429');

/** The lanes a scenario's runner is made with; `budgeted`: the runner of the tenant given a budget. */
function concurrencyFor(scenario: PartnerScenario, budgeted: boolean): ConcurrencyConfig | undefined {
  switch (scenario.limiter) {
    case 'concurrency':
      return new ConcurrencyConfig({ perTool: { partner: scenario.perTool ?? 1 } });
    case 'rate':
      return new ConcurrencyConfig({ perToolRate: { partner: { limit: scenario.rate, perSeconds: 1, ...(scenario.burst === undefined ? {} : { burst: scenario.burst }) } } });
    case 'adaptive':
      return new ConcurrencyConfig({ perToolAdaptive: { partner: ADAPTIVE } });
    case 'paced':
      return new ConcurrencyConfig({ perToolAdaptive: { partner: { ...ADAPTIVE, pace: true } } });
    case 'budget': {
      const { budget } = scenario;
      const perTenant = scenario.perTenant ?? 1;
      if (!budgeted || budget === undefined) return new ConcurrencyConfig({ perTenant });
      // Each turn reserves what a turn reports (the scripted model's usage), so runs in flight together cannot overspend.
      return new ConcurrencyConfig({ perTenant, perTenantBudget: { tokens: budget.tokens, perSeconds: budget.perSeconds, turnTokens: TURN_USAGE.inputTokens + TURN_USAGE.outputTokens } });
    }
    default:
      return undefined;
  }
}

/** A Bottleneck limiter clustered through Redis: the partner's R as a reservoir refilled each second. */
function bottleneckFor(scenario: PartnerScenario): Bottleneck {
  const limiter = new Bottleneck({
    id: `${scenario.prefix}bottleneck`,
    datastore: 'ioredis',
    Redis,
    clientOptions: { host: '127.0.0.1', port: 6379 },
    clearDatastore: false,
    reservoir: scenario.rate,
    reservoirRefreshAmount: scenario.rate,
    reservoirRefreshInterval: 1000,
    // Clustered, Bottleneck refreshes a reservoir on its heartbeat, every 5 s unless told otherwise.
    heartbeatInterval: 250,
  });
  limiter.on('error', () => undefined);
  return limiter;
}

async function run(scenario: PartnerScenario): Promise<PartnerWorkerResult> {
  const tokens: Record<string, number> = {};
  const runs = { completed: 0, failed: 0, cancelled: 0, interrupted: 0 };
  let budgetRefusals = 0;
  let unexpected: string | undefined;
  const store = new RedisLaneStore({ client: redis, prefix: scenario.prefix, leaseSeconds: 10 });
  const limiter = scenario.limiter === 'bottleneck' ? bottleneckFor(scenario) : undefined;
  // The runner is told of a 429 (RateLimitedError, which pauses the tool's lane) only where the
  // scenario measures what it does with it; elsewhere a 429 is a plain failure of the call.
  const limited = scenario.limiter === 'rate' || scenario.limiter === 'adaptive' || scenario.limiter === 'paced' || scenario.limiter === 'budget' ? asRateLimited : asFailure;
  const body =
    limiter === undefined
      ? (_args: unknown, ctx: ToolContext) => callPartner(scenario.url, ctx.tenant, ctx.signal, limited)
      : (_args: unknown, ctx: ToolContext) => limiter.schedule(() => callPartner(scenario.url, ctx.tenant, ctx.signal, limited));
  const tools = new ToolRegistry().register({ name: 'partner', idempotent: true }, body);
  const runnerOf = (budgeted: boolean): AgentRunner => {
    const concurrency = concurrencyFor(scenario, budgeted);
    return new AgentRunner({ provider: modelFor(tokens), tools, lanes: store, ...(concurrency ? { concurrency } : {}) });
  };
  // The tenant given a budget runs on a runner of its own, beside the same store.
  const runner = runnerOf(false);
  const budgeted = scenario.budget === undefined ? runner : runnerOf(true);
  const stop = new AbortController();
  // Every run of the scenario listens to it.
  setMaxListeners(0, stop.signal);
  const loop = async (tenant: string): Promise<void> => {
    const agent = new Agent({ name: tenant, instructions: '', model: 'scripted' });
    while (Date.now() < scenario.endAt) {
      const result = await (tenant === scenario.budget?.tenant ? budgeted : runner).run(agent, 'go', { tenant, signal: stop.signal });
      runs[result.status]++;
      if (result.status !== 'failed') continue;
      if (result.error?.name === 'BudgetExceededError') {
        budgetRefusals++;
        // A caller told its budget is spent asks again later, not at once.
        await sleep(250);
      } else unexpected ??= `${result.error?.name}: ${result.error?.message}`;
    }
  };
  await sleep(Math.max(0, scenario.startAt - Date.now()));
  const ending = setTimeout(() => stop.abort(new Error('the scenario ended')), Math.max(0, scenario.endAt - Date.now()));
  await Promise.all(scenario.tenants.flatMap((tenant) => Array.from({ length: scenario.runsPerTenant }, () => loop(tenant))));
  clearTimeout(ending);
  // Jobs still queued in Bottleneck belong to cancelled runs.
  await limiter?.stop({ dropWaitingJobs: true });
  await limiter?.disconnect();
  await store.close();
  return { tokens, runs, budgetRefusals, ...(unexpected === undefined ? {} : { unexpected }) };
}

tell({ type: 'ready' });
process.on('message', (raw) => {
  const command = raw as PartnerCommand;
  if (command.type === 'close') {
    connections.destroy();
    void redis.close().then(() => process.disconnect?.());
    return;
  }
  void run(command.scenario).then(
    (result) => tell({ type: 'done', result }),
    (error: unknown) => tell({ type: 'done', result: { tokens: {}, runs: { completed: 0, failed: 0, cancelled: 0, interrupted: 0 }, budgetRefusals: 0, unexpected: String(error) } }),
  );
});
