// Shards: many lanes, each call on a lane picked at random, on one Redis and on a Cluster of three
// (node-redis's cluster client; each lane's keys and wake-up channels share its hash slot).
// Grants a second, and the CPU of each Redis and each process beside it.
import type { Row } from '../row.js';
import { runLoad, type LoadResult } from './load.js';
import { BenchCluster, BenchRedis } from './servers.js';
import type { ScaleWorkerConfig } from './worker.js';

export interface ShardPoint {
  readonly servers: number;
  readonly result: LoadResult;
}

export async function shards(row: (r: Row) => void, prefix: string, timing: { warmMs: number; measureMs: number }, processes: number, lanes: number): Promise<ShardPoint[]> {
  const points: ShardPoint[] = [];
  const keys = Array.from({ length: lanes }, (_, i) => `tool:many-${i}`);
  for (const shardCount of [1, 3]) {
    const one = shardCount === 1 ? await BenchRedis.start() : undefined;
    const cluster = shardCount === 3 ? await BenchCluster.start() : undefined;
    const servers = one !== undefined ? [one] : cluster!.shards;
    try {
      const config: ScaleWorkerConfig = {
        lanes: 'RedisLaneStore',
        ports: servers.map((s) => s.port),
        prefix: `${prefix}shards${shardCount}:`,
        keys,
        spread: true,
        limit: 2,
        holdMs: 0,
        requesters: 64,
        parties: 1,
        ...timing,
      };
      const result = await runLoad(Array.from({ length: processes }, () => config), servers, false);
      points.push({ servers: shardCount, result });
      const workload = `FS3 shards: ${lanes} lanes, ${processes} procs x 64 callers, no hold`;
      row({
        workload,
        figure: shardCount === 1 ? 'one Redis grants/s' : 'Cluster of 3 grants/s',
        value: result.grantsPerSecond,
        unit: 'grants/s',
        note: `Redis ${result.redisCpu.map((c) => `${Math.round(c)} %`).join(' + ')}; procs ${result.workerCpu.map((c) => Math.round(c)).join(', ')} %; waiting for a CPU: Redis ${result.redisWait.map((w) => `${Math.round(w)} %`).join(' + ')}, procs ${result.workerWait.map((w) => Math.round(w)).join(', ')} % of the window; ${result.redisUsPerGrant.toFixed(0)} µs Redis CPU per grant; load ${result.load}`,
      });
    } finally {
      await one?.stop();
      await cluster?.stop();
    }
  }
  const [single, three] = points;
  if (single && three) {
    row({ workload: `FS3 shards: ${lanes} lanes`, figure: 'Cluster of 3 / one Redis', value: three.result.grantsPerSecond / single.result.grantsPerSecond, unit: 'x', note: 'same load, same run' });
  }
  return points;
}
