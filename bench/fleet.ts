// The fleet bench: lanes shared by several processes through one Redis (127.0.0.1:6379), the
// RedisLaneStore beside redis-semaphore on the same load in the same run. Figures, not pass/fail:
//   F1 uncontended: one requester, a free lane; how long a grant takes.
//   F2 contended: 6 processes x 20 requesters on a lane of 8, each holding its permit 5 ms;
//      grants per second (the lane allows 1,600) and the wait for a permit, p50 and p99.
//   F3 fairness: a tenant with 2 requesters beside one with 100 (spread over 5 processes), a
//      lane of 8: the small tenant's share of the grants (round-robin gives it about a quarter).
//   F4 reclaim: a process takes every permit and is killed with SIGKILL; how long until a waiter
//      in another process gets one, against the lease.
// Each load runs in forked processes (bench/fleetWorker.ts), started together and told to go at once.
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { Semaphore } from 'redis-semaphore';
import { LaneTable, RedisLaneStore, type Permit } from '../lib/lanes/index.js';
import type { FleetWorkerConfig, FleetWorkerMessage } from './fleetWorker.js';
import { deleteKeys, redisAnswers } from './redis.js';
import type { Row } from './row.js';

type Lanes = FleetWorkerConfig['lanes'];
const libraries: readonly Lanes[] = ['RedisLaneStore', 'redis-semaphore'];
const workerFile = fileURLToPath(new URL('./fleetWorker.js', import.meta.url));
const prefix = `agent-lanes-bench:${process.pid}:${randomBytes(3).toString('hex')}:`;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

interface Worker {
  readonly child: ChildProcess;
  readonly messages: FleetWorkerMessage[];
  next(type: FleetWorkerMessage['type']): Promise<FleetWorkerMessage>;
}

function start(config: FleetWorkerConfig): Worker {
  const child = fork(workerFile, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const messages: FleetWorkerMessage[] = [];
  const waiting: Array<{ type: string; resolve: (m: FleetWorkerMessage) => void }> = [];
  child.on('message', (raw) => {
    const message = raw as FleetWorkerMessage;
    messages.push(message);
    const at = waiting.findIndex((w) => w.type === message.type);
    if (at !== -1) waiting.splice(at, 1)[0]!.resolve(message);
  });
  return {
    child,
    messages,
    next: (type) => {
      const seen = messages.find((m) => m.type === type);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiting.push({ type, resolve });
        child.once('exit', (code) => reject(new Error(`a fleet bench worker exited (${code}) before it said ${type}`)));
      });
    },
  };
}

/** Runs one load: every worker started, then all told to go at once; their waits by party. */
async function load(configs: readonly FleetWorkerConfig[]): Promise<Record<string, number[]>> {
  const workers = configs.map(start);
  await Promise.all(workers.map((w) => w.next('ready')));
  for (const w of workers) w.child.send('go');
  const results = await Promise.all(workers.map((w) => w.next('result')));
  const waits: Record<string, number[]> = {};
  for (const result of results) {
    if (result.type !== 'result') continue;
    for (const [party, list] of Object.entries(result.waits)) (waits[party] ??= []).push(...list);
  }
  await Promise.all(workers.map((w) => new Promise((resolve) => (w.child.exitCode !== null ? resolve(undefined) : w.child.once('exit', resolve)))));
  return waits;
}

const base = { role: 'load' as const, prefix, limit: 8, leaseSeconds: 10, holdMs: 5, warmMs: 1000, measureMs: 4000 };

