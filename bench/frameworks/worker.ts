// One process of the frameworks bench (./index.ts): the app of one framework (./apps.ts), plain or
// with its tools wrapped in lanes, running many concurrent requests of several tenants against
// the simulated partner (../partner/server.ts); the partner counts what it was sent. Told to
// measure cost, it times requests whose tool body answers at once: plain, with the floor any
// per-call stop pays (./lanes.ts), and with lanes (CPU time).
import { setMaxListeners } from 'node:events';
import { createClient } from 'redis';
import { ConcurrencyConfig, RateLimitedError, ToolLanes } from '../../lib/index.js';
import { RedisLaneStore } from '../../lib/redis.js';
import { callPartner, connections } from '../partner/call.js';
import { appOf, plain, type AppRequest, type PartnerBody, type Wraps } from './apps.js';
import { floorWraps, lanesWraps } from './lanes.js';
import type { CostCommand, FrameworkCommand, FrameworkCostResult, FrameworkRunResult, FrameworkScenario, FrameworkWorkerMessage } from './scenario.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const tell = (message: FrameworkWorkerMessage): void => {
  process.send?.(message);
};

const redis = createClient({ socket: { host: '127.0.0.1', port: 6379 } });
redis.on('error', () => undefined);
await redis.connect();

const limited = (retryAfterSeconds: number): Error => new RateLimitedError('the partner answered 429', retryAfterSeconds);

function concurrencyOf(scenario: FrameworkScenario): ConcurrencyConfig {
  return scenario.limiter === 'perToolRate'
    ? new ConcurrencyConfig({ perToolRate: { partner_lookup: { limit: scenario.rate, perSeconds: 1 } } })
    : new ConcurrencyConfig({ perTool: { partner_lookup: scenario.perTool } });
}

async function run(scenario: FrameworkScenario): Promise<FrameworkRunResult> {
  let completed = 0;
  let failed = 0;
  let unexpected: string | undefined;
  const body: PartnerBody = (tenant, signal) => callPartner(scenario.url, tenant, signal, limited);
  const store = scenario.limiter !== 'none' && scenario.fleet ? new RedisLaneStore({ client: redis, prefix: scenario.prefix, leaseSeconds: 10 }) : undefined;
  const wraps: Wraps = scenario.limiter === 'none' ? plain : lanesWraps(new ToolLanes({ concurrency: concurrencyOf(scenario), ...(store ? { lanes: store } : {}) }));
  const app = appOf(scenario.framework, body, wraps);
  const stop = new AbortController();
  setMaxListeners(0, stop.signal);
  const loop = async (tenant: string): Promise<void> => {
    while (Date.now() < scenario.endAt) {
      try {
        await app(tenant, scenario.calls, stop.signal);
        completed++;
      } catch (error) {
        failed++;
        // A request the scenario's end stopped is expected; anything else is kept, once.
        if (!stop.signal.aborted) unexpected ??= String(error);
      }
    }
  };
  await sleep(Math.max(0, scenario.startAt - Date.now()));
  const ending = setTimeout(() => stop.abort(new Error('the scenario ended')), Math.max(0, scenario.endAt - Date.now()));
  const { tenants } = scenario;
  await Promise.all(Array.from({ length: scenario.requests }, (_, i) => loop(tenants[i % tenants.length]!)));
  clearTimeout(ending);
  await store?.close();
  return { completed, failed, ...(unexpected === undefined ? {} : { unexpected }) };
}

// CPU µs per call of `requests` requests of `calls` calls each, one after another: the process's
// own CPU time, which a busy machine's other processes do not add to as they add to wall time.
async function timed(app: AppRequest, command: CostCommand): Promise<number> {
  const started = process.cpuUsage();
  for (let i = 0; i < command.requests; i++) await app('a', command.calls);
  const used = process.cpuUsage(started);
  return (used.user + used.system) / (command.requests * command.calls);
}

const median = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function cost(command: CostCommand): Promise<FrameworkCostResult> {
  // A body that answers at once: what is timed is the framework's loop and the wrapping around it.
  const body: PartnerBody = () => Promise.resolve('ok');
  const plainApp = appOf(command.framework, body, plain);
  const floorApp = appOf(command.framework, body, floorWraps);
  // Lanes that never make a call wait (a per-tool bound above the turn's calls): their cost alone.
  const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { partner_lookup: command.calls * 4 } }) });
  const lanesApp = appOf(command.framework, body, lanesWraps(lanes));
  const apps = [plainApp, floorApp, lanesApp] as const;
  const plainRounds: number[] = [];
  const floorAdded: number[] = [];
  const lanesAdded: number[] = [];
  // Warmed first; then the three side by side, round after round, each round in a turned order:
  // the median of the plain rounds, and the median of each round's difference (the load moves
  // between rounds more than within one).
  for (let warm = 0; warm < 3; warm++) for (const app of apps) await timed(app, command);
  for (let round = 0; round < command.rounds; round++) {
    const micros = [0, 0, 0];
    for (let step = 0; step < 3; step++) {
      const which = (round + step) % 3;
      micros[which] = await timed(apps[which]!, command);
    }
    plainRounds.push(micros[0]!);
    floorAdded.push(micros[1]! - micros[0]!);
    lanesAdded.push(micros[2]! - micros[0]!);
  }
  const plainMicros = median(plainRounds);
  return { plainMicros, floorMicros: plainMicros + median(floorAdded), lanesMicros: plainMicros + median(lanesAdded) };
}

tell({ type: 'ready' });
process.on('message', (raw) => {
  const command = raw as FrameworkCommand;
  if (command.type === 'close') {
    connections.destroy();
    void redis.close().then(() => process.disconnect?.());
    return;
  }
  if (command.type === 'cost') {
    void cost(command).then(
      (result) => tell({ type: 'cost', result }),
      (error: unknown) => {
        console.error(`frameworks bench, cost of ${command.framework}: ${String(error)}`);
        tell({ type: 'cost', result: { plainMicros: Number.NaN, floorMicros: Number.NaN, lanesMicros: Number.NaN } });
      },
    );
    return;
  }
  void run(command.scenario).then(
    (result) => tell({ type: 'done', result }),
    (error: unknown) => tell({ type: 'done', result: { completed: 0, failed: 0, unexpected: String(error) } }),
  );
});
