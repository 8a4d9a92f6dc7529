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
// FLEET_SCALE_PROCS=2,4,8,16 and FLEET_SCALE_HOLDS=5,20,50 (FS1's points).
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Row } from '../row.js';
import { growth } from './growth.js';
import { handOff, type Library } from './handoff.js';
import { BenchRedis, hasRedisServer } from './servers.js';

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
  const figures: Record<string, unknown> = {};
  if (only.includes('handoff')) {
    const redis = await BenchRedis.start();
    try {
      const plan: Array<{ lanes: Library; processes: number; holdMs: number }> = [];
      for (const holdMs of list('FLEET_SCALE_HOLDS', [5, 20, 50])) {
        for (const processes of list('FLEET_SCALE_PROCS', [2, 4, 8, 16])) {
          for (const lanes of ['RedisLaneStore', 'redis-semaphore', 'Bottleneck'] as const) {
            if (lanes !== 'RedisLaneStore' && !full && !(holdMs === 20 || processes === 8)) continue;
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
  const out = fileURLToPath(new URL('../../../docs/fleet-scale/', import.meta.url));
  mkdirSync(out, { recursive: true });
  writeFileSync(`${out}figures.json`, JSON.stringify(figures, null, 1));
}
