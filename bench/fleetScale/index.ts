// The fleet-scale bench (`npm run bench -- --only fleet-scale`): the fleet lanes as a fleet grows,
// on a redis-server of the bench's own on 127.0.0.1 (and a Cluster of three), beside
// redis-semaphore and Bottleneck's clustering where they apply. Figures, not pass/fail:
//   FS1 hand-off and use: 2..16 processes on one lane of 8, holds of 5, 20 and 50 ms.
//   FS2 growth: Redis's time per grant as tenants, queued calls, lanes and processes grow; memory
//       per waiting call and per idle lane; subscriber connections and channels per process;
//       sweeping a killed process's permits out of a lane with 100,000 waiters.
//   FS3 shards: many lanes on a 3-shard Cluster against one Redis.
// Size knobs (environment): FLEET_SCALE_MS (each load's measured window, default 2000),
// FLEET_SCALE_WAITERS (the largest queue, default 100000), FLEET_SCALE_FULL=1 (every library at
// every point of FS1, not only the comparison points), FLEET_SCALE_ONLY=handoff,growth,shards,
// FLEET_SCALE_PROCS=2,4,8,16, FLEET_SCALE_HOLDS=5,20,50 and FLEET_SCALE_LIBS (FS1's points),
// FLEET_SCALE_SHARD_PROCS=4 and FLEET_SCALE_LANES=1000 (FS3's load).
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Row } from '../row.js';
import { cpus } from 'node:os';
import { png, type Chart } from './chart.js';
import { growth, type GrowthFigures, type GrowthPoint } from './growth.js';
import { handOff, type HandOffPoint, type Library } from './handoff.js';
import { BenchRedis, hasRedisServer, loadText } from './servers.js';
import { shards, type ShardPoint } from './shards.js';

const env = (name: string, fallback: number): number => {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
};

const list = (name: string, fallback: number[]): number[] => process.env[name]?.split(',').map(Number) ?? fallback;

export async function fleetScale(row: (r: Row) => void): Promise<void> {
  if (!hasRedisServer()) {
    row({ workload: 'FS fleet scale', figure: 'skipped', value: 0, unit: '', note: 'no redis-server here to start one of the bench\'s own' });
    return;
  }
  const measureMs = env('FLEET_SCALE_MS', 2000);
  const timing = { warmMs: Math.min(1000, measureMs / 2), measureMs };
  const only = (process.env.FLEET_SCALE_ONLY ?? 'handoff,growth,shards').split(',');
  const full = process.env.FLEET_SCALE_FULL === '1';
  const prefix = `fleet-scale:${randomBytes(3).toString('hex')}:`;
  // The figures of every part are kept in docs/fleet-scale.json: a run of some parts redraws the
  // pictures with the others' last figures.
  const out = fileURLToPath(new URL('../../../docs/', import.meta.url));
  const kept = `${out}fleet-scale.json`;
  const figures = (existsSync(kept) ? JSON.parse(readFileSync(kept, 'utf8')) : {}) as Figures;
  if (only.includes('handoff')) {
    const redis = await BenchRedis.start();
    try {
      const plan: Array<{ lanes: Library; processes: number; holdMs: number }> = [];
      for (const holdMs of list('FLEET_SCALE_HOLDS', [5, 20, 50])) {
        for (const processes of list('FLEET_SCALE_PROCS', [2, 4, 8, 16])) {
          for (const lanes of (process.env.FLEET_SCALE_LIBS?.split(',') ?? ['RedisLaneStore', 'redis-semaphore', 'Bottleneck']) as Library[]) {
            if (!lanes.startsWith('RedisLaneStore') && !full && !(holdMs === 20 || processes === 8)) continue;
            plan.push({ lanes, processes, holdMs });
          }
        }
      }
      figures.handOff = await handOff(row, redis, prefix, plan, timing);
    } finally {
      await redis.stop();
    }
  }
  if (only.includes('growth')) {
    const redis = await BenchRedis.start();
    try {
      figures.growth = await growth(row, redis, prefix, env('FLEET_SCALE_WAITERS', 100_000));
    } finally {
      await redis.stop();
    }
  }
  if (only.includes('shards')) {
    figures.shards = await shards(row, prefix, timing, env('FLEET_SCALE_SHARD_PROCS', 4), env('FLEET_SCALE_LANES', 1000));
  }
  // The figures and their picture beside docs/fleet.md (the bench is compiled to .bench/bench/fleetScale/).
  mkdirSync(out, { recursive: true });
  writeFileSync(kept, `${JSON.stringify(figures)}\n`);
  const caption = `npm run bench -- --only fleet-scale, ${new Date().toISOString().slice(0, 16)} UTC, Node ${process.version}, ${cpus().length} cores shared with other work (load ${loadText()} at the end): figures from a busy machine.`;
  const charts = chartsOf(figures);
  if (charts.length > 0) {
    const drawn = png(charts, caption, `${out}fleet-scale.png`);
    row({ workload: 'FS pictures', figure: drawn ? 'docs/fleet-scale.png and .svg written' : 'docs/fleet-scale.svg written (no Chromium here for the PNG)', value: charts.length, unit: 'charts' });
  }
}