async function uncontended(row: (r: Row) => void): Promise<void> {
  const rounds = 3000;
  const node = createClient({ socket: { host: '127.0.0.1', port: 6379 } });
  node.on('error', () => undefined);
  await node.connect();
  const io = new Redis({ host: '127.0.0.1', port: 6379 });
  io.on('error', () => undefined);
  const timeGrants = async (acquire: () => Promise<() => void>): Promise<number[]> => {
    const times: number[] = [];
    for (let i = 0; i < rounds + 500; i++) {
      const asked = performance.now();
      const release = await acquire();
      if (i >= 500) times.push(performance.now() - asked);
      release();
    }
    return times;
  };
  for (const [name, client] of [['node-redis', node], ['ioredis', io]] as const) {
    const store = new RedisLaneStore({ client, prefix, leaseSeconds: 10 });
    const times = await timeGrants(
      () =>
        new Promise((resolve) => {
          const permit = store.enter(`tool:uncontended-${name}`, 8, () => resolve(() => permit.leave()));
        }),
    );
    await store.close();
    row({ workload: 'F1 uncontended grant', figure: `RedisLaneStore (${name}) p50`, value: percentile(times, 50), unit: 'ms', note: `${rounds} grants, one after another` });
    row({ workload: 'F1 uncontended grant', figure: `RedisLaneStore (${name}) p99`, value: percentile(times, 99), unit: 'ms' });
  }
  const times = await timeGrants(async () => {
    const semaphore = new Semaphore(io, `${prefix}uncontended`, 8, { lockTimeout: 10_000 });
    await semaphore.acquire();
    return () => void semaphore.release().catch(() => undefined);
  });
  row({ workload: 'F1 uncontended grant', figure: 'redis-semaphore (ioredis) p50', value: percentile(times, 50), unit: 'ms' });
  row({ workload: 'F1 uncontended grant', figure: 'redis-semaphore (ioredis) p99', value: percentile(times, 99), unit: 'ms' });
  await node.close();
  await io.quit();
}

async function contended(row: (r: Row) => void): Promise<void> {
  const ideal = (base.limit / base.holdMs) * 1000;
  const p99s: Record<string, number> = {};
  for (const lanes of libraries) {
    const key = `tool:contended-${lanes}`;
    const waits = (await load(Array.from({ length: 6 }, () => ({ ...base, lanes, key, requesters: { acme: 20 } })))).acme ?? [];
    const rate = waits.length / (base.measureMs / 1000);
    p99s[lanes] = percentile(waits, 99);
    const workload = 'F2 contended, 6 procs x 20, lane of 8';
    row({ workload, figure: `${lanes} grants/s`, value: rate, unit: 'grants/s', note: `${((100 * rate) / ideal).toFixed(0)} % of the ${ideal} the lane allows (8 permits held 5 ms)` });
    row({ workload, figure: `${lanes} wait p50`, value: percentile(waits, 50), unit: 'ms' });
    row({ workload, figure: `${lanes} wait p99`, value: p99s[lanes]!, unit: 'ms' });
  }
  row({
    workload: 'F2 contended, 6 procs x 20, lane of 8',
    figure: 'p99 wait: redis-semaphore / RedisLaneStore',
    value: p99s['redis-semaphore']! / p99s.RedisLaneStore!,
    unit: 'x',
    note: 'how many times longer the tail waits under redis-semaphore',
  });
}

// The same loops in one process on an in-process lane: the share the grant rule itself gives
// this load, for the fleet figures to be read against.
async function inProcessShare(): Promise<{ small: number; big: number }> {
  const table = new LaneTable();
  const counts = { small: 0, big: 0 };
  const warmUntil = performance.now() + base.warmMs;
  const endAt = warmUntil + base.measureMs;
  const requester = async (party: 'small' | 'big'): Promise<void> => {
    while (performance.now() < endAt) {
      const asked = performance.now();
      const permit = await new Promise<Permit>((resolve) => {
        const entered: Permit = table.enter('tenant-share', base.limit, () => queueMicrotask(() => resolve(entered)), party);
      });
      if (asked >= warmUntil && performance.now() <= endAt) counts[party]++;
      await sleep(base.holdMs);
      permit.leave();
    }
  };
  await Promise.all([...Array.from({ length: 2 }, () => requester('small')), ...Array.from({ length: 100 }, () => requester('big'))]);
  return counts;
}

