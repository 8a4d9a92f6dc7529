// Runs one load of the fleet-scale bench: worker processes (worker.ts) started, told to go at one
// instant, their holds gathered; Redis's CPU and commands read at the window's two ends; and what
// the holds say: grants a second, the lane's use, the hand-off gap.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { commandDelta, processCpuMs, processWaitMs, type BenchRedis } from './servers.js';
import type { ScaleWorkerConfig, ScaleWorkerMessage } from './worker.js';

const workerFile = fileURLToPath(new URL('./worker.js', import.meta.url));
const clock = (): number => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export interface LoadResult {
  readonly grants: number;
  readonly grantsPerSecond: number;
  /** Sum of hold time inside the window over limit x window (one lane), 0..1. */
  readonly use: number;
  /** Hand-off gaps (ms): a holder leaving to the next body starting, all, and those across processes. */
  readonly gaps: number[];
  readonly crossGaps: number[];
  /** Most holds at once seen from the bodies (one lane). */
  readonly most: number;
  /** CPU busy of each worker process, and of each Redis, in the window (% of one core). */
  readonly workerCpu: number[];
  readonly redisCpu: number[];
  /** How long each worker process and each Redis waited, runnable, for a CPU in the window (% of it). */
  readonly workerWait: number[];
  readonly redisWait: number[];
  /** Redis CPU time per grant (µs), scripts and all commands per grant. */
  readonly redisUsPerGrant: number;
  readonly scriptsPerGrant: number;
  readonly commandsPerGrant: number;
  /** Wake-up messages heard by the processes, per grant (RedisLaneStore; the whole run). */
  readonly wakeUpsPerGrant: number;
  /** Requests refused and asked again (Bottleneck). */
  readonly refused: number;
  readonly load: string;
}

function start(config: ScaleWorkerConfig): { child: ChildProcess; ready: Promise<void>; result: Promise<Extract<ScaleWorkerMessage, { type: 'result' }>> } {
  const child = fork(workerFile, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let readied: () => void = () => undefined;
  let resulted: (m: Extract<ScaleWorkerMessage, { type: 'result' }>) => void = () => undefined;
  let failed: (e: Error) => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    readied = resolve;
    failed = reject;
  });
  const result = new Promise<Extract<ScaleWorkerMessage, { type: 'result' }>>((resolve, reject) => {
    resulted = resolve;
    const fail = failed;
    failed = (e) => {
      fail(e);
      reject(e);
    };
  });
  result.catch(() => undefined);
  child.on('message', (raw) => {
    const message = raw as ScaleWorkerMessage;
    if (message.type === 'ready') readied();
    else resulted(message);
  });
  // 'close', not 'exit': a message the worker sent just before it exited may still be on its way at 'exit'.
  child.once('close', (code) => failed(new Error(`a fleet-scale worker (${config.lanes}, ${config.requesters} callers) exited (${code}) before it was done`)));
  return { child, ready, result };
}

/**
 * Runs `configs` (one per process) together on `servers` (one Redis, or a Cluster's shards).
 * `oneLane`: the loads share one lane of `limit`, and the holds give its use and hand-offs.
 */
