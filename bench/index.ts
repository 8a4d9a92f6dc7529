// Benchmarks: figures, not pass/fail. Each workload runs through a real AgentRunner with
// a scripted model, side by side with floors (plain Promise.all, p-limit, a bare RxJS
// mergeMap) measured in the same process. `npm run bench` compiles the library and this
// file with tsc (so the figures are those of the built library, not of a dev loader) and
// prints a table; `-- --json`
// prints the same figures as JSON. Run with `node --expose-gc` (the script does) so heap
// figures are taken after a collection.
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { trace, type Tracer } from '@opentelemetry/api';
import { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import pLimit from 'p-limit';
import { concat, from, ignoreElements, lastValueFrom, map, mergeMap, timer, toArray, type Observable } from 'rxjs';
import * as t from 'io-ts';
import { aiSdkProvider } from '../lib/providers/aiSdkProvider.js';
import * as regimes from './regimes.js';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  LaneTable,
  runBatch,
  ScriptedProvider,
  ToolRegistry,
  type BatchCall,
  type ModelRequest,
  type ModelResponse,
  type ModelStreamPart,
  type RunnerActivity,
} from '../lib/index.js';
import type { Row } from './row.js';

/** What a workload's runner is made with, besides its provider and tools. */
type Knobs = { concurrency?: ConcurrencyConfig; loopStallMs?: number | false; tracer?: Tracer; afterRun?: () => void };

const json = process.argv.includes('--json');
const quick = process.argv.includes('--quick');
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
const agent = new Agent({ name: 'bench', instructions: '', model: 'scripted' });
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const turnOf = (n: number, tool = 'work'): ModelResponse => ({
  toolCalls: Array.from({ length: n }, (_, i) => ({ id: `c${i}`, name: tool, arguments: {} })),
});

/** A body, or a floor's task, that answers at once. */
const immediate = () => Promise.resolve(1);

/** The bare RxJS floor: N tasks that answer at once, through one mergeMap, collected. */
function bareMergeMap(n: number): Promise<unknown> {
  return lastValueFrom(from(Array.from({ length: n }, (_, i) => i)).pipe(mergeMap(() => immediate()), toArray()));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function timed(run: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await run();
  return performance.now() - start;
}

/**
 * The median of `repeats` timings, after `warmUps` (two) untimed runs. No forced GC between them: a forced
 * collection shrinks the young generation, and the next run then pays for regrowing it,
 * which a process that serves runs all day does not.
 */
async function best(repeats: number, run: () => Promise<unknown>, warmUps = 2): Promise<number> {
  for (let i = 0; i < warmUps; i++) await run();
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) times.push(await timed(run));
  return median(times);
}

function runnerFor(turn: ModelResponse, body: () => unknown, options: Knobs = {}) {
  const tools = new ToolRegistry().register({ name: 'work' }, body);
  const { afterRun: _afterRun, ...knobs } = options;
  return new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, ...knobs });
}

/** Runs `agent` on `runner` to its end; a run that does not complete spoils the figure, so it throws. */
async function runToEnd(runner: AgentRunner): Promise<void> {
  const result = await runner.run(agent, 'go');
  if (result.status !== 'completed') throw new Error(`bench run ended ${result.status}: ${result.error?.message}`);
}

async function oneTurn(n: number, body: () => unknown, options: Knobs = {}) {
  await runToEnd(runnerFor(turnOf(n), body, options));
  options.afterRun?.();
}

// Lanes, per-call ceilings, the reorder and the transcript all active.
const everything = new ConcurrencyConfig({ maxConcurrentTools: 1_000_000, perTool: { work: 1_000_000 }, perTenant: 1_000_000, perToolSeconds: { work: 60 } });

const rows: Row[] = [];
const row = (r: Row) => {
  rows.push(r);
};
// Ratios near 1 (W1) get three decimals: the runner and its floor differ in the second and third.
const digits = (r: Row) => (r.unit === 'x' && r.value < 2 ? 3 : r.value < 10 ? 2 : 1);
const print = (r: Row) =>
  console.log(`${r.workload.padEnd(36)} ${r.figure.padEnd(30)} ${r.value.toFixed(digits(r)).padStart(10)} ${r.unit.padEnd(8)} ${r.note ?? ''}`);

// A service that has been up a while has its engine compiled: the latency workloads are
// measured after this many calls have gone through it (cold starts are W3's first round).
const WARM_CALLS = 20_000;

/** Repeats `run` (a round of `calls` calls) until about WARM_CALLS calls went through, twice at least. */
async function warmUp(run: () => Promise<unknown>, calls: number): Promise<void> {
  const rounds = Math.max(2, Math.ceil(WARM_CALLS / Math.max(calls, 1)));
  for (let i = 0; i < rounds; i++) await run();
}

/** Warms the engine with turns of `n` calls answering at once. */
function warmEngine(n: number, options: Knobs = {}): Promise<void> {
  return warmUp(() => oneTurn(n, immediate, options), n);
}

