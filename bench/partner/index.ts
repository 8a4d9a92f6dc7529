// The partner bench: lanes measured against a partner that allows R requests per second. The
// partner (./server.ts) runs in this process; four runner processes (./worker.ts) share one
// RedisLaneStore and each run many concurrent runs of four tenants against it, one scenario after
// another: no limit, a concurrency lane, Bottleneck's Redis-clustered reservoir, perToolRate at R,
// perToolAdaptive with R unknown, and a token budget on one tenant. Every rate and 429 figure is
// counted by the partner, per second of its clock. Figures, not pass/fail.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { forkChild, type BenchChild } from '../child.js';
import { deleteKeys, redisAnswers } from '../redis.js';
import { startPartner, type Partner } from './server.js';
import type { PartnerSecond } from './windows.js';
import { ADAPTIVE, TURN_USAGE, type PartnerCommand, type PartnerLimiter, type PartnerScenario, type PartnerWorkerMessage, type PartnerWorkerResult } from './scenario.js';
import type { Row } from '../row.js';

/** R: what the partner allows per second. Modest, so a busy 2-core machine can drive it. */
const RATE = 200;
const PROCESSES = 4;
const TENANTS = ['a', 'b', 'c', 'd'] as const;
/** 429s are counted apart after this many seconds, once an adaptive lane has had time to learn R. */
const LEARN_SECONDS = 10;
const workerFile = fileURLToPath(new URL('./worker.js', import.meta.url));
const base = `agent-lanes-bench-partner:${process.pid}:${randomBytes(3).toString('hex')}:`;
const workload = `P partner, R=${RATE}/s, ${PROCESSES} processes`;

type RunnerProcess = BenchChild<PartnerWorkerMessage>;

/** What one scenario asks of the processes. */
interface Plan {
  readonly label: string;
  readonly limiter: PartnerLimiter;
  readonly seconds: number;
  readonly tenants?: readonly string[];
  readonly perTool?: number;
  readonly burst?: number;
  readonly perTenant?: number;
  readonly budget?: PartnerScenario['budget'];
}

/** What the partner counted in one scenario, and what the processes said. */
interface Measured {
  /** Per second of the scenario (0 = its first), what the partner saw. */
  readonly seconds: readonly PartnerSecond[];
  /** 429s the partner gave after the scenario's end (calls in flight as it ended). */
  readonly limitedAfter: number;
  readonly results: readonly PartnerWorkerResult[];
}

async function measure(partner: Partner, processes: readonly RunnerProcess[], plan: Plan, index: number): Promise<Measured> {
  // Start on a second of the partner's clock, so its windows are the scenario's seconds.
  const startAt = Math.ceil((Date.now() + 500) / 1000) * 1000;
  const scenario: PartnerScenario = {
    limiter: plan.limiter,
    url: partner.url,
    prefix: `${base}${index}-${plan.limiter}:`,
    rate: RATE,
    tenants: plan.tenants ?? TENANTS,
    runsPerTenant: 6,
    startAt,
    endAt: startAt + plan.seconds * 1000,
    ...(plan.perTool === undefined ? {} : { perTool: plan.perTool }),
    ...(plan.burst === undefined ? {} : { burst: plan.burst }),
    ...(plan.perTenant === undefined ? {} : { perTenant: plan.perTenant }),
    ...(plan.budget === undefined ? {} : { budget: plan.budget }),
  };
  partner.reset();
  const command: PartnerCommand = { type: 'run', scenario };
  for (const p of processes) p.child.send(command);
  const messages = await Promise.all(processes.map((p) => p.next()));
  const results = messages.flatMap((m) => (m.type === 'done' ? [m.result] : []));
  for (const result of results) if (result.unexpected !== undefined) console.error(`partner bench, ${plan.label}: a run failed: ${result.unexpected}`);
  const counted = partner.seconds();
  const first = startAt / 1000;
  const seconds = Array.from({ length: plan.seconds }, (_, i) => counted.get(first + i) ?? { accepted: 0, limited: 0, busy: 0, peak: 0, byTenant: {} });
  if (perSecond) console.error(`${plan.label}: ${seconds.map((s) => `${s.accepted}/${s.limited}`).join(' ')}`);
  let limitedAfter = 0;
  for (const [second, seen] of counted) if (second >= first + plan.seconds) limitedAfter += seen.limited;
  return { seconds, limitedAfter, results };
}

const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

/** Accepted per second over the scenario, its first second (runs starting) left out. */
function achieved(m: Measured, tenants?: readonly string[]): number {
  const steady = m.seconds.slice(1);
  const count = (s: PartnerSecond): number => (tenants === undefined ? s.accepted : sum(tenants.map((t) => s.byTenant[t] ?? 0)));
  return sum(steady.map(count)) / steady.length;
}

function rateRows(row: (r: Row) => void, plan: Plan, m: Measured): void {
  const perSecond = achieved(m);
  const accepted = sum(m.seconds.map((s) => s.accepted));
  const limited = sum(m.seconds.map((s) => s.limited)) + m.limitedAfter;
  const late = m.seconds.slice(LEARN_SECONDS);
  const lateLimited = sum(late.map((s) => s.limited)) + m.limitedAfter;
  const lateShare = (100 * lateLimited) / Math.max(1, lateLimited + sum(late.map((s) => s.accepted)));
  row({ workload, figure: `${plan.label}: of R`, value: (100 * perSecond) / RATE, unit: '%', note: `${perSecond.toFixed(0)} req/s accepted, seconds 2-${plan.seconds}` });
  row({
    workload,
    figure: `${plan.label}: 429s`,
    value: limited,
    unit: '429s',
    note:
      `${((100 * limited) / Math.max(1, limited + accepted)).toFixed(1)} % of requests; ` +
      (late.length === 0 ? `ran ${plan.seconds} s` : `${lateLimited} after the first ${LEARN_SECONDS} s (${lateShare.toFixed(1)} %)`),
  });
}