async function fairness(row: (r: Row) => void): Promise<void> {
  const reference = await inProcessShare();
  row({
    workload: 'F3 2-requester tenant beside 100',
    figure: "in-process Lane small tenant's share",
    value: (100 * reference.small) / Math.max(1, reference.small + reference.big),
    unit: '%',
    note: 'the same loops in one process: what round-robin itself gives this load',
  });
  for (const lanes of libraries) {
    const key = `tenant-share-${lanes}`;
    // The small tenant's 2 requesters in one process, beside 20 of the big tenant's; 80 more in four others.
    const configs: FleetWorkerConfig[] = [
      { ...base, lanes, key, requesters: { small: 2, big: 20 } },
      ...Array.from({ length: 4 }, () => ({ ...base, lanes, key, requesters: { big: 20 } })),
    ];
    const waits = await load(configs);
    const small = waits.small?.length ?? 0;
    const big = waits.big?.length ?? 0;
    row({
      workload: 'F3 2-requester tenant beside 100',
      figure: `${lanes} small tenant's share`,
      value: (100 * small) / Math.max(1, small + big),
      unit: '%',
      note: lanes === 'RedisLaneStore' ? 'round-robin between tenants; 2/102 would be its share by head count' : 'no parties: served by who polls first',
    });
    row({ workload: 'F3 2-requester tenant beside 100', figure: `${lanes} small tenant wait p99`, value: percentile(waits.small ?? [], 99), unit: 'ms' });
  }
}

async function reclaim(row: (r: Row) => void): Promise<void> {
  const leaseSeconds = 2;
  const node = createClient({ socket: { host: '127.0.0.1', port: 6379 } });
  node.on('error', () => undefined);
  await node.connect();
  const io = new Redis({ host: '127.0.0.1', port: 6379 });
  io.on('error', () => undefined);
  for (const lanes of libraries) {
    const key = `tool:reclaim-${lanes}`;
    const victim = start({ ...base, lanes, key, role: 'victim', leaseSeconds, requesters: {} });
    await victim.next('ready');
    victim.child.send('go');
    await victim.next('held');
    // Let the victim's leases be refreshed at least once, as a process that has held a while.
    await sleep(leaseSeconds * 700);
    let grantedAt = 0;
    let release: () => void = () => undefined;
    let store: RedisLaneStore | undefined;
    if (lanes === 'RedisLaneStore') {
      store = new RedisLaneStore({ client: node, prefix, leaseSeconds });
      const permit = store.enter(key, base.limit, () => (grantedAt = performance.now()));
      release = () => permit.leave();
    } else {
      const semaphore = new Semaphore(io, `${prefix}${key}`, base.limit, { lockTimeout: leaseSeconds * 1000, acquireTimeout: 60_000 });
      void semaphore.acquire().then(() => {
        grantedAt = performance.now();
        release = () => void semaphore.release().catch(() => undefined);
      });
    }
    await sleep(100);
    const killedAt = performance.now();
    victim.child.kill('SIGKILL');
    while (grantedAt === 0) await sleep(1);
    release();
    await store?.close();
    row({ workload: 'F4 reclaim after SIGKILL', figure: `${lanes}`, value: grantedAt - killedAt, unit: 'ms', note: `lease ${leaseSeconds * 1000} ms` });
  }
  await node.close();
  await io.quit();
}

/** The fleet workload: every figure above, or one row saying why there are none. */
export async function fleet(row: (r: Row) => void): Promise<void> {
  if (!(await redisAnswers())) {
    row({ workload: 'F fleet lanes', figure: 'skipped', value: 0, unit: '', note: 'no Redis answers on 127.0.0.1:6379 (start one: redis-server --save "" --appendonly no)' });
    return;
  }
  try {
    await uncontended(row);
    await contended(row);
    await fairness(row);
    await reclaim(row);
  } finally {
    // redis-semaphore puts its own prefix before the key.
    await deleteKeys([`${prefix}*`, `semaphore:${prefix}*`]);
  }
}
