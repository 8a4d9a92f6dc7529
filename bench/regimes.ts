// The regimes a service meets, each measured in a process of its own (bench/index.ts starts
// one per workload): warm (up a while, nothing collected lately), after a full collection (two
// warm-up rounds, then gc() before each round), and freshly started (round 1, and the median
// of rounds 6-10, no warm-up, nothing forced). The workload is W3 as the peer harness runs it:
// 500 runs at once, each one turn of 4 calls sleeping 1 ms, every lane and a ceiling per call,
// a provider whose `respond` is async, arguments sent as JSON text and decoded by io-ts, and one
// runner for the whole process, as a service keeps it. Beside each regime, its floors in the
// same regime and process: the same 2,000 sleeps under one Promise.all (the workload's own
// timers, no runner), and the same 500 runs as bare RxJS (each run's 4 calls through
// `from`, `mergeMap` and `toArray`: what RxJS alone pays to subscribe a small pipeline per run);
// and, to show what the loop monitor costs, the runner with it off.
// W2 at N = 10,000 is measured as the harness does too: gc() before each run. The two regimes
// with collections are measured twice, each in a process of its own: as imported, and after the
// process called keepWarmShapes() (the shapes it keeps are what a collection would free).
import { performance } from 'node:perf_hooks';
import * as t from 'io-ts';
import { from, lastValueFrom, mergeMap, toArray } from 'rxjs';
import { Agent, AgentRunner, ConcurrencyConfig, keepWarmShapes, ToolRegistry, type ModelRequest, type ModelResponse } from '../lib/index.js';
import type { Row } from './row.js';

const RUNS = 500;
const CALLS = 4;
const BIG = 1_000_000;
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const m = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[m]! : (sorted[m - 1]! + sorted[m]!) / 2;
};
const timed = async (run: () => Promise<unknown>): Promise<number> => {
  const start = performance.now();
  await run();
  return performance.now() - start;
};

/** One run of `n` calls, as a service runs it: the turn asks for the calls, the next answers. */
function service(body: (i: number) => Promise<unknown>, loopStallMs?: false): (n: number) => Promise<void> {
  const provider = {
    async respond(request: ModelRequest): Promise<ModelResponse> {
      const { messages } = request;
      if (messages[messages.length - 1]!.role === 'tool') return { text: 'done' };
      const n = Number(messages[0]!.content);
      if (n === 0) return { text: 'done' };
      return { toolCalls: Array.from({ length: n }, (_, i) => ({ id: `call_${i}`, name: 'work', arguments: `{"i":${i}}` })) };
    },
  };
  const tools = new ToolRegistry().register({ name: 'work', description: 'bench tool', args: t.type({ i: t.number }) }, ({ i }) => body(i));
  const concurrency = new ConcurrencyConfig({ maxConcurrentTools: BIG, perTool: { work: BIG }, perTenant: BIG, perToolSeconds: { work: 60 } });
  const runner = new AgentRunner({ provider, tools, concurrency, ...(loopStallMs === false ? { loopStallMs } : {}) });
  const agent = new Agent({ name: 'bench', instructions: 'bench', model: 'scripted' });
  return async (n) => {
    const result = await runner.run(agent, String(n), { tenant: 'bench' });
    if (result.status !== 'completed' || result.output !== 'done') throw new Error(`bench run ended ${result.status}: ${result.error?.message ?? ''}`);
  };
}

// A W3 round of the runner, and of each floor.
const engineRound = (loopStallMs?: false): (() => Promise<unknown>) => {
  const run = service(async (i) => {
    await sleep(1);
    return `r${i}`;
  }, loopStallMs);
  return () => Promise.all(Array.from({ length: RUNS }, () => run(CALLS)));
};
const timerFloor = () => Promise.all(Array.from({ length: RUNS * CALLS }, () => sleep(1)));
const bareRun = () =>
  lastValueFrom(
    from(Array.from({ length: CALLS }, (_, i) => i)).pipe(
      mergeMap(async (i) => {
        await sleep(1);
        return `r${i}`;
      }),
      toArray(),
    ),
  );
const rxjsFloor = () => Promise.all(Array.from({ length: RUNS }, bareRun));

const rounds: ReadonlyArray<readonly [string, () => () => Promise<unknown>]> = [
  ['agent-lanes, every lane', () => engineRound()],
  ['floor: 2,000 sleeps, Promise.all', () => timerFloor],
  ['floor: 500 bare RxJS runs', () => rxjsFloor],
  // Not a floor: what the loop monitor (on by default, async hooks on every callback) costs.
  ['agent-lanes, loop monitor off', () => engineRound(false)],
];
const perSecond = (ms: number): number => (RUNS * CALLS) / (ms / 1000);