async function w1(): Promise<void> {
  for (const n of [4, 16, 64]) {
    await warmEngine(n, { concurrency: everything });
    // The floor: the same sleeps under a plain Promise.all, so timer lateness is not charged to
    // the runner. Floor and run alternate, so both meet the machine in the same state (its
    // timers run later on some days than others). The run alone is timed: its runner (and the
    // scripted model it needs) is made before the clock starts, as a service makes its runner
    // once and runs on it.
    const floors: number[] = [];
    const walls: number[] = [];
    const over: number[] = [];
    for (let i = 0; i < 2 + 7; i++) {
      const floor = await timed(() => Promise.all(Array.from({ length: n }, () => sleep(50))));
      const runner = runnerFor(turnOf(n), () => sleep(50), { concurrency: everything });
      const wall = await timed(() => runToEnd(runner));
      if (i < 2) continue;
      floors.push(floor);
      walls.push(wall);
      over.push(wall - floor);
    }
    row({ workload: `W1 floor, N=${n}, 50ms each`, figure: 'Promise.all wall / one call', value: median(floors) / 50, unit: 'x' });
    row({ workload: `W1 fan-out, N=${n}, 50ms each`, figure: 'wall / one call', value: median(walls) / 50, unit: 'x', note: 'ideal 1.0' });
    row({ workload: `W1 fan-out, N=${n}, 50ms each`, figure: 'over the floor beside it', value: median(over) / 50, unit: 'x', note: 'median of (run - floor) / 50 ms' });
  }
  await afterIdle(64);
}

// What W1's 50 ms of idle costs on this machine. The engine's own work in a W1 run is the same
// run with bodies that answer at once; it is timed back to back, and after 50 ms asleep, the
// way W1's run does its second half (the calls settling, the next turn) after its bodies' sleep. Beside it, the machine alone: every cache line of 1 MiB
// read and written, back to back and after the same sleep, which shows how much colder the
// machine's caches are after 50 ms asleep, with no engine involved.
async function afterIdle(n: number): Promise<void> {
  const rounds = 15;
  // Each timing gets its work ready before the clock starts: a run gets a runner of its own, made
  // beforehand as in W1.
  const engine = () => {
    const runner = runnerFor(turnOf(n), immediate, { concurrency: everything });
    return () => runToEnd(runner);
  };
  const memory = new Uint8Array(1 << 20);
  const touch = async () => {
    for (let i = 0; i < memory.length; i += 64) memory[i] = (memory[i]! + 1) & 255;
  };
  const pair = async (ready: () => () => Promise<unknown>): Promise<{ warm: number; idle: number }> => {
    const warm: number[] = [];
    const idle: number[] = [];
    for (let i = 0; i < rounds; i++) {
      await ready()();
      warm.push(await timed(ready()));
      const next = ready();
      await sleep(50);
      idle.push(await timed(next));
    }
    return { warm: median(warm), idle: median(idle) };
  };
  const run = await pair(engine);
  const touched = await pair(() => touch);
  row({ workload: `W1 engine alone, N=${n}`, figure: 'bodies at once, back to back', value: run.warm / 50, unit: 'x', note: `${(run.warm * 1000).toFixed(0)} us: what W1 adds on a machine that stays warm` });
  row({ workload: `W1 engine alone, N=${n}`, figure: 'the same after 50 ms asleep', value: run.idle / 50, unit: 'x', note: `${(run.idle * 1000).toFixed(0)} us, ${(run.idle / run.warm).toFixed(1)}x back to back` });
  row({ workload: 'W1 machine alone', figure: '1 MiB touched after 50 ms asleep', value: touched.idle / touched.warm, unit: 'x', note: `${(touched.idle * 1000).toFixed(0)} us, against ${(touched.warm * 1000).toFixed(0)} us back to back` });
}

async function perCall(n: number, options: Knobs, body: () => unknown): Promise<number> {
  const repeats = n >= 100_000 ? 3 : 5;
  await warmEngine(n, options);
  const withCalls = await best(repeats, () => oneTurn(n, body, options));
  const empty = await best(repeats, () => oneTurn(0, body, options));
  return ((withCalls - empty) * 1000) / n;
}

async function floors(n: number): Promise<void> {
  const all = await best(5, () => Promise.all(Array.from({ length: n }, immediate)));
  row({ workload: `W2 floor, N=${n}`, figure: 'Promise.all per call', value: (all * 1000) / n, unit: 'us' });
  const limit = pLimit(n);
  const limited = await best(5, () => Promise.all(Array.from({ length: n }, () => limit(immediate))));
  row({ workload: `W2 floor, N=${n}`, figure: 'p-limit per call', value: (limited * 1000) / n, unit: 'us' });
  const merged = await best(5, () => bareMergeMap(n));
  row({ workload: `W2 floor, N=${n}`, figure: 'bare mergeMap per call', value: (merged * 1000) / n, unit: 'us' });
}

/**
 * Bytes a 4-call batch allocates, all lanes, bodies that answer at once: runBatch on its own,
 * subscribed and run to its end synchronously, 300 at a time between two readings of the heap,
 * in rounds where no collection ran (a collection would hide what it freed). The calls' own
 * objects, measured alone the same way, are taken off.
 */