const plain: Plan = { label: 'no limit', limiter: 'none', seconds: 3 };
const lanes16: Plan = { label: 'concurrency lane perTool 16', limiter: 'concurrency', perTool: 16, seconds: 3 };
const bottleneck: Plan = { label: 'Bottleneck reservoir R/s (ioredis)', limiter: 'bottleneck', seconds: 12 };

const rated: Plan = { label: 'perToolRate at R (its default burst, 1)', limiter: 'rate', seconds: 4 };
// A burst lets a turn's calls go together; a partner counting whole seconds may then see R + burst - 1 in one.
const bursty: Plan = { label: `perToolRate at R, burst ${RATE / 10}`, limiter: 'rate', burst: RATE / 10, seconds: 4 };
const adaptive: Plan = { label: `perToolAdaptive ${ADAPTIVE.min}..${ADAPTIVE.max}, R unknown`, limiter: 'adaptive', seconds: 20 };
const paced: Plan = { label: `perToolAdaptive ${ADAPTIVE.min}..${ADAPTIVE.max} with pace: true, R unknown`, limiter: 'paced', seconds: 20 };
// The budget scenario: each tenant in a fleet-wide lane of its own (the partner's R is not what
// binds), so another tenant's budget running out shows in their throughput only if it holds them
// up. Ten turns' worth, spent in the first second, which the throughput figures leave out.
const BUDGET = { tenant: 'd', tokens: 1200, perSeconds: 3600 } as const;
const others = TENANTS.filter((tenant) => tenant !== BUDGET.tenant);
const alone: Plan = { label: 'perTenantBudget, d absent', limiter: 'budget', perTenant: 2, tenants: others, seconds: 4 };
const beside: Plan = { label: 'perTenantBudget, d budgeted', limiter: 'budget', perTenant: 2, budget: BUDGET, seconds: 4 };

function budgetRows(row: (r: Row) => void, without: Measured, budgeted: Measured): void {
  const turn = TURN_USAGE.inputTokens + TURN_USAGE.outputTokens;
  const spent = sum(budgeted.results.map((r) => r.tokens[BUDGET.tenant] ?? 0));
  const refused = sum(budgeted.results.map((r) => r.budgetRefusals));
  row({
    workload,
    figure: `perTenantBudget: tenant ${BUDGET.tenant} tokens spent`,
    value: spent,
    unit: 'tokens',
    note: `budget ${BUDGET.tokens} per ${BUDGET.perSeconds} s, + one turn (${turn}) = ${BUDGET.tokens + turn}; ${refused} runs refused`,
  });
  const before = achieved(without, others);
  const after = achieved(budgeted, others);
  row({ workload, figure: `perTenantBudget: ${others.join(', ')} with ${BUDGET.tenant} absent`, value: before, unit: 'req/s', note: `each tenant in a fleet-wide lane of ${alone.perTenant}` });
  row({
    workload,
    figure: `perTenantBudget: ${others.join(', ')} beside budgeted ${BUDGET.tenant}`,
    value: after,
    unit: 'req/s',
    note: `${(100 * (after / before - 1)).toFixed(1)} % against ${BUDGET.tenant} absent; ${BUDGET.tenant} itself ${achieved(budgeted, [BUDGET.tenant]).toFixed(0)} req/s`,
  });
}

// `npm run bench -- --only partner --scenarios=rate,adaptive`: only the scenarios of those limiters.
const chosen = process.argv.find((arg) => arg.startsWith('--scenarios='))?.slice('--scenarios='.length).split(',');
const picked = (plan: Plan): boolean => chosen === undefined || chosen.includes(plan.limiter);
// PARTNER_SECONDS=1: each scenario's seconds as the partner counted them, on stderr.
const perSecond = process.env['PARTNER_SECONDS'] === '1';

/** The partner workload: every scenario against one partner, or one row saying why there are none. */
export async function partner(row: (r: Row) => void): Promise<void> {
  if (!(await redisAnswers())) {
    row({ workload, figure: 'skipped', value: 0, unit: '', note: 'no Redis answers on 127.0.0.1:6379 (start one: redis-server --save "" --appendonly no)' });
    return;
  }
  const server = await startPartner({ rate: RATE, baseLatencyMs: 50, perInFlightMs: 0.25 });
  const processes = Array.from({ length: PROCESSES }, (): RunnerProcess => forkChild<PartnerWorkerMessage>(workerFile, 'partner bench runner'));
  try {
    await Promise.all(processes.map((p) => p.next()));
    let index = 0;
    for (const plan of [plain, lanes16, bottleneck, rated, bursty, adaptive, paced].filter(picked)) rateRows(row, plan, await measure(server, processes, plan, index++));
    if (picked(beside)) budgetRows(row, await measure(server, processes, alone, index++), await measure(server, processes, beside, index++));
  } finally {
    const close: PartnerCommand = { type: 'close' };
    await Promise.all(processes.map((p) => p.close(close)));
    await server.close();
    // Bottleneck puts its own prefix before its id.
    await deleteKeys([`${base}*`, `b_${base}*`]);
  }
}
