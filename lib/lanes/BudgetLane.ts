// Budget lanes: a party's spend (a tenant's model tokens, its tools' cost) over a window of
// `perSeconds`. A request that the window cannot cover is refused (told `lost` with a
// BudgetExceededError saying how much, and until when); one it covers is granted at once and
// its amount spent. A window opens with the first spend after the last one closed and lasts
// `perSeconds`; when it closes, the spend starts again from zero. Nothing here waits: a budget
// never queues, it answers.
import { BudgetExceededError, type BudgetMeasure } from '../errors.js';
import type { LaneSignal } from './AdaptiveLimit.js';
import { grant, type OnGrant } from './Lane.js';
import type { Permit } from './LaneTable.js';

/** One budget: `limit` of `measure` per window of `perSeconds`. */
export interface BudgetSpec {
  readonly measure: BudgetMeasure;
  readonly limit: number;
  readonly perSeconds: number;
}

/** What a budget lane reports of itself: its limit, what its open window spent, and when that window closes (0: none open). */
export interface BudgetOccupancy {
  readonly key: string;
  readonly measure: BudgetMeasure;
  readonly limit: number;
  readonly spent: number;
  readonly until: number;
}

/**
 * Whether a window that spent `spent` of `limit` covers `amount`: a known amount must fit in what
 * is left; an amount not known in advance (0: a model turn) needs something left.
 */
export function covers(limit: number, spent: number, amount: number): boolean {
  return amount > 0 ? spent + amount <= limit : spent < limit;
}

/** The error a refused request is told: `until` is when the window closes (or now, when none is open). */
export function refusal(party: string, spec: BudgetSpec, amount: number, spent: number, until: number): BudgetExceededError {
  return new BudgetExceededError(party, spec.measure, Math.max(amount, 1), Math.max(0, spec.limit - spent), until);
}

// Tells a caller that its request was refused: its lost(), if it has one; else the error is thrown.
function refuse(onGrant: OnGrant, error: Error): void {
  const { lost } = onGrant as { lost?: unknown };
  if (typeof lost !== 'function') throw error;
  lost.call(onGrant, error);
}

// One budget's open window (kept only while open, so a million tenants seen over a day do not mean a million windows).
class Window {
  spent = 0;
  // When it closes (the table's clock, ms).
  until = 0;
  constructor(
    readonly key: string,
    public spec: BudgetSpec,
  ) {}
}

/**
 * A granted budget request. What it spent stays spent, unless its holder reports that its work
 * never started (`unstarted`): then the amount goes back to the window it was spent in. `charge`
 * says what the work cost in all, replacing what was spent up to then (the difference is spent,
 * or given back, in the window open now).
 */
export class BudgetPermit implements Permit {
  holding = true;
  // What this request spent, and the window (its closing time) it spent it in.
  private charged: number;
  private spentUntil: number;

  constructor(
    private readonly budgets: BudgetLanes,
    private readonly key: string,
    private readonly spec: BudgetSpec,
    amount: number,
    until: number,
  ) {
    this.charged = amount;
    this.spentUntil = until;
  }

  leave(): void {
    this.holding = false;
  }

  report(signal: LaneSignal): void {
    if (signal !== 'unstarted' || this.charged === 0) return;
    this.budgets.refund(this.key, this.spentUntil, this.charged);
    this.charged = 0;
  }

  charge(total: number): void {
    if (!(total >= 0) || total === this.charged) return;
    const delta = total - this.charged;
    this.charged = total;
    this.spentUntil = this.budgets.spend(this.key, this.spec, delta);
  }
}

/** The budget lanes of one table, by key. */
export class BudgetLanes {
  private readonly windows = new Map<string, Window>();
  // How many windows were open after the last sweep: the next one comes when there are twice as many.
  private swept = 64;

  constructor(private readonly now: () => number) {}

  /** Asks budget `key` to cover `amount` for `party`: granted at once (and spent), or refused (`lost`). */
  enter(key: string, spec: BudgetSpec, amount: number, onGrant: OnGrant, party: string): Permit {
    const window = this.open(key);
    const spent = window?.spent ?? 0;
    if (!covers(spec.limit, spent, amount)) {
      refuse(onGrant, refusal(party, spec, amount, spent, window?.until ?? this.now()));
      return refused;
    }
    const until = amount > 0 ? this.spend(key, spec, amount) : window?.until ?? 0;
    const permit = new BudgetPermit(this, key, spec, amount, until);
    grant(onGrant);
    return permit;
  }

  /** Spends `amount` (negative: gives back) in budget `key`'s open window, opening one if none is; returns when it closes. */
  spend(key: string, spec: BudgetSpec, amount: number): number {
    let window = this.open(key);
    if (window === undefined) {
      if (amount <= 0) return 0;
      window = new Window(key, spec);
      window.until = this.now() + spec.perSeconds * 1000;
      this.windows.set(key, window);
      if (this.windows.size > this.swept * 2) this.sweep();
    }
    window.spec = spec;
    window.spent = Math.max(0, window.spent + amount);
    return window.until;
  }

  /** Gives `amount` back to budget `key`'s window that closes at `until`, if it is still open. */
  refund(key: string, until: number, amount: number): void {
    const window = this.open(key);
    if (window !== undefined && window.until === until) window.spent = Math.max(0, window.spent - amount);
  }

  /** The budgets with an open window. */
  list(): BudgetOccupancy[] {
    const open: BudgetOccupancy[] = [];
    for (const key of [...this.windows.keys()]) {
      const window = this.open(key);
      if (window !== undefined) open.push({ key, measure: window.spec.measure, limit: window.spec.limit, spent: window.spent, until: window.until });
    }
    return open;
  }

  // Drops every closed window (tenants that spent once and did not come back): amortised O(1) per window.
  private sweep(): void {
    for (const key of [...this.windows.keys()]) this.open(key);
    this.swept = Math.max(64, this.windows.size);
  }

  // Budget `key`'s open window, if any: one whose time is up is dropped (its spend starts again from zero).
  private open(key: string): Window | undefined {
    const window = this.windows.get(key);
    if (window === undefined || this.now() < window.until) return window;
    this.windows.delete(key);
    return undefined;
  }
}

// The permit of a refused request: never holding, nothing to give back.
const refused: Permit = Object.freeze({ holding: false, leave() {} });
