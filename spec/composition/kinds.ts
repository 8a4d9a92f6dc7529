// The composition matrix's lane kinds: for each kind of lane (turn, tool, tenant, rate,
// adaptive, budget) the config that declares it, the tool it bounds, and what the bodies must
// show under it. Every context spec (streamed.spec.ts, resume.spec.ts, recover.spec.ts,
// nested.spec.ts, fleet.spec.ts) runs the same `work` tool under each kind and hands what its
// bodies recorded to `expectKind`: counted from the bodies' side, never from the lanes' own books.
import { expect } from 'chai';
import type { VirtualTimeScheduler } from 'rxjs';
import type { ConcurrencyOptions, RunEvent } from '../../lib/index.js';

export type Kind = 'turn' | 'tool' | 'tenant' | 'rate' | 'adaptive' | 'budget';
export const kinds: readonly Kind[] = ['turn', 'tool', 'tenant', 'rate', 'adaptive', 'budget'];

/** The tool every cell's calls go to, and the tenant they run for. */
export const TOOL = 'work';
export const TENANT = 'acme';
/** The bound of every concurrency kind (turn, tool, tenant, adaptive). */
export const BOUND = 2;
/** The rate kind: `limit` starts per `perSeconds`, no burst. */
export const RATE = { limit: 2, perSeconds: 0.2 } as const;
/** The budget kind: each call costs 1, the tenant's window covers `BUDGET` of them. */
export const BUDGET = 4;

/** The runner's config for `kind`, bounding the `work` tool's calls (and nothing else's but the turn's and the tenant's). */
export function concurrencyOf(kind: Kind): ConcurrencyOptions {
  switch (kind) {
    case 'turn':
      return { maxConcurrentTools: BOUND };
    case 'tool':
      return { perTool: { [TOOL]: BOUND } };
    case 'tenant':
      return { perTenant: BOUND };
    case 'rate':
      return { perToolRate: { [TOOL]: { ...RATE } } };
    case 'adaptive':
      return { perToolAdaptive: { [TOOL]: { min: 1, max: BOUND } } };
    case 'budget':
      return { perTenantBudget: { cost: BUDGET, perSeconds: 3600 } };
  }
}

/** What the `work` tool declares under `kind`: a cost of 1 a call for the budget. */
export function declarationOf(kind: Kind): { name: string; cost?: number } {
  return kind === 'budget' ? { name: TOOL, cost: 1 } : { name: TOOL };
}

/** One body's start, as the body saw it: which call, in which group (a run's turn), when. */
export interface Start {
  readonly id: string;
  readonly group: string;
  readonly at: number;
}

/**
 * What the bodies saw: each counts itself in when it starts and out when it ends, per group and
 * overall. A context whose bodies run in another process replays their log into one.
 */
export class Tally {
  readonly starts: Start[] = [];
  /** Bodies running now, and the most at once, per group and overall ('*'). */
  private readonly running = new Map<string, number>();
  readonly most = new Map<string, number>();
  /** Bodies started and not ended: id -> group. */
  private readonly live = new Map<string, string>();

  started(id: string, group: string, at: number): void {
    this.starts.push({ id, group, at });
    this.live.set(id, group);
    for (const key of [group, '*']) {
      const now = (this.running.get(key) ?? 0) + 1;
      this.running.set(key, now);
      this.most.set(key, Math.max(now, this.most.get(key) ?? 0));
    }
  }

  ended(id: string): void {
    const group = this.live.get(id);
    if (group === undefined) return;
    this.live.delete(id);
    for (const key of [group, '*']) this.running.set(key, this.running.get(key)! - 1);
  }

  /** Every body still running ends now (its process was killed). */
  killed(): void {
    for (const id of [...this.live.keys()]) this.ended(id);
  }

  /** The ids of the bodies that started, in the order they started. */
  get ran(): string[] {
    return this.starts.map((s) => s.id);
  }

  /** The most bodies at once in one group (a run), the largest over the groups. */
  get mostInAGroup(): number {
    return Math.max(0, ...[...this.most].filter(([key]) => key !== '*').map(([, n]) => n));
  }