async function allocationPerBatch(): Promise<number> {
  const shared = { lanes: new LaneTable(), concurrency: everything };
  const callsOf = (): BatchCall[] => [0, 1, 2, 3].map((i) => ({ callId: `c${i}`, tool: 'work', invoke: () => i }));
  const batch = (): void => {
    let outcomes = 0;
    runBatch(callsOf(), { concurrency: everything, shared }).subscribe(() => outcomes++);
    if (outcomes !== 4) throw new Error(`bench batch gave ${outcomes} outcomes`);
  };
  for (let i = 0; i < WARM_CALLS; i++) batch();
  const bytesPer = async (work: () => unknown): Promise<number> => {
    const samples: number[] = [];
    for (let round = 0; round < 9; round++) {
      gc();
      let collections = 0;
      const observer = new PerformanceObserver((list) => (collections += list.getEntries().length));
      observer.observe({ entryTypes: ['gc'] });
      const before = process.memoryUsage().heapUsed;
      for (let i = 0; i < 300; i++) work();
      const after = process.memoryUsage().heapUsed;
      // The observer hears of a collection a moment after it.
      await sleep(5);
      observer.disconnect();
      if (collections === 0) samples.push((after - before) / 300);
    }
    if (samples.length === 0) throw new Error('bench: every allocation round had a collection');
    return median(samples);
  };
  return (await bytesPer(batch)) - (await bytesPer(callsOf));
}

async function w2(): Promise<void> {
  row({ workload: 'W2 allocation, 4 calls, all lanes', figure: 'bytes allocated per batch', value: await allocationPerBatch(), unit: 'bytes', note: 'runBatch alone, bodies answering at once; the calls themselves not counted' });
  for (const n of [1_000, 10_000]) {
    await floors(n);
    const sync = await perCall(n, { concurrency: everything }, () => 1);
    row({ workload: `W2 per-call overhead, N=${n}`, figure: 'all lanes, body returns value', value: sync, unit: 'us/call' });
    const promised = await perCall(n, { concurrency: everything }, immediate);
    row({ workload: `W2 per-call overhead, N=${n}`, figure: 'all lanes, body resolves', value: promised, unit: 'us/call' });
    const unmonitored = await perCall(n, { concurrency: everything, loopStallMs: false }, immediate);
    row({ workload: `W2 per-call overhead, N=${n}`, figure: 'same, loop monitor off', value: unmonitored, unit: 'us/call' });
  }
}

// What tracing costs a call, at N = 10,000 in one turn, all lanes, bodies that resolve: no tracer
// (one undefined check), the API's no-op tracer (the activity and the span bookkeeping alone), and
// sdk-trace-base recording every span: with no processor (spans made and ended, sent nowhere),
// into an in-memory exporter through a SimpleSpanProcessor (each span exported as it ends), and
// through a BatchSpanProcessor as a service runs it (its queue sized for the turn). The exporter is
// emptied after each run, as one sending the spans away would be.
async function tracing(): Promise<void> {
  const n = 10_000;
  const workload = `Tracing per call, N=${n}`;
  const none = await perCall(n, { concurrency: everything }, immediate);
  row({ workload, figure: 'no tracer', value: none, unit: 'us/call' });
  const ratio = (value: number): string => `${(value / none).toFixed(2)}x no tracer`;
  const noop = await perCall(n, { concurrency: everything, tracer: trace.getTracer('bench') }, immediate);
  row({ workload, figure: 'no-op tracer', value: noop, unit: 'us/call', note: ratio(noop) });
  const bare = await perCall(n, { concurrency: everything, tracer: new BasicTracerProvider().getTracer('bench') }, immediate);
  row({ workload, figure: 'recording tracer, no processor', value: bare, unit: 'us/call', note: ratio(bare) });
  const exporter = new InMemorySpanExporter();
  const afterRun = (): void => exporter.reset();
  const simple = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('bench');
  const simply = await perCall(n, { concurrency: everything, tracer: simple, afterRun }, immediate);
  row({ workload, figure: 'recording tracer, SimpleSpanProcessor + in-memory exporter', value: simply, unit: 'us/call', note: ratio(simply) });
  const batching = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: 4 * n, maxExportBatchSize: 512 })] }).getTracer('bench');
  const batched = await perCall(n, { concurrency: everything, tracer: batching, afterRun }, immediate);
  row({ workload, figure: 'recording tracer, BatchSpanProcessor + in-memory exporter', value: batched, unit: 'us/call', note: ratio(batched) });
  // The floor beside them: what the SDK alone takes to make, fill and end one span like a call's
  // (a run of N calls makes N execute_tool spans and a handful more), with no runner at all.
  const floorOf = (tracer: Tracer): number => spanFloor(n, tracer, afterRun);
  const floors: ReadonlyArray<readonly [string, number]> = [
    ['no processor', floorOf(new BasicTracerProvider().getTracer('floor'))],
    ['SimpleSpanProcessor', floorOf(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('floor'))],
    ['BatchSpanProcessor', floorOf(new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: 4 * n, maxExportBatchSize: 512 })] }).getTracer('floor'))],
  ];
  for (const [processor, value] of floors) {
    row({ workload, figure: `floor: the SDK alone, one span per call, ${processor}`, value, unit: 'us/call', note: `${(value / none).toFixed(2)}x the untraced call` });
  }
}