/** W3 warm: 12 untimed rounds, then the median of 5, nothing forced between them. */
export async function regimeWarm(row: (r: Row) => void): Promise<void> {
  for (const [figure, make] of rounds) {
    const round = make();
    for (let i = 0; i < 12; i++) await round();
    const times: number[] = [];
    for (let i = 0; i < 5; i++) times.push(await timed(round));
    row({ workload: 'Regime: W3 warm', figure, value: perSecond(median(times)), unit: 'calls/s', note: '12 warm-up rounds, median of 5' });
  }
}

/** W3 after a full collection: 2 untimed rounds, then gc() before each of 5 (median). */
export async function regimeAfterGc(row: (r: Row) => void, kept = ''): Promise<void> {
  for (const [figure, make] of rounds) {
    const round = make();
    for (let i = 0; i < 2; i++) await round();
    const times: number[] = [];
    // CPU time of the process per round too, which a machine loaded by other work disturbs less than wall time.
    const cpu: number[] = [];
    for (let i = 0; i < 5; i++) {
      gc();
      const before = process.cpuUsage();
      times.push(await timed(round));
      const { user, system } = process.cpuUsage(before);
      cpu.push((user + system) / 1000);
    }
    row({ workload: `Regime: W3 after a full collection${kept}`, figure, value: perSecond(median(times)), unit: 'calls/s', note: `2 warm-ups, gc() before each of 5 rounds, median; CPU ${median(cpu).toFixed(0)} ms a round` });
  }
}

/** W3 in a fresh process: rounds 1-10 back to back, nothing before them, nothing forced. */
async function coldRounds(row: (r: Row) => void, figure: string, make: () => () => Promise<unknown>): Promise<void> {
  const round = make();
  const times: number[] = [];
  for (let i = 0; i < 10; i++) times.push(await timed(round));
  row({ workload: 'Regime: W3 fresh process, round 1', figure, value: perSecond(times[0]!), unit: 'calls/s', note: 'includes compiling the code it runs' });
  row({ workload: 'Regime: W3 fresh process, rounds 6-10', figure, value: perSecond(median(times.slice(5))), unit: 'calls/s', note: 'median' });
}

// The runner and its floors each start cold in a process of their own.
export const regimeCold = (row: (r: Row) => void) => coldRounds(row, rounds[0]![0], rounds[0]![1]);
export const regimeColdTimerFloor = (row: (r: Row) => void) => coldRounds(row, rounds[1]![0], rounds[1]![1]);
export const regimeColdRxjsFloor = (row: (r: Row) => void) => coldRounds(row, rounds[2]![0], rounds[2]![1]);

/** W2 at N = 10,000 as the harness measures it: (run of N - run of 0) / N, gc() before each run of N. */
export async function regimeW2(row: (r: Row) => void, kept = ''): Promise<void> {
  const n = 10_000;
  const run = service(async () => 'ok');
  for (let i = 0; i < 20; i++) await run(0);
  for (let i = 0; i < 5; i++) await run(n);
  const empty: number[] = [];
  const full: number[] = [];
  for (let k = 0; k < 9; k++) {
    for (let j = 0; j < 5; j++) empty.push(await timed(() => run(0)));
    gc();
    full.push(await timed(() => run(n)));
  }
  const zero = median(empty);
  row({ workload: `Regime: W2 N=10,000, gc() before each${kept}`, figure: 'agent-lanes, every lane', value: median(full.map((ms) => ((ms - zero) / n) * 1000)), unit: 'us/call', note: `a run of 0 calls: ${(zero * 1000).toFixed(0)} us` });
  // The floor in the same regime: the same N bodies through one bare mergeMap, collected.
  const bare = () => lastValueFrom(from(Array.from({ length: n }, (_, i) => i)).pipe(mergeMap(async () => 'ok'), toArray()));
  for (let i = 0; i < 5; i++) await bare();
  const floor: number[] = [];
  for (let k = 0; k < 9; k++) {
    gc();
    floor.push(await timed(bare));
  }
  row({ workload: `Regime: W2 N=10,000, gc() before each${kept}`, figure: 'floor: bare mergeMap', value: (median(floor) / n) * 1000, unit: 'us/call' });
}

// The same two regimes in a process that asked for the kept shapes first (lib/shapes.ts).
const keptLabel = ', keepWarmShapes()';
export async function regimeAfterGcKept(row: (r: Row) => void): Promise<void> {
  keepWarmShapes();
  await regimeAfterGc(row, keptLabel);
}
export async function regimeW2Kept(row: (r: Row) => void): Promise<void> {
  keepWarmShapes();
  await regimeW2(row, keptLabel);
}