const libraries: readonly Library[] = ['RedisLaneStore', 'redis-semaphore', 'Bottleneck'];

interface Figures {
  handOff?: HandOffPoint[];
  growth?: GrowthFigures;
  shards?: ShardPoint[];
}

function chartsOf(figures: Figures): Chart[] {
  const charts: Chart[] = [];
  const points = figures.handOff ?? [];
  const line = (lanes: Library, holdMs: number, value: (p: HandOffPoint) => number): Array<[number, number]> =>
    points.filter((p) => p.lanes === lanes && p.holdMs === holdMs).map((p) => [p.processes, value(p)]);
  if (points.length > 0) {
    charts.push({
      title: "Lane use with 20 ms holds (lane of 8, 20 callers a process)",
      x: 'processes',
      y: 'use, % (hold time / 8 x wall time)',
      series: libraries.map((lanes) => ({ name: lanes, points: line(lanes, 20, (p) => 100 * p.result.use) })),
      mark: { y: 90, label: 'target 90 %' },
    });
    charts.push({
      title: 'RedisLaneStore lane use by hold',
      x: 'processes',
      y: 'use, %',
      series: [5, 20, 50].map((holdMs) => ({ name: `${holdMs} ms holds`, points: line('RedisLaneStore', holdMs, (p) => 100 * p.result.use) })),
      mark: { y: 90, label: 'target 90 %' },
    });
    charts.push({
      title: 'Hand-off gap, 20 ms holds: p50 (solid), p99 (dashed)',
      x: 'processes',
      y: 'ms, a holder leaving to the next body starting',
      series: libraries.flatMap((lanes) => [
        { name: `${lanes} p50`, points: line(lanes, 20, (p) => p.result.gap[0]) },
        { name: `${lanes} p99`, points: line(lanes, 20, (p) => p.result.gap[1]), dashed: true },
      ]),
    });
    charts.push({
      title: 'Redis CPU per grant, 20 ms holds',
      x: 'processes',
      y: 'µs of Redis CPU per grant',
      series: libraries.map((lanes) => ({ name: lanes, points: line(lanes, 20, (p) => p.result.redisUsPerGrant) })),
    });
  }
  const growth = figures.growth;
  if (growth !== undefined) {
    const of = (list: GrowthPoint[], at: 0 | 1): Array<[number, number]> => list.map((p) => [p.size, p.grantUs[at]]);
    charts.push({
      title: 'Redis time of the script that hands a permit on',
      x: 'calls queued / tenants waiting / lanes in use (log)',
      y: 'µs (SLOWLOG, log), p50 solid, p99 dashed',
      logX: true,
      logY: 10,
      series: [
        { name: 'calls queued p50', points: of(growth.queue, 0) },
        { name: 'tenants p50', points: of(growth.tenants, 0) },
        { name: 'lanes p50', points: of(growth.lanes, 0) },
        { name: 'calls queued p99', points: of(growth.queue, 1), dashed: true },
        { name: 'tenants p99', points: of(growth.tenants, 1), dashed: true },
        { name: 'lanes p99', points: of(growth.lanes, 1), dashed: true },
      ],
    });
  }
  const shardPoints = figures.shards ?? [];
  if (shardPoints.length > 0) {
    charts.push({
      title: 'Many lanes: one Redis against a Cluster of 3',
      x: 'shards',
      y: 'grants/s (the same load)',
      series: [
        { name: 'grants/s measured', points: shardPoints.map((p) => [p.servers, p.result.grantsPerSecond]) },
        // What the shards' CPU would serve, busy all the time, at the CPU per grant measured.
        { name: "Redis's ceiling", points: shardPoints.map((p) => [p.servers, (p.servers * 1e6) / p.result.redisUsPerGrant]), dashed: true },
      ],
    });
  }
  return charts;
}