// The best of five rounds of `n` spans made, given a call's attributes, and ended; per span.
function spanFloor(n: number, tracer: Tracer, afterRound: () => void): number {
  let bestUs = Infinity;
  for (let round = 0; round < 5; round++) {
    gc();
    const start = performance.now();
    for (let i = 0; i < n; i++) {
      const span = tracer.startSpan('execute_tool search', {
        attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'search', 'gen_ai.tool.call.id': `c${i}`, 'gen_ai.tool.type': 'function' },
      });
      span.setAttribute('agent_lanes.outcome', 'result');
      span.end();
    }
    bestUs = Math.min(bestUs, ((performance.now() - start) * 1000) / n);
    afterRound();
  }
  return bestUs;
}

/** `runs` agents, each with a script of its own (one turn of 4 calls, then an answer), so runs on one runner do not share a script position. */
function scriptedRuns(runs: number): { script: Record<string, ModelResponse[]>; agents: Agent[] } {
  const script: Record<string, ModelResponse[]> = {};
  const agents = Array.from({ length: runs }, (_, i) => {
    script[`a${i}`] = [turnOf(4), { text: 'done' }];
    return new Agent({ name: `a${i}`, instructions: '', model: 'scripted' });
  });
  return { script, agents };
}

async function w3(): Promise<void> {
  const runs = 500;
  const tools = new ToolRegistry().register({ name: 'work' }, () => sleep(1));
  // Each round gets a fresh runner and scripts.
  const round = () => {
    const { script, agents } = scriptedRuns(runs);
    const runner = new AgentRunner({ provider: new ScriptedProvider(script), tools, concurrency: everything });
    return () => Promise.all(agents.map((a) => runner.run(a, 'go')));
  };
  // Warm, like a service that has been up for a while: the median of seven rounds after eight
  // (a round is short, about 2,000 calls, and the JIT is still settling after two). The first
  // round of a fresh process is reported too, since a cold start is a real case.
  const cold = await timed(round());
  const wall = await best(7, () => round()(), 8);
  // The peak heap is sampled in a round of its own, so sampling does not slow the timed ones.
  const next = round();
  gc();
  const before = process.memoryUsage().heapUsed;
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 2);
  await next();
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().heapUsed);
  row({ workload: 'W3 500 runs x 4 calls of 1ms', figure: 'wall time (warm)', value: wall, unit: 'ms' });
  row({ workload: 'W3 500 runs x 4 calls of 1ms', figure: 'calls per second (warm)', value: (runs * 4) / (wall / 1000), unit: 'calls/s' });
  row({ workload: 'W3 500 runs x 4 calls of 1ms', figure: 'calls per second (first round)', value: (runs * 4) / (cold / 1000), unit: 'calls/s', note: 'cold process: includes JIT warm-up' });
  row({ workload: 'W3 500 runs x 4 calls of 1ms', figure: 'peak heap above start', value: (peak - before) / 1024 / 1024, unit: 'MiB' });
  // The floor: the same 2,000 sleeps of 1 ms under one Promise.all, no runner.
  const floor = await best(5, () => Promise.all(Array.from({ length: runs * 4 }, () => sleep(1))));
  row({ workload: 'W3 floor', figure: '2,000 sleeps of 1ms, Promise.all', value: floor, unit: 'ms' });
  // What a service pays per run in flight: runs waiting on their model, and runs whose four
  // calls wait in a lane (after one turn each). Measured after a collection, over 4,000 runs.
  const waiting = 4_000;
  let answer: () => void = () => undefined;
  const answered = new Promise<void>((resolve) => (answer = resolve));
  const slow = { respond: () => answered.then((): ModelResponse => ({ text: 'done' })) };
  await heapPerRun('W3 heap per run', 'waiting on its model', waiting, new AgentRunner({ provider: slow, tools }), answer);
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const { script, agents } = scriptedRuns(waiting);
  const queued = new AgentRunner({
    provider: new ScriptedProvider(script),
    tools: new ToolRegistry().register({ name: 'work' }, () => gate),
    concurrency: new ConcurrencyConfig({ perTool: { work: 8 } }),
  });
  await heapPerRun('W3 heap per run', 'its 4 calls queued in a lane', waiting, queued, open, agents);
}

/**
 * W3 as a fresh service sees it: a new process, two warm-up rounds, a full collection before
 * each timed round (so no round rides on a young generation the last one grew), a provider
 * whose `respond` is `async`, and arguments sent as JSON text and decoded by an io-ts codec.
 */
async function w3Fresh(): Promise<void> {
  const runs = 500;
  const Args = t.type({ city: t.string, nights: t.number });
  const tools = new ToolRegistry().register({ name: 'work', args: Args }, () => sleep(1));
  const ask: ModelResponse = {
    toolCalls: Array.from({ length: 4 }, (_, i) => ({ id: `c${i}`, name: 'work', arguments: JSON.stringify({ city: `city ${i}`, nights: i + 1 }) })),
  };
  const answer: ModelResponse = { text: 'done' };
  // As a real adapter answers: an async function, the first turn asking for the calls.
  const provider = { respond: async (request: ModelRequest): Promise<ModelResponse> => (request.messages.length === 1 ? ask : answer) };
  const round = () => {
    const runner = new AgentRunner({ provider, tools, concurrency: everything });
    return () => Promise.all(Array.from({ length: runs }, () => runner.run(agent, 'go')));
  };
  for (let i = 0; i < 2; i++) await round()();
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const go = round();
    gc();
    times.push(await timed(go));
  }
  const wall = median(times);
  const workload = noOpt ? 'W3 fresh, optimizing compiler off' : 'W3 fresh service, 500 x 4 calls';
  row({ workload, figure: 'calls per second', value: (runs * 4) / (wall / 1000), unit: 'calls/s', note: '2 warm-ups, gc() before each of 5 rounds (median), async respond, io-ts args' });
  if (noOpt) return;
  row({ workload, figure: 'wall time', value: wall, unit: 'ms' });
  // The same rounds, on, without the collection before each: what the collection costs.
  const kept: number[] = [];
  for (let i = 0; i < 5; i++) kept.push(await timed(round()));
  row({ workload, figure: 'the next 5 rounds, no gc() before', value: (runs * 4) / (median(kept) / 1000), unit: 'calls/s', note: 'median; the process still warming' });
}

