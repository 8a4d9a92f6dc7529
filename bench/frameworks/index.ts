// The frameworks bench: the same small app written the plain way in each framework (the AI SDK,
// the OpenAI Agents SDK, LangChain's ToolNode) and with its tools wrapped in lanes (`withLanes`),
// 50 concurrent requests of four tenants, each asking for four calls of a tool whose body calls
// the simulated partner of the partner bench (R requests a second, a concurrency limit of its own,
// 429 above either). In one process, and in four processes sharing a RedisLaneStore. Every rate,
// 429 and in-flight figure is the partner's own count. Then what `withLanes` adds to a call,
// beside what the framework itself costs per call. Figures, not pass/fail.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { forkChild, type BenchChild } from '../child.js';
import { startPartner, type Partner } from '../partner/server.js';
import type { PartnerSecond } from '../partner/windows.js';
import { deleteKeys, redisAnswers } from '../redis.js';
import type { Row } from '../row.js';
import type { Framework } from './apps.js';
import type { FrameworkCommand, FrameworkLimiter, FrameworkRunResult, FrameworkScenario, FrameworkWorkerMessage } from './scenario.js';

/** R: what the partner allows a second; C: how many it serves at once. Modest, so a busy 2-core machine can drive them. */
const RATE = 200;
const PARTNER_CONCURRENCY = 16;
const REQUESTS = 50;
const CALLS = 4;
// Rounds of the cost step (each times the three apps in turn): more rounds, a steadier median.
const COST_ROUNDS = Number(process.env['FRAMEWORKS_COST_ROUNDS'] ?? 41);
// FRAMEWORKS_ONLY=cost runs the cost step alone (no partner scenarios).
const ONLY_COST = process.env['FRAMEWORKS_ONLY'] === 'cost';
const TENANTS = ['a', 'b', 'c', 'd'] as const;
// FRAMEWORKS_SECONDS: each scenario's seconds (default 4).
const SECONDS = Number(process.env['FRAMEWORKS_SECONDS'] ?? 4);
const FRAMEWORKS: readonly Framework[] = ['ai-sdk', 'openai-agents', 'langchain'];
const workerFile = fileURLToPath(new URL('./worker.js', import.meta.url));
const base = `agent-lanes-bench-frameworks:${process.pid}:${randomBytes(3).toString('hex')}:`;
const workload = `FW frameworks, R=${RATE}/s, C=${PARTNER_CONCURRENCY}, ${REQUESTS} requests x ${CALLS} calls`;

type Child = BenchChild<FrameworkWorkerMessage>;

interface Plan {
  readonly framework: Framework;
  readonly limiter: FrameworkLimiter;
  readonly processes: number;
}

interface Measured {
  readonly seconds: readonly PartnerSecond[];
  readonly limitedAfter: number;
  readonly results: readonly FrameworkRunResult[];
}

const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

async function measure(partner: Partner, children: readonly Child[], plan: Plan, index: number): Promise<Measured> {
  // Start on a second of the partner's clock, so its windows are the scenario's seconds.
  const startAt = Math.ceil((Date.now() + 500) / 1000) * 1000;
  partner.reset();
  const used = children.slice(0, plan.processes);
  used.forEach((child, i) => {
    // The 50 requests spread over the processes.
    const requests = Math.floor(REQUESTS / plan.processes) + (i < REQUESTS % plan.processes ? 1 : 0);
    const scenario: FrameworkScenario = {
      framework: plan.framework,
      limiter: plan.limiter,
      url: partner.url,
      prefix: `${base}${index}:`,
      fleet: plan.processes > 1,
      rate: RATE,
      perTool: PARTNER_CONCURRENCY,
      tenants: TENANTS,
      requests,
      calls: CALLS,
      startAt,
      endAt: startAt + SECONDS * 1000,
    };
    const command: FrameworkCommand = { type: 'run', scenario };
    child.child.send(command);
  });
  const messages = await Promise.all(used.map((child) => child.next()));
  const results = messages.flatMap((m) => (m.type === 'done' ? [m.result] : []));
  for (const result of results) if (result.unexpected !== undefined) console.error(`frameworks bench, ${label(plan)}: ${result.unexpected}`);
  const counted = partner.seconds();
  const first = startAt / 1000;
  const seconds = Array.from({ length: SECONDS }, (_, i) => counted.get(first + i) ?? { accepted: 0, limited: 0, busy: 0, peak: 0, byTenant: {} });
  let limitedAfter = 0;
  for (const [second, seen] of counted) if (second >= first + SECONDS) limitedAfter += seen.limited;
  return { seconds, limitedAfter, results };
}