  /** The most starts any window of `ms` holds, `[s, s + ms)` from each start `s` (the worst windows begin at a start). */
  mostStartsPerWindow(ms: number): number {
    const at = this.starts.map((s) => s.at).sort((a, b) => a - b);
    let most = 0;
    for (let i = 0, j = 0; i < at.length; i++) {
      while (j < at.length && at[j]! < at[i]! + ms) j++;
      most = Math.max(most, j - i);
    }
    return most;
  }
}

/**
 * What `kind` promises, from the bodies' side: a concurrency kind's bound is never passed and is
 * reached (the lane is used, not serialised: the turn's per run, the shared ones overall); a rate
 * holds no more than `limit` starts in any window of `perSeconds` and reaches it. Every kind: no
 * body runs twice, and the bodies that ran are exactly `shouldRun` (under a budget, the calls it
 * covers; the others never start).
 */
export function expectKind(kind: Kind, tally: Tally, shouldRun: readonly string[]): void {
  const twice = tally.ran.filter((id, i) => tally.ran.indexOf(id) !== i);
  expect(twice, 'bodies that ran more than once').to.deep.equal([]);
  expect([...tally.ran].sort(), kind === 'budget' ? 'the bodies that ran: those the budget covers' : 'the bodies that ran').to.deep.equal([...shouldRun].sort());
  switch (kind) {
    case 'turn':
      expect(tally.mostInAGroup, 'the most bodies of one turn at once').to.equal(BOUND);
      return;
    case 'tool':
    case 'tenant':
    case 'adaptive':
      expect(tally.most.get('*') ?? 0, 'the most bodies at once').to.equal(BOUND);
      return;
    case 'rate':
      expect(tally.mostStartsPerWindow(RATE.perSeconds * 1000), `the most starts in any ${RATE.perSeconds * 1000} ms`).to.equal(RATE.limit);
      return;
    case 'budget':
      return;
  }
}

/** The calls of `events` that ended, in the order their outcomes went out, each as "<id> <how>". */
export function outcomes(events: readonly RunEvent[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    if (e.type === 'TOOL_RESULT') out.push(`${e.callId} result`);
    else if (e.type === 'TOOL_ERROR') out.push(`${e.callId} error${/budget is spent/.test(e.error.message) ? ' budget' : ''}`);
    else if (e.type === 'TOOL_INDETERMINATE') out.push(`${e.callId} indeterminate`);
  }
  return out;
}

/** Every call of `ids` ended exactly once, in call order: their outcome events, in order, name them. */
export function expectInCallOrder(events: readonly RunEvent[], ids: readonly string[]): void {
  expect(outcomes(events).map((o) => o.split(' ')[0]), 'the calls that ended, in the order they ended').to.deep.equal([...ids]);
}

/** How a budget cell's calls end: those `covered` as results, the others refused by the budget, never started. */
export function budgetEndings(ids: readonly string[], covered: readonly string[]): string[] {
  return ids.map((id) => (covered.includes(id) ? `${id} result` : `${id} error budget`));
}

/** `ids` `a1..an`. */
export function ids(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);
}

/**
 * Runs `work` in the virtual time of `scheduler`: one scheduled action at a time, with the
 * Promises it sets going (a real turn of the event loop) before the next, so a Promise-based
 * step (a nested run's result, a resume) lands at the virtual moment it would in real time.
 */
export async function inVirtualTime<T>(scheduler: VirtualTimeScheduler, work: () => Promise<T>): Promise<T> {
  let done = false;
  const result = work().finally(() => (done = true));
  result.catch(() => undefined);
  for (let idle = 0, steps = 0; !done; steps++) {
    await new Promise((resolve) => setImmediate(resolve));
    if (steps > 100_000 || scheduler.frame > 600_000) throw new Error(`virtual time ran ${steps} steps to ${scheduler.frame} ms and the work is not done`);
    const next = scheduler.actions[0];
    if (next === undefined) {
      if (++idle > 100) throw new Error('the work is not done and nothing is scheduled: it waits on something virtual time cannot move');
      continue;
    }
    idle = 0;
    scheduler.actions.shift();
    scheduler.frame = next.delay;
    const error = next.execute(next.state, next.delay);
    if (error) throw error;
  }
  return result;
}

/** A Promise that resolves `ms` later on `scheduler`. */
export function after(scheduler: VirtualTimeScheduler, ms: number): Promise<void> {
  return new Promise((resolve) => scheduler.schedule(() => resolve(), ms));
}
