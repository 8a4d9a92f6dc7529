// Growth: what one grant costs Redis as a lane's queue, its tenants and the lanes in use grow,
// read from Redis's own SLOWLOG (every command logged, with the microseconds it ran; a script's
// inner commands run inside it) on the bench's own redis-server. Large queues are written into
// Redis directly, entry for entry as the acquire script writes them (100,000 scripts would take
// longer than the figure is worth); the grants and queueing measured on them run the store's
// own scripts. Also: Redis memory per waiting call and per idle lane, the subscriber connections
// and channels of one process as its lanes grow (a real RedisLaneStore), and the time one script
// takes to sweep a killed process's permits, and its places, out of a lane with 100,000 waiters.
import { createClient } from 'redis';
import { RedisLaneStore } from '../../lib/lanes/index.js';
import { keysOf, laneBase } from '../../lib/lanes/redis/keys.js';
import { acquireScript, leaveScript, refreshScript, type Script } from '../../lib/lanes/redis/scripts.js';
import type { Row } from '../row.js';
import { percentile } from './load.js';
import { loadText, type BenchRedis, type Client } from './servers.js';

const LEASE = 3_600_000;
const pad = (n: number, width: number): string => String(n).padStart(width, '0');

export interface GrowthPoint {
  readonly size: number;
  /** Redis µs of the leave that grants the next waiter, and of the acquire that queues one: p50, p99. */
  readonly grantUs: [number, number];
  readonly queueUs: [number, number];
}

/** A lane written into Redis: its limit, holders, and waiters per party, as the scripts keep them. */
class LaneWriter {
  readonly keys: string[];
  readonly channel: string;
  private seq = 0;
  constructor(
    private readonly redis: Client,
    prefix: string,
    readonly key: string,
    readonly limit: number,
  ) {
    const base = laneBase(prefix, key);
    this.keys = keysOf(base);
    this.channel = `${base}:g`;
  }

  /** Holders `ids`, leases ending `leaseEnd` (Redis ms), and `waiters` [party, id, leaseEnd] in order. */
  async write(holders: readonly string[], leaseEnd: number, waiters: ReadonlyArray<readonly [string, string, number]>): Promise<void> {
    const [H, W, Q, P, R, M] = this.keys as [string, string, string, string, string, string];
    const multi = this.redis.multi();
    multi.hSet(M, { limit: String(this.limit), key: this.key });
    for (const id of holders) {
      multi.zAdd(H, { score: leaseEnd, value: id });
      multi.hSet(P, id, '#1');
    }
    const seen = new Set<string>();
    for (let i = 0; i < waiters.length; i++) {
      const [party, id, end] = waiters[i]!;
      const entry = `${pad(party.length, 8)}${party}${pad(++this.seq, 16)}${id}`;
      multi.zAdd(Q, { score: 0, value: entry });
      multi.hSet(P, id, entry);
      multi.zAdd(W, { score: end, value: id });
      if (!seen.has(party)) {
        seen.add(party);
        multi.zAdd(R, { score: ++this.seq, value: party });
      }
      if (i % 5000 === 4999) {
        multi.hSet(M, 'seq', String(this.seq));
        await multi.execAsPipeline();
        return this.write([], leaseEnd, waiters.slice(i + 1));
      }
    }
    multi.hSet(M, 'seq', String(this.seq));
    await multi.execAsPipeline();
  }
}

let requests = 0;
const requestArgs = (): [string, string] => [`bench:${process.pid}:${++requests}`, '4000'];

function run(redis: Client, script: Script, keys: readonly string[], args: readonly string[]): Promise<unknown> {
  return redis.evalSha(script.sha1, { keys: keys as string[], arguments: args as string[] }).catch((error: unknown) => {
    if (!/NOSCRIPT/.test(String(error))) throw error;
    return redis.eval(script.source, { keys: keys as string[], arguments: args as string[] });
  });
}

/** Every command's microseconds since the last reset, by the sha1 it ran (EVALSHA), from SLOWLOG. */
async function slowlog(redis: Client): Promise<Map<string, number[]>> {
  const entries = (await redis.sendCommand(['SLOWLOG', 'GET', '-1'])) as Array<[number, number, number, string[]]>;
  const out = new Map<string, number[]>();
  for (const entry of entries) {
    const [, , usec, args] = entry;
    if (String(args[0]).toLowerCase() !== 'evalsha') continue;
    const sha = String(args[1]);
    let list = out.get(sha);
    if (list === undefined) out.set(sha, (list = []));
    list.push(Number(usec));
  }
  return out;
}