function label(plan: Plan): string {
  const how = plan.limiter === 'none' ? 'plain' : plan.limiter === 'perTool' ? `withLanes perTool ${PARTNER_CONCURRENCY}` : 'withLanes perToolRate R';
  return `${plan.framework}, ${how}, ${plan.processes} process${plan.processes > 1 ? 'es' : ''}`;
}

function rows(row: (r: Row) => void, plan: Plan, m: Measured): void {
  // The first second (requests starting) is left out of the rate.
  const steady = m.seconds.slice(1);
  const perSecond = sum(steady.map((s) => s.accepted)) / steady.length;
  const limited = sum(m.seconds.map((s) => s.limited)) + m.limitedAfter;
  const busy = sum(m.seconds.map((s) => s.busy));
  const peak = Math.max(...m.seconds.map((s) => s.peak));
  const requests = sum(m.results.map((r) => r.completed));
  row({ workload, figure: `${label(plan)}: of R`, value: (100 * perSecond) / RATE, unit: '%', note: `${perSecond.toFixed(0)} req/s accepted, seconds 2-${SECONDS}; ${requests} requests answered` });
  row({ workload, figure: `${label(plan)}: 429s`, value: limited, unit: '429s', note: `${busy} of them over the partner's ${PARTNER_CONCURRENCY} at once; at most ${peak} in flight` });
}

/** The frameworks workload, or one row saying why there is none. */
export async function frameworksBench(row: (r: Row) => void): Promise<void> {
  if (!(await redisAnswers())) {
    row({ workload, figure: 'skipped', value: 0, unit: '', note: 'no Redis answers on 127.0.0.1:6379 (start one: redis-server --save "" --appendonly no)' });
    return;
  }
  const partner = await startPartner({ rate: RATE, baseLatencyMs: 50, perInFlightMs: 0.25, maxInFlight: PARTNER_CONCURRENCY });
  const children = Array.from({ length: 4 }, () => forkChild<FrameworkWorkerMessage>(workerFile, 'frameworks bench'));
  try {
    await Promise.all(children.map((child) => child.next()));
    let index = 0;
    for (const framework of ONLY_COST ? [] : FRAMEWORKS) {
      for (const plan of [
        { framework, limiter: 'none', processes: 1 },
        { framework, limiter: 'perTool', processes: 1 },
        { framework, limiter: 'perToolRate', processes: 1 },
        { framework, limiter: 'perTool', processes: 4 },
        { framework, limiter: 'perToolRate', processes: 4 },
      ] as const) {
        rows(row, plan, await measure(partner, children, plan, index++));
      }
    }
    // What withLanes adds to a call, in one process, beside the framework's own cost per call.
    for (const framework of FRAMEWORKS) {
      const command: FrameworkCommand = { type: 'cost', framework, calls: CALLS, requests: 100, rounds: COST_ROUNDS };
      children[0]!.child.send(command);
      const answer = await children[0]!.next();
      if (answer.type !== 'cost') continue;
      const { plainMicros, floorMicros, lanesMicros } = answer.result;
      const perCall = plainMicros;
      const share = (micros: number): string => `${((100 * micros) / perCall).toFixed(1)} % of the framework's own (the median of each round's difference)`;
      row({ workload, figure: `${framework}: the framework's own cost per call`, value: perCall, unit: 'µs/call', note: `one request of ${CALLS} calls whose body answers at once; CPU time, median of ${COST_ROUNDS} rounds of 100, plain, floor and with lanes side by side` });
      row({ workload, figure: `${framework}: what the floor adds per call`, value: floorMicros - plainMicros, unit: 'µs/call', note: `${share(floorMicros - plainMicros)}; a signal of its own per call and one Promise step, no lane` });
      row({ workload, figure: `${framework}: what withLanes adds per call`, value: lanesMicros - plainMicros, unit: 'µs/call', note: share(lanesMicros - plainMicros) });
    }
  } finally {
    const close: FrameworkCommand = { type: 'close' };
    await Promise.all(children.map((child) => child.close(close)));
    await partner.close();
    await deleteKeys([`${base}*`]);
  }
}