export async function runLoad(configs: readonly ScaleWorkerConfig[], servers: readonly BenchRedis[], oneLane: boolean): Promise<LoadResult> {
  const { warmMs, measureMs, limit } = configs[0]!;
  const workers = configs.map(start);
  try {
    await Promise.all(workers.map((w) => w.ready));
    const t0 = clock() + 50;
    for (const w of workers) w.child.send(t0);
    const w0 = t0 + warmMs;
    const w1 = w0 + measureMs;
    await sleep(Math.max(0, w0 - clock()));
    const before = await Promise.all(servers.map(async (s) => ({ cpu: await s.cpuMs(), commands: await s.commands(), os: processCpuMs(s.pid), wait: processWaitMs(s.pid) })));
    const load = (await import('./servers.js')).loadText();
    await sleep(Math.max(0, w1 - clock()));
    const after = await Promise.all(servers.map(async (s) => ({ cpu: await s.cpuMs(), commands: await s.commands(), os: processCpuMs(s.pid), wait: processWaitMs(s.pid) })));
    // A load whose processes have not all answered 60 s after its window is given up.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('a worker gave no result within 60 s of the window\'s end')), 60_000);
    });
    const results = await Promise.race([Promise.all(workers.map((w) => w.result)), late]).finally(() => clearTimeout(timer));
    await Promise.all(workers.map((w) => (w.child.exitCode !== null ? undefined : new Promise((resolve) => w.child.once('exit', resolve)))));

    const grants = results.reduce((sum, r) => sum + r.grants, 0);
    let scripts = 0;
    let commands = 0;
    for (let i = 0; i < servers.length; i++) {
      const delta = commandDelta(before[i]!.commands, after[i]!.commands);
      for (const [name, d] of delta.byCommand) {
        if (/^eval/.test(name)) scripts += d.calls;
      }
      commands += delta.calls;
    }
    const redisCpuMs = after.reduce((sum, a, i) => sum + (a.cpu - before[i]!.cpu), 0);
    const out = {
      grants,
      grantsPerSecond: grants / (measureMs / 1000),
      workerCpu: results.map((r) => (100 * r.cpuMs) / measureMs),
      redisCpu: after.map((a, i) => (100 * (a.cpu - before[i]!.cpu)) / measureMs),
      workerWait: results.map((r) => (100 * r.waitMs) / measureMs),
      redisWait: after.map((a, i) => (100 * (a.wait - before[i]!.wait)) / measureMs),
      redisUsPerGrant: (1000 * redisCpuMs) / Math.max(1, grants),
      scriptsPerGrant: scripts / Math.max(1, grants),
      commandsPerGrant: commands / Math.max(1, grants),
      wakeUpsPerGrant: results.reduce((sum, r) => sum + r.heard, 0) / Math.max(1, results.reduce((sum, r) => sum + r.holds.length / 2, 0)),
      refused: results.reduce((sum, r) => sum + r.refused, 0),
      load,
    };
    if (!oneLane) return { ...out, use: NaN, gaps: [], crossGaps: [], most: NaN };
    return { ...out, ...handOffs(results, limit, w0, w1) };
  } finally {
    for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  }
}

/**
 * What the holds of one lane say. Use: hold time inside [w0, w1] over limit x window. Hand-off:
 * with the lane full and callers waiting, the k-th holder to leave frees the permit the
 * (limit + k)-th body to start takes (both in time order, the whole run from go): the gap
 * between the two is a permit idle. A start before its release would be limit + 1 bodies at once.
 */
function handOffs(results: ReadonlyArray<Extract<ScaleWorkerMessage, { type: 'result' }>>, limit: number, w0: number, w1: number): { use: number; gaps: number[]; crossGaps: number[]; most: number } {
  const starts: Array<[number, number]> = [];
  const ends: Array<[number, number]> = [];
  let held = 0;
  for (const r of results) {
    for (let i = 0; i < r.holds.length; i += 2) {
      const s = r.holds[i]!;
      const e = r.holds[i + 1]!;
      starts.push([s, r.pid]);
      ends.push([e, r.pid]);
      held += Math.max(0, Math.min(e, w1) - Math.max(s, w0));
    }
  }
  starts.sort((a, b) => a[0] - b[0]);
  ends.sort((a, b) => a[0] - b[0]);
  const gaps: number[] = [];
  const crossGaps: number[] = [];
  for (let k = 0; k + limit < starts.length && k < ends.length; k++) {
    const [s, startPid] = starts[k + limit]!;
    const [e, endPid] = ends[k]!;
    if (s < w0 || s >= w1) continue;
    gaps.push(s - e);
    if (startPid !== endPid) crossGaps.push(s - e);
  }
  // The most bodies at once, from the bodies' own times.
  const events = [...starts.map(([t]) => [t, 1] as const), ...ends.map(([t]) => [t, -1] as const)].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, d] of events) {
    now += d;
    most = Math.max(most, now);
  }
  return { use: held / (limit * (w1 - w0)), gaps, crossGaps, most };
}