async function redisNow(redis: Client): Promise<number> {
  const [s, us] = (await redis.sendCommand(['TIME'])) as [string, string];
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/**
 * `rounds` grants on lanes `lanes` (each a LaneWriter whose holders are `holder-<lane>-*`): each
 * round a holder leaves (its permit goes to the next waiter) and a new call queues in its place,
 * so the queue keeps its length. Redis's µs for each, p50 and p99.
 */
async function grantRounds(redis: Client, lanes: readonly LaneWriter[], holdersOf: string[][], rounds: number, partyOf: (round: number) => string): Promise<Pick<GrowthPoint, 'grantUs' | 'queueUs'>> {
  await redis.sendCommand(['SLOWLOG', 'RESET']);
  for (let round = 0; round < rounds; round++) {
    const at = round % lanes.length;
    const lane = lanes[at]!;
    const holders = holdersOf[at]!;
    const leaving = holders.shift()!;
    const answer = (await run(redis, leaveScript, lane.keys, [...requestArgs(), leaving, lane.channel, '1'])) as string[];
    // The waiter granted now holds: it leaves in a later round.
    for (let i = 3; i < 3 + Number(answer[2]); i += 2) holders.push(String(answer[i]));
    const id = `new-${round}`;
    await run(redis, acquireScript, lane.keys, [...requestArgs(), id, partyOf(round), String(lane.limit), String(LEASE), lane.channel, '1', lane.key]);
  }
  const log = await slowlog(redis);
  const leave = log.get(leaveScript.sha1) ?? [];
  const acquire = log.get(acquireScript.sha1) ?? [];
  return { grantUs: [percentile(leave, 50), percentile(leave, 99)], queueUs: [percentile(acquire, 50), percentile(acquire, 99)] };
}

/** A lane of `limit` with `waiters` waiting, dealt to `tenants` tenants in turn, written directly. */
async function filledLane(redis: Client, prefix: string, key: string, limit: number, waiters: number, tenants: number): Promise<{ lane: LaneWriter; holders: string[] }> {
  const lane = new LaneWriter(redis, prefix, key, limit);
  const now = await redisNow(redis);
  const holders = Array.from({ length: limit }, (_, i) => `holder-${key}-${i}`);
  const list: Array<[string, string, number]> = [];
  for (let i = 0; i < waiters; i++) list.push([`t${i % tenants}`, `w-${key}-${i}`, now + LEASE]);
  await lane.write(holders, now + LEASE, list);
  return { lane, holders };
}

export interface GrowthFigures {
  queue: GrowthPoint[];
  tenants: GrowthPoint[];
  lanes: GrowthPoint[];
  /** Redis µs of one lane's refresh (a heartbeat's script), by lanes in use. */
  refreshUs: Array<[number, number]>;
  memoryPerWaiter: number;
  memoryPerIdleLane: number;
  subscriptions: Array<{ lanes: number; connections: number; channels: number }>;
  sweep: Array<{ what: string; us: number }>;
}

export async function growth(row: (r: Row) => void, server: BenchRedis, prefix: string, largest: number): Promise<GrowthFigures> {
  const redis = server.client!;
  await redis.sendCommand(['CONFIG', 'SET', 'slowlog-log-slower-than', '0']);
  await redis.sendCommand(['CONFIG', 'SET', 'slowlog-max-len', '100000']);
  const rounds = 400;
  const figures: GrowthFigures = { queue: [], tenants: [], lanes: [], refreshUs: [], memoryPerWaiter: 0, memoryPerIdleLane: 0, subscriptions: [], sweep: [] };
  const sizes = (top: number, from: number): number[] => {
    const out: number[] = [];
    for (let n = from; n <= top; n *= 10) out.push(n);
    if (out[out.length - 1] !== top) out.push(top);
    return out;
  };
  const load = loadText();

  // Calls queued on one lane (4 tenants), 10 -> largest.
  for (const size of sizes(largest, 10)) {
    const { lane, holders } = await filledLane(redis, prefix, `queue-${size}`, 8, size, 4);
    const point = { size, ...(await grantRounds(redis, [lane], [holders], rounds, (r) => `t${r % 4}`)) };
    figures.queue.push(point);
    await redis.del(lane.keys);
  }
  // Tenants waiting on one lane (one call each), 2 -> 10,000.
  for (const size of [2, 10, 100, 1000, 10_000]) {
    const { lane, holders } = await filledLane(redis, prefix, `tenants-${size}`, 8, size, size);
    figures.tenants.push({ size, ...(await grantRounds(redis, [lane], [holders], rounds, (r) => `t${r % size}`)) });
    await redis.del(lane.keys);
  }
  // Lanes in use (each a holder and two waiters), 1 -> 10,000: the grants go round the lanes.
  for (const size of [1, 10, 100, 1000, 10_000]) {
    const lanes: LaneWriter[] = [];
    const holdersOf: string[][] = [];
    for (let i = 0; i < size; i++) {
      const { lane, holders } = await filledLane(redis, prefix, `lanes-${size}-${i}`, 1, 2, 1);
      lanes.push(lane);
      holdersOf.push(holders);
    }
    // The rounds visit lanes in a random order, as calls would.
    const order = lanes.map((_, i) => i).sort(() => Math.random() - 0.5).slice(0, Math.min(size, rounds));
    figures.lanes.push({ size, ...(await grantRounds(redis, order.map((i) => lanes[i]!), order.map((i) => holdersOf[i]!), rounds, () => 't0')) });
    // A heartbeat's refresh of one lane (its holder and a waiter), on as many lanes.
    await redis.sendCommand(['SLOWLOG', 'RESET']);
    for (const i of order) {
      const lane = lanes[i]!;
      await run(redis, refreshScript, lane.keys, [...requestArgs(), String(LEASE), lane.channel, '1', ...holdersOf[i]!.slice(0, 1), `w-${lane.key}-1`]);
    }
    const refreshes = (await slowlog(redis)).get(refreshScript.sha1) ?? [];
    figures.refreshUs.push([size, percentile(refreshes, 50)]);
    for (const lane of lanes) await redis.del(lane.keys);
  }
  for (const [name, points, what] of [
    ['calls queued on one lane', figures.queue, 'calls'],
    ['tenants waiting on one lane', figures.tenants, 'tenants'],
    ['lanes in use', figures.lanes, 'lanes'],
  ] as const) {
    for (const p of points) {
      row({ workload: `FS2 growth: ${name}`, figure: `${p.size} ${what}: grant (leave script) p50`, value: p.grantUs[0], unit: 'µs', note: `p99 ${p.grantUs[1]} µs; queueing a call (acquire) p50 ${p.queueUs[0]}, p99 ${p.queueUs[1]} µs; load ${load}` });
    }
  }

  for (const [size, us] of figures.refreshUs) {
    row({ workload: 'FS2 growth: lanes in use', figure: `${size} lanes: one lane's refresh (heartbeat) p50`, value: us, unit: 'µs', note: 'a process sends one a lane it uses, every third of a lease' });
  }

  // Memory per waiting call, and per idle lane.
  const before = await server.usedMemory();
  const { lane: big } = await filledLane(redis, prefix, 'memory', 8, largest, 4);
  const after = await server.usedMemory();
  figures.memoryPerWaiter = (after - before) / largest;
  await redis.del(big.keys);
  row({ workload: 'FS2 memory', figure: 'Redis memory per waiting call', value: figures.memoryPerWaiter, unit: 'bytes', note: `${largest} waiters, 4 tenants, ids as a store makes them; used_memory before and after` });
  figures.memoryPerIdleLane = await idleLaneMemory(server, prefix);
  row({ workload: 'FS2 memory', figure: 'Redis memory per idle lane', value: figures.memoryPerIdleLane, unit: 'bytes', note: '1,000 lanes each asked once and left (the keys of an idle lane are deleted)' });

  figures.subscriptions = await subscriptions(row, server, prefix);
  figures.sweep = await sweep(row, redis, prefix, largest);
  await redis.sendCommand(['CONFIG', 'SET', 'slowlog-log-slower-than', '10000']);
  return figures;
}

// 1,000 lanes asked and left through a real store: what Redis keeps of them afterwards.
async function idleLaneMemory(server: BenchRedis, prefix: string): Promise<number> {
  const client = createClient({ socket: { host: '127.0.0.1', port: server.port } });
  client.on('error', () => undefined);
  await client.connect();
  const store = new RedisLaneStore({ client, prefix: `${prefix}idle:`, leaseSeconds: 10 });
  const before = await server.usedMemory();
  await Promise.all(
    Array.from({ length: 1000 }, (_, i) => new Promise<void>((resolve) => {
      const permit = store.enter(`idle-${i}`, 4, () => {
        permit.leave();
        resolve();
      });
    })),
  );
  await store.idle();
  const after = await server.usedMemory();
  await store.close();
  await client.close();
  return Math.max(0, after - before) / 1000;
}

// One process (a real store) with a holder and a waiter on each of N lanes: its connections to
// Redis and the channels it subscribes.
async function subscriptions(row: (r: Row) => void, server: BenchRedis, prefix: string): Promise<GrowthFigures['subscriptions']> {
  const out: GrowthFigures['subscriptions'] = [];
  for (const lanes of [1, 10, 100, 1000, 10_000]) {
    const baseClients = Number((await server.info('clients')).connected_clients);
    const client = createClient({ socket: { host: '127.0.0.1', port: server.port } });
    client.on('error', () => undefined);
    await client.connect();
    const store = new RedisLaneStore({ client, prefix: `${prefix}subs${lanes}:`, leaseSeconds: 30 });
    const permits = [];
    // 500 lanes at a time: 20,000 requests sent at once would outlast the store's timeout here.
    for (let i = 0; i < lanes; i++) {
      permits.push(store.enter(`lane-${i}`, 1, () => undefined), store.enter(`lane-${i}`, 1, () => undefined));
      if (i % 500 === 499) await store.idle();
    }
    await store.idle();
    const count = async (): Promise<number> =>
      ((await server.client!.sendCommand(['PUBSUB', 'SHARDCHANNELS', `${prefix}subs${lanes}:*`])) as string[]).length +
      ((await server.client!.sendCommand(['PUBSUB', 'CHANNELS', `${prefix}subs${lanes}:*`])) as string[]).length;
    // The subscriptions are asked for as the answers come, and confirmed after: counted once they stop growing.
    let channels = await count();
    for (let tries = 0; tries < 100 && channels < lanes; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      channels = await count();
    }
    const connections = Number((await server.info('clients')).connected_clients) - baseClients;
    out.push({ lanes, connections, channels });
    row({ workload: 'FS2 one process on many lanes', figure: `${lanes} lanes: connections to Redis`, value: connections, unit: '', note: `${channels} wake-up channels subscribed on one subscriber connection; its heartbeat sends ${lanes} refresh scripts (one a lane) every third of a lease` });
    for (const permit of permits) permit.leave();
    await store.close();
    await client.close();
  }
  return out;
}

// A lane of 8 with `largest` waiters whose 8 holders died (their leases over): one script sweeps
// them out and grants 8. Then the same with half the waiters the dead process's own.
async function sweep(row: (r: Row) => void, redis: Client, prefix: string, largest: number): Promise<GrowthFigures['sweep']> {
  const out: GrowthFigures['sweep'] = [];
  for (const deadShare of [0, 0.5]) {
    const lane = new LaneWriter(redis, prefix, `sweep-${deadShare}`, 8);
    const now = await redisNow(redis);
    const dead = Math.round(largest * deadShare);
    const list: Array<[string, string, number]> = [];
    for (let i = 0; i < largest; i++) list.push([`t${i % 4}`, `w-${i}`, i % 2 === 0 && i / 2 < dead ? now - 1 : now + LEASE]);
    await lane.write(Array.from({ length: 8 }, (_, i) => `dead-${i}`), now - 1, list);
    await redis.sendCommand(['SLOWLOG', 'RESET']);
    // The next change of the lane (here a new call queueing) reclaims what expired, and grants.
    const asked = performance.now();
    await run(redis, acquireScript, lane.keys, [...requestArgs(), 'late', 't0', '8', String(LEASE), lane.channel, '1', lane.key]);
    const took = performance.now() - asked;
    const us = (await slowlog(redis)).get(acquireScript.sha1)?.[0] ?? NaN;
    const what = deadShare === 0 ? `8 dead holders among ${largest} live waiters` : `8 dead holders and ${dead} dead waiters among ${largest}`;
    out.push({ what, us });
    row({ workload: 'FS2 sweep after SIGKILL (written directly)', figure: what, value: us / 1000, unit: 'ms', note: `one script; ${took.toFixed(1)} ms round trip; Redis serves nothing else meanwhile` });
    await redis.del(lane.keys);
  }
  return out;
}
