// Hand-off and use: P processes x 20 requesters on one lane of 8, each holding its permit H ms,
// through RedisLaneStore, redis-semaphore and Bottleneck's clustering, on the bench's own Redis.
// For each: grants a second, the lane's use (hold time over 8 x wall time), the gap between a
// holder leaving and the next body starting (p50, p99; and across processes), the CPU of each
// process and of Redis beside it, and Redis's CPU and scripts per grant.
import type { Row } from '../row.js';
import { percentile, runLoad, type LoadResult } from './load.js';
import type { BenchRedis } from './servers.js';
import type { ScaleWorkerConfig } from './worker.js';

export type Library = ScaleWorkerConfig['lanes'];

/** A load's figures, its hand-off gaps summed up (p50, p99; all, and across processes). */
export type HandOffFigures = Omit<LoadResult, 'gaps' | 'crossGaps'> & { readonly gap: [number, number]; readonly crossGap: [number, number] };

export interface HandOffPoint {
  readonly lanes: Library;
  readonly processes: number;
  readonly holdMs: number;
  readonly result: HandOffFigures;
}

const LIMIT = 8;
const REQUESTERS = 20;

/** The loads: every library at every (processes, hold) given. */
export async function handOff(
  row: (r: Row) => void,
  redis: BenchRedis,
  prefix: string,
  plan: ReadonlyArray<{ lanes: Library; processes: number; holdMs: number }>,
  timing: { warmMs: number; measureMs: number },
): Promise<HandOffPoint[]> {
  const points: HandOffPoint[] = [];
  let n = 0;
  for (const { lanes, processes, holdMs } of plan) {
    const key = `handoff-${++n}`;
    const config: ScaleWorkerConfig = {
      lanes,
      ports: [redis.port],
      prefix,
      keys: [key],
      spread: false,
      limit: LIMIT,
      holdMs,
      requesters: REQUESTERS,
      parties: 4,
      ...timing,
    };
    const workload = `FS1 hand-off, ${processes} procs x ${REQUESTERS}, lane of ${LIMIT}, ${holdMs} ms holds`;
    let result: LoadResult;
    try {
      result = await runLoad(Array.from({ length: processes }, () => config), [redis], true);
    } catch (error) {
      row({ workload, figure: `${lanes} failed`, value: 0, unit: '', note: String(error).slice(0, 200) });
      continue;
    }
    const { gaps, crossGaps, ...rest } = result;
    points.push({ lanes, processes, holdMs, result: { ...rest, gap: [percentile(gaps, 50), percentile(gaps, 99)], crossGap: [percentile(crossGaps, 50), percentile(crossGaps, 99)] } });
    const cpu = `procs ${Math.round(Math.min(...result.workerCpu))}-${Math.round(Math.max(...result.workerCpu))} % each, Redis ${Math.round(result.redisCpu[0]!)} %; waiting for a CPU: procs ${Math.round(Math.min(...result.workerWait))}-${Math.round(Math.max(...result.workerWait))} %, Redis ${Math.round(result.redisWait[0]!)} % of the window; load ${result.load}`;
    const refused = result.refused > 0 ? `; ${result.refused} refused as an unknown client and asked again` : '';
    row({ workload, figure: `${lanes} use`, value: 100 * result.use, unit: '%', note: `${result.grantsPerSecond.toFixed(0)} grants/s of ${((LIMIT * 1000) / holdMs).toFixed(0)}; most at once ${result.most}${refused}` });
    row({ workload, figure: `${lanes} hand-off p50`, value: percentile(result.gaps, 50), unit: 'ms', note: `across processes ${percentile(result.crossGaps, 50).toFixed(2)} ms` });
    row({ workload, figure: `${lanes} hand-off p99`, value: percentile(result.gaps, 99), unit: 'ms', note: `across processes ${percentile(result.crossGaps, 99).toFixed(2)} ms` });
    const wakeUps = lanes.startsWith('RedisLaneStore') ? `, ${result.wakeUpsPerGrant.toFixed(2)} wake-ups heard` : '';
    row({ workload, figure: `${lanes} Redis CPU per grant`, value: result.redisUsPerGrant, unit: 'µs', note: `${result.scriptsPerGrant.toFixed(2)} scripts, ${result.commandsPerGrant.toFixed(1)} commands${wakeUps} per grant; ${cpu}` });
  }
  return points;
}