// W3 fresh in a process whose optimizing compiler is off (node --no-opt): the floor a round runs
// at when the collection before it has thrown the optimized code away (docs/performance.md).
const noOpt = process.execArgv.includes('--no-opt');
async function w3FreshNoOpt(): Promise<void> {
  await w3Fresh();
}

/** Heap per run while `runs` runs are held (by a model or a lane) until `release`. */
async function heapPerRun(workload: string, figure: string, runs: number, runner: AgentRunner, release: () => void, agents?: readonly Agent[]): Promise<void> {
  const held = await heapHeld(() => Promise.all(Array.from({ length: runs }, (_, i) => runner.run(agents?.[i] ?? agent, 'go'))), release);
  row({ workload, figure, value: held / runs, unit: 'bytes' });
}

/** The heap (after a collection) that what `start` starts holds while it waits, until `release` lets it finish. */
async function heapHeld(start: () => Promise<unknown>, release: () => void): Promise<number> {
  gc();
  const before = process.memoryUsage().heapUsed;
  const done = start();
  await sleep(50);
  gc();
  const during = process.memoryUsage().heapUsed;
  release();
  await done;
  return during - before;
}

async function w4(): Promise<void> {
  const runs = quick ? 200 : 1000;
  const latency = 5;
  const perTool = 8;
  const perTenant = 3;
  const tenants = 4;
  // The binding lane: 4 tenants x 3 = 12 permits offered, but the tool lane allows 8.
  const limit = perTool / (latency / 1000);
  const contended = (ms: number) => {
    const { script, agents } = scriptedRuns(runs);
    const tools = new ToolRegistry().register({ name: 'work' }, () => sleep(ms));
    const runner = new AgentRunner({ provider: new ScriptedProvider(script), tools, concurrency: new ConcurrencyConfig({ perTool: { work: perTool }, perTenant }) });
    return { runner, go: () => Promise.all(agents.map((a, i) => runner.run(a, 'go', { tenant: `t${i % tenants}` }))) };
  };
  // Warm, as the other workloads: the same contention with bodies that wait 0 ms, three times.
  // A cold engine is slower between one call settling and the next starting, and every such
  // delay pushes the next timer later.
  for (let i = 0; i < 3; i++) {
    const warm = contended(0);
    const watching = warm.runner.activity$.subscribe(() => undefined);
    await warm.go();
    watching.unsubscribe();
  }
  // Timed as a service runs it, with nobody watching activity$: a watcher's own work on every
  // event (three or four per call) lands between one timer and the next, which is what W4 is
  // sensitive to. The lane waits and how full the lane was come from a second, watched round.
  // The floor: as many plain loops as the binding lane has permits, each sleeping 5 ms back to
  // back: what the timers themselves allow, with no runner at all. Floor and runner rounds
  // alternate, three of each, so both meet the machine's timers in the same state.
  const floorLoops = async (): Promise<number> => {
    let left = runs * 4;
    const wall = await timed(() =>
      Promise.all(
        Array.from({ length: perTool }, async () => {
          while (left-- > 0) await sleep(latency);
        }),
      ),
    );
    return (runs * 4) / (wall / 1000);
  };
  const floors: number[] = [];
  const rates: number[] = [];
  const ofFloor: number[] = [];
  // The collector's pauses inside each timed round: while one runs, no timer fires and no call
  // starts, so a pause costs the lane its full width.
  const pauses: Array<{ start: number; duration: number }> = [];
  const collector = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) pauses.push({ start: entry.startTime, duration: entry.duration });
  });
  collector.observe({ entryTypes: ['gc'] });
  const rounds: Array<{ start: number; end: number }> = [];
  for (let i = 0; i < 3; i++) {
    const floorRate = await floorLoops();
    const unwatched = contended(latency);
    const start = performance.now();
    await unwatched.go();
    const end = performance.now();
    rounds.push({ start, end });
    const rate = (runs * 4) / ((end - start) / 1000);
    floors.push(floorRate);
    rates.push(rate);
    ofFloor.push(rate / floorRate);
  }
  // The observer hears of a collection a moment after it.
  await sleep(10);
  collector.disconnect();
  const paused = rounds.map(({ start, end }) => pauses.filter((p) => p.start >= start && p.start < end).reduce((sum, p) => sum + p.duration, 0));
  const roundWall = median(rounds.map(({ start, end }) => end - start));
  const floor = median(floors);
  const achieved = median(rates);
  const { runner, go } = contended(latency);
  const queuedAt = new Map<string, number>();
  const waits: number[] = [];
  // How long the binding lane was not full, from the first start to the last settle: time the
  // engine lost between one call settling and the next starting (its permit given back, the next
  // waiter granted, its body invoked).
  let running = 0;
  let notFullSince: number | undefined;
  let notFull = 0;
  let firstStart: number | undefined;
  let lastSettle = 0;
  const watching = runner.activity$.subscribe((a: RunnerActivity) => {
    const now = performance.now();
    if (a.type === 'queued' && !queuedAt.has(`${a.runId}:${a.callId}`)) queuedAt.set(`${a.runId}:${a.callId}`, now);
    if (a.type === 'started') {
      const key = `${a.runId}:${a.callId}`;
      const since = queuedAt.get(key);
      waits.push(since === undefined ? 0 : now - since);
      queuedAt.delete(key);
      firstStart ??= now;
      if (++running === perTool && notFullSince !== undefined) {
        notFull += now - notFullSince;
        notFullSince = undefined;
      }
    }
    if (a.type === 'ended') {
      lastSettle = now;
      if (running-- === perTool) notFullSince = now;
    }
  });
  const wall = await timed(go);
  watching.unsubscribe();
  const achievedWatched = (runs * 4) / (wall / 1000);
  row({ workload: `W4 contention, ${runs} runs, 4 tenants`, figure: 'timer floor / lane limit', value: (100 * floor) / limit, unit: '%', note: `${perTool} plain loops of ${latency}ms sleeps, no runner: ${floor.toFixed(0)} calls/s` });
  row({ workload: `W4 contention, ${runs} runs, 4 tenants`, figure: 'achieved / timer floor', value: 100 * median(ofFloor), unit: '%', note: 'median over three rounds, each beside its own floor' });
  row({ workload: `W4 contention, ${runs} runs, 4 tenants`, figure: 'achieved / lane limit', value: (100 * achieved) / limit, unit: '%', note: `${achieved.toFixed(0)} of ${limit.toFixed(0)} calls/s, median of three rounds` });
  row({
    workload: `W4 contention, ${runs} runs, 4 tenants`,
    figure: 'collector pauses in a timed round',
    value: median(paused),
    unit: 'ms',
    note: `median of three; ${((100 * median(paused)) / roundWall).toFixed(1)} % of a round's wall time`,
  });
  row({ workload: `W4 contention, ${runs} runs, 4 tenants`, figure: 'the same, activity$ watched', value: (100 * achievedWatched) / limit, unit: '%', note: 'the round the waits below come from' });
  // The tail (fewer waiters than permits once the queue runs dry) is not the engine's doing.
  const window = lastSettle - (firstStart ?? 0);
  row({ workload: `W4 contention, ${runs} runs, 4 tenants`, figure: 'binding lane full', value: 100 * (1 - notFull / window), unit: '%', note: 'of the time from first start to last settle, tail included' });
  row({ workload: `W4 contention, ${runs} runs, 4 tenants`, figure: 'lane wait p50', value: percentile(waits, 50), unit: 'ms' });
  row({ workload: `W4 contention, ${runs} runs, 4 tenants`, figure: 'lane wait p99', value: percentile(waits, 99), unit: 'ms' });
}

