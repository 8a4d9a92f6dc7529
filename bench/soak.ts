// Soak: many concurrent runs across tenants, about 200,000 tool calls with random
// failures, per-call timeouts and cancellations, on real timers. Prints calls per second,
// peak heap, and heap after a forced GC against the start; exits non-zero on a leaked
// permit, a lost or doubled outcome, or heap that does not come back.
// Run with `npm run soak` (`-- --calls N` for another size).
import * as t from 'io-ts';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  LaneTable,
  OnToolError,
  ScriptedProvider,
  ToolRegistry,
  type ModelRequest,
  type ModelResponse,
  type RunResult,
} from '../lib/index.js';

const argument = (name: string, fallback: number): number => {
  const at = process.argv.indexOf(name);
  return at === -1 ? fallback : Number(process.argv[at + 1]);
};
const targetCalls = argument('--calls', 200_000);
const concurrentRuns = argument('--runs', 200);
const callsPerTurn = 8;
const turnsPerRun = 2;
const callsPerRun = callsPerTurn * turnsPerRun;
const totalRuns = Math.ceil(targetCalls / callsPerRun);
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);

// A small deterministic generator, so a failing soak can be rerun as it was.
let seed = argument('--seed', 20261130);
const random = (): number => {
  seed = (seed * 1_103_515_245 + 12_345) & 0x7fffffff;
  return seed / 0x7fffffff;
};

const Args = t.type({ latency: t.number, fails: t.boolean });
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });
const tools = new ToolRegistry();
for (const [name, idempotent, parallelSafe] of [['search', true, true], ['charge', false, true], ['booking', false, false]] as const) {
  tools.register({ name, args: Args, idempotent, parallelSafe }, async ({ latency, fails }, ctx) => {
    await sleep(latency, ctx.signal);
    if (fails) throw new Error(`${name} failed`);
    ctx.record({ [`last_${name}`]: ctx.callId });
    return { ok: ctx.callId };
  });
}

function turnOf(run: number, turn: number): ModelResponse {
  return {
    toolCalls: Array.from({ length: callsPerTurn }, (_, i) => {
      const pick = random();
      const name = pick < 0.6 ? 'search' : pick < 0.95 ? 'charge' : 'booking';
      // Latencies 0-4ms; one call in fifty hangs past its 20ms ceiling; one in ten fails.
      const latency = random() < 0.02 ? 200 : Math.floor(random() * 5);
      return { id: `r${run}t${turn}c${i}`, name, arguments: { latency, fails: random() < 0.1 } };
    }),
  };
}

// Every run gets a runner of its own (for its own script) over one shared table of lanes.
const lanes = new LaneTable();
const concurrency = new ConcurrencyConfig({
  maxConcurrentTools: 6,
  perTool: { search: 64, charge: 32, booking: 4 },
  perTenant: 48,
  perToolSeconds: { search: 0.02, charge: 0.02, booking: 0.02 },
});

/** A provider per run: its turns, then an answer, as a function of the request. */
function providerFor(run: number) {
  const turns = Array.from({ length: turnsPerRun }, (_, turn) => turnOf(run, turn + 1));
  return new ScriptedProvider([...turns.map((response) => (_request: ModelRequest) => response), { text: `run ${run} done` }]);
}

const problems: string[] = [];
function check(run: number, result: RunResult): number {
  let outcomes = 0;
  const seen = new Set<string>();
  result.events.forEach((event, i) => {
    if (event.type !== 'MODEL_RESPONSE') return;
    const expected = event.toolCalls.map((c) => c.id);
    const got = result.events.slice(i + 1, i + 1 + expected.length).map((e) => ('callId' in e ? e.callId : `(${e.type})`));
    if (got.join() !== expected.join()) problems.push(`run ${run} turn ${event.turn}: outcomes ${got.join()} for calls ${expected.join()}`);
    for (const id of got) {
      if (seen.has(id)) problems.push(`run ${run}: call ${id} has two outcomes`);
      seen.add(id);
    }
    outcomes += got.length;
  });
  return outcomes;
}

async function soak(): Promise<void> {
  gc();
  const startHeap = process.memoryUsage().heapUsed;
  let peakHeap = startHeap;
  const sampler = setInterval(() => (peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed)), 50);
  const started = performance.now();
  let next = 0;
  let outcomes = 0;
  const statuses = { completed: 0, failed: 0, cancelled: 0 };

  const worker = async (): Promise<void> => {
    while (next < totalRuns) {
      const run = next++;
      const agent = new Agent({
        name: `soak${run}`,
        instructions: '',
        model: 'scripted',
        onToolError: run % 5 === 0 ? OnToolError.FAIL_RUN : OnToolError.SURFACE_TO_MODEL,
      });
      const local = new AgentRunner({ provider: providerFor(run), tools, lanes, concurrency, loopStallMs: false });
      const controller = new AbortController();
      // One run in eight is cancelled at a random moment.
      const cancel = run % 8 === 0 ? setTimeout(() => controller.abort(), Math.floor(random() * 10)) : undefined;
      const result = await local.run(agent, 'go', { tenant: `tenant${run % 7}`, signal: controller.signal });
      clearTimeout(cancel);
      statuses[result.status as keyof typeof statuses]++;
      outcomes += check(run, result);
    }
  };
  await Promise.all(Array.from({ length: concurrentRuns }, worker));
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);

  const leaked = lanes.occupancy();
  if (leaked.length > 0) problems.push(`lanes still held after the soak: ${JSON.stringify(leaked)}`);
  await new Promise((resolve) => setTimeout(resolve, 50));
  gc();
  gc();
  const endHeap = process.memoryUsage().heapUsed;
  const grewMiB = (endHeap - startHeap) / 1024 / 1024;
  if (grewMiB > 32) problems.push(`heap did not come back: ${grewMiB.toFixed(1)} MiB above the start after GC`);

  const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  console.log(`soak: ${totalRuns} runs, ${outcomes} tool calls settled in ${seconds.toFixed(1)}s`);
  console.log(`  calls per second      ${(outcomes / seconds).toFixed(0)}`);
  console.log(`  runs                  ${statuses.completed} completed, ${statuses.failed} failed, ${statuses.cancelled} cancelled`);
  console.log(`  heap at start         ${mib(startHeap)}`);
  console.log(`  peak heap             ${mib(peakHeap)}`);
  console.log(`  heap after forced GC  ${mib(endHeap)} (${grewMiB >= 0 ? '+' : ''}${grewMiB.toFixed(1)} MiB)`);
  if (problems.length > 0) {
    console.log(`\n${problems.length} problem(s):`);
    for (const problem of problems.slice(0, 20)) console.log(`  - ${problem}`);
    process.exitCode = 1;
  } else {
    console.log('  no leaked permit, no lost or doubled outcome');
  }
}

await soak();
