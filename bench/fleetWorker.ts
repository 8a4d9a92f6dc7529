// One process of the fleet bench (bench/fleet.ts): requesters that loop on one lane (ask, hold
// the permit `holdMs`, give it back, ask again) through a RedisLaneStore or through
// redis-semaphore, timing each wait; or a victim that takes every permit and holds it until it
// is killed. It starts when its parent says go and sends back what it measured.
import { Redis } from 'ioredis';
import { Semaphore } from 'redis-semaphore';
import { createClient } from 'redis';
import { RedisLaneStore } from '../lib/lanes/index.js';

export interface FleetWorkerConfig {
  readonly lanes: 'RedisLaneStore' | 'redis-semaphore';
  readonly role: 'load' | 'victim';
  readonly prefix: string;
  readonly key: string;
  readonly limit: number;
  readonly leaseSeconds: number;
  /** Requesters per party. */
  readonly requesters: Readonly<Record<string, number>>;
  readonly holdMs: number;
  /** Waits are counted for requests made after warmMs, and granted before warmMs + measureMs. */
  readonly warmMs: number;
  readonly measureMs: number;
}

export type FleetWorkerMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'held' }
  | { readonly type: 'result'; readonly waits: Readonly<Record<string, number[]>> };

const config = JSON.parse(process.argv[2]!) as FleetWorkerConfig;
const tell = (message: FleetWorkerMessage): void => {
  process.send?.(message);
};
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// A lane, as a bench requester uses it: wait for a permit, then give it back.
type Acquire = (party: string) => Promise<() => void>;

let acquire: Acquire;
let close: () => Promise<unknown>;
if (config.lanes === 'RedisLaneStore') {
  const client = createClient({ socket: { host: '127.0.0.1', port: 6379 } });
  client.on('error', () => undefined);
  await client.connect();
  const store = new RedisLaneStore({ client, prefix: config.prefix, leaseSeconds: config.leaseSeconds });
  acquire = (party) =>
    new Promise((resolve) => {
      const permit = store.enter(config.key, config.limit, () => resolve(() => permit.leave()), party);
    });
  close = async () => {
    await store.close();
    await client.close();
  };
} else {
  const client = new Redis({ host: '127.0.0.1', port: 6379 });
  client.on('error', () => undefined);
  const lockTimeout = config.leaseSeconds * 1000;
  acquire = async () => {
    const semaphore = new Semaphore(client, `${config.prefix}${config.key}`, config.limit, { lockTimeout, acquireTimeout: 120_000, onLockLost: () => undefined });
    await semaphore.acquire();
    return () => void semaphore.release().catch(() => undefined);
  };
  close = () => client.quit();
}

await sleep(0);
tell({ type: 'ready' });
await new Promise<void>((resolve) => process.once('message', () => resolve()));

if (config.role === 'victim') {
  for (let i = 0; i < config.limit; i++) await acquire('victim');
  tell({ type: 'held' });
  await new Promise(() => undefined);
}

const start = performance.now();
const warmUntil = start + config.warmMs;
const endAt = warmUntil + config.measureMs;
const waits: Record<string, number[]> = {};
const requester = async (party: string): Promise<void> => {
  const mine = (waits[party] ??= []);
  while (performance.now() < endAt) {
    const asked = performance.now();
    const release = await acquire(party);
    const granted = performance.now();
    if (asked >= warmUntil && granted <= endAt) mine.push(granted - asked);
    await sleep(config.holdMs);
    release();
  }
};
await Promise.all(Object.entries(config.requesters).flatMap(([party, count]) => Array.from({ length: count }, () => requester(party))));
tell({ type: 'result', waits });
await close();
process.disconnect?.();