// What the platform itself does as N grows, for the flatness figure: per call, a small record
// (what any engine keeps of a call: its index, its id, its answer) and a Promise, all in flight
// at once and kept until the last answer, as a batch keeps its outcomes; and a bare RxJS
// mergeMap over the same N (at 100k one timed run: it takes seconds).
async function scalingFloors(sizes: readonly number[]): Promise<void> {
  for (const n of sizes) {
    const records = async () => {
      const kept = Array.from({ length: n }, (_, index) => ({ index, id: `c${index}`, answer: undefined as unknown }));
      await Promise.all(kept.map((record) => immediate().then((answer) => (record.answer = { kind: 'result', answer }))));
      return kept;
    };
    await warmUp(records, n);
    const kept = await best(n >= 100_000 ? 3 : 5, records);
    row({ workload: `Scaling floor N=${n}`, figure: 'a record and a Promise per call', value: (kept * 1000) / n, unit: 'us/call' });
    const merged = () => bareMergeMap(n);
    let mergeMapTime: number;
    if (n >= 100_000) mergeMapTime = await timed(merged);
    else {
      await warmUp(merged, n);
      mergeMapTime = await best(5, merged);
    }
    row({ workload: `Scaling floor N=${n}`, figure: 'bare mergeMap', value: (mergeMapTime * 1000) / n, unit: 'us/call' });
  }
}

