// One process of the fleet-scale bench (bench/fleetScale/): requesters that loop on a lane (ask,
// hold the permit `holdMs`, give it back, ask again) through a RedisLaneStore, redis-semaphore or
// Bottleneck's clustering, on the bench's own Redis (one port) or Cluster (three). Each hold is
// timed on the machine's monotonic clock (process.hrtime, the same in every process): when the
// body started, and when it left. The parent pairs one process's leaving with the next start.
import Bottleneck from 'bottleneck';
import { Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import { Semaphore } from 'redis-semaphore';
import { ioredisConnection, nodeRedisConnection, RedisLaneStore, type RedisConnection } from '../../lib/lanes/index.js';
import { processWaitMs } from './servers.js';

export interface ScaleWorkerConfig {
  /** `RedisLaneStore (ioredis)`: the store on an ioredis client (one Redis only), named in FLEET_SCALE_LIBS to run. */
  readonly lanes: 'RedisLaneStore' | 'RedisLaneStore (ioredis)' | 'redis-semaphore' | 'Bottleneck';
  /** One port: a standalone Redis; three: a Cluster. */
  readonly ports: readonly number[];
  readonly prefix: string;
  /** The lanes: requester i asks keys[i % keys.length] (one lane), or a random one each time (`spread`). */
  readonly keys: readonly string[];
  readonly spread: boolean;
  readonly limit: number;
  readonly holdMs: number;
  readonly requesters: number;
  /** Tenants (parties) the requesters are dealt to in turn. */
  readonly parties: number;
  readonly warmMs: number;
  readonly measureMs: number;
}

export type ScaleWorkerMessage =
  | { readonly type: 'ready' }
  | {
      readonly type: 'result';
      readonly pid: number;
      /** start, end, start, end... (ms on the monotonic clock) of every hold since go. */
      readonly holds: number[];
      /** Holds started inside the window. */
      readonly grants: number;
      /** This process's CPU (user + system) during the window, ms. */
      readonly cpuMs: number;
      /** How long its main thread waited for a CPU during the window, ms. */
      readonly waitMs: number;
      /** Wake-up messages its subscriber heard (RedisLaneStore), the whole run. */
      readonly heard: number;
      /** Requests refused and asked again (Bottleneck's ERR UNKNOWN_CLIENT). */
      readonly refused: number;
    };

const config = JSON.parse(process.argv[2]!) as ScaleWorkerConfig;
const tell = (message: ScaleWorkerMessage): void => {
  process.send?.(message);
};
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const clock = (): number => Number(process.hrtime.bigint()) / 1e6;

type Acquire = (key: string, party: string) => Promise<() => void>;
let acquire: Acquire;
let heard = 0;
let refused = 0;
let close: () => Promise<unknown>;
const cluster = config.ports.length > 1;

if (config.lanes === 'RedisLaneStore' || config.lanes === 'RedisLaneStore (ioredis)') {
  let inner: RedisConnection;
  let closeClient: () => Promise<unknown>;
  if (config.lanes === 'RedisLaneStore (ioredis)') {
    const client = new Redis({ host: '127.0.0.1', port: config.ports[0]! });
    client.on('error', () => undefined);
    inner = ioredisConnection(client);
    closeClient = () => client.quit();
  } else {
    const client = cluster
      ? createCluster({ rootNodes: config.ports.map((port) => ({ socket: { host: '127.0.0.1', port } })) })
      : createClient({ socket: { host: '127.0.0.1', port: config.ports[0]! } });
    client.on('error', () => undefined);
    await client.connect();
    inner = nodeRedisConnection(client as never);
    closeClient = () => client.close();
  }
  // The client's connection, its subscriber counting the wake-ups it hears.
  const counting: RedisConnection = {
    evalsha: (sha1, keys, args) => inner.evalsha(sha1, keys, args),
    eval: (source, keys, args) => inner.eval(source, keys, args),
    ready: () => inner.ready?.() ?? true,
    subscriber(onReady) {
      const sub = inner.subscriber(onReady);
      return {
        subscribe: (channel, sharded, listener) =>
          sub.subscribe(channel, sharded, (message) => {
            heard++;
            listener(message);
          }),
        unsubscribe: (channel, sharded) => sub.unsubscribe(channel, sharded),
        close: () => sub.close(),
        destroy: () => sub.destroy?.(),
      };
    },
  };
  const store = new RedisLaneStore({ client: counting, prefix: config.prefix, leaseSeconds: 10 });
  acquire = (key, party) =>
    new Promise((resolve) => {
      const permit = store.enter(key, config.limit, () => resolve(() => permit.leave()), party);
    });
  close = async () => {
    await store.close();
    await closeClient();
  };
} else if (config.lanes === 'redis-semaphore') {
  const client = new Redis({ host: '127.0.0.1', port: config.ports[0]! });
  client.on('error', () => undefined);
  acquire = async (key) => {
    const semaphore = new Semaphore(client, `${config.prefix}${key}`, config.limit, { lockTimeout: 10_000, acquireTimeout: 120_000, onLockLost: () => undefined });
    await semaphore.acquire();
    return () => void semaphore.release().catch(() => undefined);
  };
  close = () => client.quit();
} else {
  const limiters = new Map<string, Bottleneck>();
  const limiterOf = (key: string): Bottleneck => {
    let limiter = limiters.get(key);
    if (limiter === undefined) {
      limiter = new Bottleneck({
        id: `${config.prefix}${key}`,
        datastore: 'ioredis',
        Redis,
        clientOptions: { host: '127.0.0.1', port: config.ports[0]! },
        clearDatastore: false,
        maxConcurrent: config.limit,
        timeout: 10_000,
      });
      limiter.on('error', () => undefined);
      limiters.set(key, limiter);
    }
    return limiter;
  };
  for (const key of config.keys) await limiterOf(key).ready();
  // Bottleneck runs a job and frees its slot once the job settles: the job resolves with a
  // release the requester calls when its hold is over.
  // A client the others took for dead (no heartbeat in time, on a busy machine) is refused with
  // ERR UNKNOWN_CLIENT: the requester asks again, and the refusals are counted.
  // A limiter that keeps refusing past the window gives up: its requester stops.
  const ask = (key: string, resolve: (release: () => void) => void, reject: (error: Error) => void): void => {
    limiterOf(key)
      .schedule(() => new Promise<void>((done) => resolve(done)))
      .catch((error: unknown) => {
        refused++;
        if (clock() > endAt) reject(error instanceof Error ? error : new Error(String(error)));
        else setTimeout(() => ask(key, resolve, reject), 10);
      });
  };
  acquire = (key) => new Promise((resolve, reject) => ask(key, resolve, reject));
  close = async () => {
    for (const limiter of limiters.values()) await limiter.disconnect(true);
  };
}

await sleep(0);
tell({ type: 'ready' });
const t0 = await new Promise<number>((resolve) => process.once('message', (message) => resolve(Number(message))));
const warmUntil = t0 + config.warmMs;
const endAt = warmUntil + config.measureMs;

const holds: number[] = [];
let grants = 0;
let cpuAtStart: NodeJS.CpuUsage | undefined;
let cpuMs = 0;
let waitAtStart = 0;
let waitMs = 0;
const startCpu = setTimeout(() => {
  cpuAtStart = process.cpuUsage();
  waitAtStart = processWaitMs('self');
}, Math.max(0, warmUntil - clock()));
const endCpu = setTimeout(() => {
  const used = process.cpuUsage(cpuAtStart);
  cpuMs = (used.user + used.system) / 1000;
  waitMs = processWaitMs('self') - waitAtStart;
}, Math.max(0, endAt - clock()));

const requester = async (index: number): Promise<void> => {
  const party = `t${index % config.parties}`;
  while (clock() < endAt) {
    const key = config.spread ? config.keys[Math.floor(Math.random() * config.keys.length)]! : config.keys[index % config.keys.length]!;
    let release: () => void;
    try {
      release = await acquire(key, party);
    } catch {
      break;
    }
    const start = clock();
    if (config.holdMs > 0) await sleep(config.holdMs);
    const end = clock();
    release();
    holds.push(start, end);
    if (start >= warmUntil && start < endAt) grants++;
  }
};
await Promise.all(Array.from({ length: config.requesters }, (_, i) => requester(i)));
clearTimeout(startCpu);
clearTimeout(endCpu);
// The result is on its way before the connections close and the channel goes.
await new Promise<void>((resolve) => (process.send === undefined ? resolve() : process.send({ type: 'result', pid: process.pid, holds, grants, cpuMs, waitMs, heard, refused } satisfies ScaleWorkerMessage, () => resolve())));
await close();
process.disconnect?.();