async function scaling(): Promise<void> {
  const sizes = quick ? [100, 1_000, 10_000] : [100, 1_000, 10_000, 100_000];
  await scalingFloors(sizes.filter((size) => size >= 1_000));
  for (const n of sizes) {
    const cost = await perCall(n, { concurrency: everything }, immediate);
    row({ workload: `Scaling N=${n}`, figure: 'per call, all lanes', value: cost, unit: 'us/call' });
  }
  // The same with at most 1,000 calls in flight: the batch, the reorder and the transcript still
  // grow with N, but the calls held at once do not, so the garbage collector's share stays put.
  const bounded = new ConcurrencyConfig({ maxConcurrentTools: 1_000, perTool: { work: 1_000_000 }, perTenant: 1_000_000, perToolSeconds: { work: 60 } });
  for (const n of sizes.filter((size) => size >= 10_000)) {
    const cost = await perCall(n, { concurrency: bounded }, immediate);
    row({ workload: `Scaling N=${n}`, figure: 'per call, turn lane of 1,000', value: cost, unit: 'us/call' });
  }
  // Heap per queued call: a turn lane of 1 and bodies that wait, sampled while everything queues.
  const n = quick ? 10_000 : 100_000;
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const runner = runnerFor(turnOf(n), () => gate, { concurrency: new ConcurrencyConfig({ maxConcurrentTools: 1 }), loopStallMs: false });
  const held = await heapHeld(() => runner.run(agent, 'go'), release);
  row({ workload: `Scaling, ${n} calls queued`, figure: 'heap per queued call', value: held / n, unit: 'bytes' });
}

// W5: a streamed model turn. The model writes 4 tool calls 100 ms apart (each complete at 0,
// 100, 200, 300 ms) and ends its turn at 400 ms; each body takes 200 ms. Started as each call
// is complete, the last ends at 300 + 200 = 500 ms; given whole, the turn is read at 400 and
// the bodies end at 600. Beside it, the AI SDK's streamText with its mock model writing the
// same stream, and the same mock model through aiSdkProvider. (ai 6's streamText holds each
// call until the stream's finish part, then runs them: `executeToolCallAfterFinish` in its
// run-tools transformation; so it measures as a turn given whole.)
const STREAM_GAP_MS = 100;
const STREAM_BODY_MS = 200;
const STREAM_CALLS = 4;

/** `[at ms, value]` pairs as an Observable: each value at its time, then the end at `endMs`. */
function written<T>(timed: ReadonlyArray<readonly [number, T]>, endMs: number): Observable<T> {
  let last = 0;
  const steps = timed.map(([at, value]) => {
    const wait = at - last;
    last = at;
    return timer(wait).pipe(map(() => value));
  });
  return concat(...steps, timer(endMs - last).pipe(ignoreElements()));
}

/** The same, as the ReadableStream an AI SDK model's doStream gives. */
function writtenStream<T>(timed: ReadonlyArray<readonly [number, T]>, endMs: number): ReadableStream<T> {
  return new ReadableStream<T>({
    start(controller) {
      written(timed, endMs).subscribe({ next: (value) => controller.enqueue(value), complete: () => controller.close() });
    },
  });
}

const streamedCalls = Array.from({ length: STREAM_CALLS }, (_, i) => ({ id: `c${i}`, name: 'work', arguments: '{}' }));
const callTimes = streamedCalls.map((call, i) => [i * STREAM_GAP_MS, call] as const);
const streamEnd = STREAM_CALLS * STREAM_GAP_MS;

/** The AI SDK mock model: the turn of calls as a stream, then a final answer at once. */
function mockModel(): MockLanguageModelV3 {
  const finish = (reason: 'tool-calls' | 'stop'): LanguageModelV3StreamPart => ({
    type: 'finish',
    finishReason: { unified: reason, raw: reason },
    usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } },
  });
  const calls: Array<readonly [number, LanguageModelV3StreamPart]> = callTimes.map(([at, call]) => [at, { type: 'tool-call', toolCallId: call.id, toolName: call.name, input: call.arguments }]);
  return new MockLanguageModelV3({
    doStream: [
      { stream: writtenStream([...calls, [streamEnd, finish('tool-calls')]], streamEnd) },
      { stream: writtenStream<LanguageModelV3StreamPart>([[0, { type: 'text-delta', id: 't', delta: 'done' }], [0, finish('stop')]], 0) },
    ],
  });
}

async function w5(): Promise<void> {
  const tools = new ToolRegistry().register({ name: 'work' }, () => sleep(STREAM_BODY_MS));
  const streamedTurn = (): Observable<ModelStreamPart> =>
    written<ModelStreamPart>([...callTimes.map(([at, call]) => [at, { type: 'tool-call' as const, ...call }] as const), [streamEnd, { type: 'finish', finishReason: 'tool-calls' }]], streamEnd);
  const wholeTurn = (): Promise<ModelResponse> => lastValueFrom(streamedTurn().pipe(toArray())).then(() => ({ toolCalls: streamedCalls }));
  const lanes = (step: () => Observable<ModelStreamPart> | Promise<ModelResponse>) => () =>
    runToEnd(new AgentRunner({ provider: new ScriptedProvider([step, { text: 'done' }]), tools }));
  const viaAdapter = () => runToEnd(new AgentRunner({ provider: aiSdkProvider(mockModel()), tools }));
  const sdk = async () => {
    const result = streamText({
      model: mockModel(),
      prompt: 'go',
      tools: { work: tool({ inputSchema: jsonSchema<Record<string, never>>({ type: 'object' }), execute: () => sleep(STREAM_BODY_MS) }) },
      stopWhen: stepCountIs(2),
    });
    await result.consumeStream();
    if ((await result.steps).length !== 2) throw new Error('streamText did not run both steps');
  };
  const repeats = quick ? 3 : 7;
  const ideal = STREAM_GAP_MS * (STREAM_CALLS - 1) + STREAM_BODY_MS;
  const workload = `W5 streamed turn, ${STREAM_CALLS} calls ${STREAM_GAP_MS}ms apart, ${STREAM_BODY_MS}ms bodies`;
  row({ workload, figure: 'agent-lanes, streamed', value: await best(repeats, lanes(streamedTurn), 1), unit: 'ms', note: `ideal ${STREAM_GAP_MS}*${STREAM_CALLS - 1} + ${STREAM_BODY_MS} = ${ideal}` });
  row({ workload, figure: 'agent-lanes, the turn given whole', value: await best(repeats, lanes(wholeTurn), 1), unit: 'ms', note: `ideal ${STREAM_GAP_MS}*${STREAM_CALLS} + ${STREAM_BODY_MS} = ${ideal + STREAM_GAP_MS}` });
  row({ workload, figure: 'agent-lanes, aiSdkProvider(mock)', value: await best(repeats, viaAdapter, 1), unit: 'ms', note: 'the AI SDK mock model below, through the lanes' });
  row({ workload, figure: 'AI SDK streamText(mock)', value: await best(repeats, sdk, 1), unit: 'ms', note: 'ai 6, MockLanguageModelV3: runs the tools once the finish part came' });
}

// W5 over the wire (bench/w5.ts): real vendor streams from a server on 127.0.0.1, through the
// built-in adapters, aiSdkProvider with the real provider packages, and the AI SDK's streamText.
// Loaded only for its own workload, as the provider packages are.
async function w5Wire(): Promise<void> {
  const { w5Wire: run } = await import('./w5.js');
  await run(row, quick);
}

// Lanes shared by a fleet of processes through Redis (bench/fleet.ts), beside redis-semaphore.
// Loaded only for its own workload: the others do not pay for the Redis clients' import.
async function fleet(): Promise<void> {
  const { fleet: run } = await import('./fleet.js');
  await run(row);
}

// The fleet lanes as a fleet grows (bench/fleetScale/): hand-off, growth, shards, on a Redis of its own.
async function fleetScale(): Promise<void> {
  const { fleetScale: run } = await import('./fleetScale/index.js');
  await run(row);
}

// W2 and W3 with a run journal, on PostgreSQL (bench/journal.ts), beside its floors.
async function journal(): Promise<void> {
  const { journalBench: run } = await import('./journal.js');
  await run(row, quick);
}

// Lanes against a partner that allows R requests per second (bench/partner/): four runner
// processes sharing a RedisLaneStore, beside Bottleneck's Redis-clustered reservoir.
async function partner(): Promise<void> {
  const { partner: run } = await import('./partner/index.js');
  await run(row);
}

// The same small app in the AI SDK, the OpenAI Agents SDK and LangChain, plain and with its tools
// wrapped in lanes, against the partner (bench/frameworks/): one process, and four on a RedisLaneStore.
async function frameworks(): Promise<void> {
  const { frameworksBench: run } = await import('./frameworks/index.js');
  await run(row);
}

// Each workload runs in a fresh process, so one cannot tax the next (a heap grown by the
// last, a JIT profile shaped by it); the parent prints the rows in order.
const workloads: Record<string, () => Promise<void>> = {
  w1, w2, tracing, w3, w3Fresh, w3FreshNoOpt, w4, scaling, w5, w5Wire, fleet, 'fleet-scale': fleetScale, journal, partner, frameworks,
  // The regimes a service meets, each beside its floors (bench/regimes.ts).
  ...Object.fromEntries(
    (['regimeWarm', 'regimeAfterGc', 'regimeAfterGcKept', 'regimeCold', 'regimeColdTimerFloor', 'regimeColdRxjsFloor', 'regimeW2', 'regimeW2Kept'] as const).map((name) => [name, () => regimes[name](row)]),
  ),
};
// The node flags a workload's process runs with, besides --expose-gc.
const flags: Record<string, string[]> = { w3FreshNoOpt: ['--no-opt'] };
const only = process.argv.indexOf('--only');
if (only !== -1) {
  await workloads[process.argv[only + 1]!]!();
  process.stdout.write(`\n${JSON.stringify(rows)}\n`);
} else {
  if (!json) console.log(`agent-lanes bench on Node ${process.version}, ${process.platform}/${process.arch}, ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'})\n`);
  const all: Row[] = [];
  // `-- --regimes`: the regimes and their floors alone (bench/regimes.ts).
  const names = Object.keys(workloads).filter((name) => !process.argv.includes('--regimes') || name.startsWith('regime'));
  for (const name of names) {
    const extra = quick ? ['--quick'] : [];
    const child = spawnSync(process.execPath, ['--expose-gc', ...(flags[name] ?? []), fileURLToPath(import.meta.url), '--only', name, ...extra], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    if (child.status !== 0) throw new Error(`workload ${name} failed:\n${child.stderr}`);
    const lines = child.stdout.trim().split('\n');
    const got = JSON.parse(lines[lines.length - 1]!) as Row[];
    for (const r of got) {
      all.push(r);
      if (!json) print(r);
    }
  }
  if (json) console.log(JSON.stringify({ node: process.version, cores: cpus().length, rows: all }, null, 2));
}
