// What one call holds in its lanes: the permits it took, in order, the loans it makes of them to
// nested work, their fencing tokens, and the grace timer of a body that overruns its call. Written
// by the fan-out (inLanes) alone, through its record; the other stages only read it. An adaptive
// or budget lane is entered through its own door of the store, and hears how the work went.
import type { Subscription } from 'rxjs';
import { toErrorInfo } from '../errors.js';
import { put } from '../own.js';
import { scheduleAfter } from '../time.js';
import { enterWithLoan, Loan, type LaneGrantTarget, type LaneStore, type Permit } from '../lanes/index.js';
import { reportUnhandled } from '../unhandled.js';
import type { CallRecord } from './records.js';
import type { AdaptiveBounds, BudgetSpec, LaneSignal, LimitChange, OnGrant } from '../lanes/index.js';
import type { Outcome } from './types.js';

/** The kind-specific part of a lane step: an adaptive lane's bounds, or a budget and the amount a call asks of it. */
export interface LaneKind {
  readonly adaptive: AdaptiveBounds | undefined;
  readonly budget: BudgetSpec | undefined;
  readonly amount: number;
}

/** A plain (counting) lane step's kind. */
export const plainLane: LaneKind = Object.freeze({ adaptive: undefined, budget: undefined, amount: 0 });

/** Enters a step of an adaptive or budget lane, or returns undefined for a plain one (taken as before). */
export function enterKind(store: LaneStore, key: string, kind: LaneKind, onGrant: OnGrant, party: string): Permit | undefined {
  if (kind.budget !== undefined) return store.enterBudget!(key, kind.budget, kind.amount, onGrant, party);
  if (kind.adaptive !== undefined) return store.enterAdaptive!(key, kind.adaptive, onGrant, party);
  return undefined;
}

// Errors that say the downstream is overloaded: a partner's slow down, or a call that outran its ceiling.
const overload: ReadonlySet<string> = new Set(['RateLimitedError', 'ToolTimedOutError']);

/** What an outcome says of the work under a call's permits. */
export function signalOf(outcome: Outcome): LaneSignal {
  if (!outcome.dispatched) return 'unstarted';
  if (outcome.kind === 'result') return 'ok';
  if (outcome.kind === 'indeterminate' || outcome.stopped !== undefined) return 'stopped';
  return overload.has(outcome.error.name) ? 'overload' : 'failed';
}

/** Tells the first `taken` permits that listen how the work went (`signal`, or an outcome read only if one listens). */
export function tellLanes(permits: ReadonlyArray<Permit | undefined>, taken: number, signal: LaneSignal | Outcome): void {
  let told: LaneSignal | undefined = typeof signal === 'string' ? signal : undefined;
  for (let i = 0; i < taken; i++) {
    const permit = permits[i]!;
    if (permit.report === undefined) continue;
    told ??= signalOf(signal as Outcome);
    permit.report(told);
  }
}

/** Tells the first `taken` permits that take a cost (budget lanes) what the work cost in all. */
export function chargeLanes(permits: ReadonlyArray<Permit | undefined>, taken: number, total: number): void {
  for (let i = 0; i < taken; i++) permits[i]!.charge?.(total);
}

/** One lane a call takes, in the fixed order: the store, the key, its permits, whose turn it is. */
export interface LaneStep {
  readonly store: LaneStore;
  readonly key: string;
  readonly limit: number;
  readonly party: string;
  /** The permit of this lane a caller lends (a nested run), if any. */
  readonly loan: Loan | undefined;
  /** An adaptive or budget lane's own part (laneKinds.ts); absent or `plainLane` for a counting one. */
  readonly kind?: LaneKind;
}

/** What the lanes part needs of the stage that enters the call in its lanes (inLanes). */
export interface LaneSource {
  /** The shared lanes (the ones a call may lend to nested work). */
  readonly sharedLanes: LaneStore;
  /** Loans of the caller's permits (a nested run). */
  readonly lent: ReadonlyMap<string, Loan>;
  /** Grace for an overrunning body, in seconds. */
  readonly abandonAfterSeconds: number | undefined;
  /**
   * Every lane of `steps` granted `record`, the last to make it wait being step `waitedAt` (-1:
   * none did). When its tool's rate lane is paused now and the record did not just pass that lane
   * (a partner said "slow down" while the record waited in a later lane, or its steps were worked
   * out before the pause): the record's lanes worked out again, the paused one first. Else undefined.
   */
  pausedSteps?(record: CallRecord, steps: readonly LaneStep[], waitedAt: number): readonly LaneStep[] | undefined;
}

const noSteps: readonly LaneStep[] = [];
const noPermits: Array<Permit | undefined> = [];
const noLoans: Array<Loan | undefined> = [];
const noLent: ReadonlyMap<string, Loan> = new Map();

// Leaves one permit; one failing to go back (a remote store, say) must not keep the others.
function leaveOne(permit: Permit): void {
  try {
    permit.leave();
  } catch (error) {
    reportUnhandled(error);
  }
}

/**
 * A call's permits, taken one lane after another in the order its steps give. Each permit is
 * stored before the next lane is asked, so leaving always knows every permit held. It is each
 * lane's grant target: a grant that comes later carries on from the next lane.
 */
export class CallLanes implements LaneGrantTarget {
  // Who entered the call in its lanes (inLanes), once it did.
  private source: LaneSource | undefined = undefined;
  // The lanes this call takes, in order.
  private steps: readonly LaneStep[] = noSteps;
  // The permits it holds, in the order taken: `taken` of them. Sized once the lanes are known.
  private permits: Array<Permit | undefined> = noPermits;
  private taken = 0;
  // The lane asked last; a grant that comes later carries on from the next one.
  private asking = 0;
  // The permits this call lends to nested work, by position in `permits` (made when the body
  // first asks), and the lanes a nested run of its body may run in (its callers' loans too).
  private loans: Array<Loan | undefined> = noLoans;
  private lentLanes: ReadonlyMap<string, Loan> | undefined = undefined;
  // The abandonAfterSeconds timer of a body that overruns its call while holding permits.
  private grace: Subscription | undefined = undefined;

  constructor(private readonly record: CallRecord) {}

  /** How many permits the call holds now. */
  get held(): number {
    return this.taken;
  }

  /** Enters `steps`, in order, for `source`; once every lane granted, the record's body starts. */
  enter(source: LaneSource, steps: readonly LaneStep[]): void {
    this.source = source;
    this.steps = steps;
    if (steps.length > 0) this.permits = new Array<Permit | undefined>(steps.length);
    this.take(0);
  }

  /**
   * Leaves every permit and enters `steps` again from the first (a call whose body said "slow
   * down"): its rate lanes wait out the pause while it holds nothing else. What it lent is lent no more.
   */
  enterAgain(steps: readonly LaneStep[]): void {
    this.leave();
    this.lentLanes = undefined;
    this.enter(this.source!, steps);
  }

  /** A lane granted the permit this call asked for: a grant that came later carries on from the next lane. */
  granted(): void {
    if (this.taken > this.asking) this.take(this.asking + 1, this.asking);
  }

  /** A lane store shared by a fleet lost a permit this call held or waited for (or a budget lane refused it). */
  lost(error: Error): void {
    this.record.cutOff(error);
  }

  /** An adaptive lane's limit moved on what this call reported. */
  limitChanged(change: LimitChange): void {
    const { batch, call, index } = this.record;
    if (!batch.watched) return;
    const { key: lane, limit, previous, cause } = change;
    batch.report({ type: 'limit-changed', callId: call.callId, tool: call.tool, index, at: batch.scheduler.now(), lane, limit, previous, cause });
  }

  /** Tells the adaptive and budget lanes among the permits held how the work went: `signal`, or read from `outcome`. */
  tell(signal: LaneSignal | Outcome): void {
    if (this.taken > 0) tellLanes(this.permits, this.taken, signal);
  }

  /** The body starts: the rate lanes among the permits held spend their admissions now (a rate bounds body starts). */
  started(): void {
    const { permits } = this;
    for (let i = 0; i < this.taken; i++) permits[i]!.started?.();
  }

  /** Tells the budget lanes among the permits held what the work cost in all. */
  charge(total: number): void {
    chargeLanes(this.permits, this.taken, total);
  }

  // Takes the lanes from `first` on, in order; `waitedAt`: the last lane that made the call wait (-1: none yet).
  private take(first: number, waitedAt = -1): void {
    const { steps, record } = this;
    const { batch } = record;
    for (let i = first; i < steps.length; i++) {
      const { store, key, limit, party, loan, kind } = steps[i]!;
      let permit: Permit;
      this.asking = i;
      // A stop set off inside the store (a watcher of its lanes, say) waits until the permit is
      // recorded here, so the teardown it brings leaves that permit too.
      batch.deferStop();
      try {
        if (loan !== undefined) permit = enterWithLoan(loan, store, key, limit, this, party);
        else permit = kind === plainLane || kind === undefined ? store.enter(key, limit, this, party) : enterKind(store, key, kind, this, party)!;
      } catch (error) {
        batch.allowStop();
        // A store that cannot take the request: the call fails, never started, and leaves what it holds.
        record.call.turnedAway?.(error);
        record.refuse(toErrorInfo(error));
        return;
      }
      if (record.ended) {
        // Torn down while in the store: what it had stored is back already, and this permit goes back too, never stored.
        batch.allowStop();
        leaveOne(permit);
        return;
      }
      this.permits[this.taken++] = permit;
      batch.allowStop();
      // Something the grant set off (a watcher of the lanes, say) may have ended this call
      // already, its teardown run: leave what it holds and go no further.
      if (record.ended) {
        this.leave();
        return;
      }
      if (!permit.holding) {
        if (batch.watched) batch.report({ type: 'queued', callId: record.call.callId, tool: record.call.tool, index: record.index, lane: key, at: batch.scheduler.now() });
        return;
      }
    }
    // A partner said "slow down" while the call waited behind its tool's rate lane (or before its
    // steps knew of the pause): it waits out the pause holding nothing, as a new call would.
    const again = this.source?.pausedSteps?.(record, steps, waitedAt);
    if (again !== undefined) {
      // Never started: a budget gives back what it took, a learning rate lane does not count it.
      this.tell('unstarted');
      this.enterAgain(again);
      return;
    }
    record.start();
  }

  /** Leaves every permit now (a lent one once no nested call runs in it). Leaving twice does nothing. */
  leave(): void {
    const { permits, loans } = this;
    for (let i = this.taken - 1; i >= 0; i--) {
      const permit = permits[i]!;
      const loan = loans[i];
      if (loan === undefined) leaveOne(permit);
      else loan.recall(() => leaveOne(permit));
    }
    // Left: the batch need not keep them.
    this.taken = 0;
    this.permits = noPermits;
    this.loans = noLoans;
  }

  /**
   * The call ended while its body still runs (an overrun): a lane counts bodies that actually
   * run, so the permits stay until the body is over (`bodyOver`), or until abandonAfterSeconds
   * gives up on it. Keeping twice arms one timer.
   */
  keep(): void {
    if (this.taken === 0 || this.grace !== undefined) return;
    const grace = this.source?.abandonAfterSeconds;
    if (grace !== undefined) this.grace = scheduleAfter(this.record.batch.scheduler, () => CallLanes.abandon(this), grace * 1000);
  }

  /** The overrunning body is over: its permits go back, told first so a watcher reads them going back before a waiter starts in them. */
  bodyOver(): void {
    this.grace?.unsubscribe();
    this.grace = undefined;
    if (this.taken === 0) return;
    this.left(false);
    this.leave();
  }

  // The grace ran out on an overrunning body: its permits go back while it still runs.
  private static abandon(lanes: CallLanes): void {
    if (lanes.grace === undefined) return;
    lanes.grace = undefined;
    lanes.left(true);
    lanes.leave();
  }

  private left(abandoned: boolean): void {
    const { batch, call, index } = this.record;
    if (batch.watched) batch.report({ type: 'released', callId: call.callId, tool: call.tool, index, at: batch.scheduler.now(), abandoned });
  }

  /** The shared lanes a nested run of this call's body may run in: this call's permits, lent, and its callers' loans. */
  lend(): ReadonlyMap<string, Loan> {
    if (this.lentLanes !== undefined) return this.lentLanes;
    const { steps, taken, source, record } = this;
    const lanes = new Map(source?.lent ?? noLent);
    // Only while the call holds its permits and its body runs: a call that is over lends nothing of its own.
    if (source !== undefined && taken > 0 && record.running) {
      const loans = (this.loans = new Array<Loan | undefined>(taken));
      for (let i = 0; i < taken; i++) {
        const step = steps[i]!;
        if (step.store !== source.sharedLanes) continue;
        const loan = new Loan(step.key, this.permits[i]!.fence);
        loans[i] = loan;
        lanes.set(step.key, loan);
      }
    }
    return (this.lentLanes = lanes);
  }

  /**
   * The fencing token of the narrowest fleet lane the call holds: its identical-arguments lane,
   * else its tool lane, else the lane its declaration names (an MCP server's, shared by all of
   * the server's tools), else its tenant lane.
   */
  fence(): string | undefined {
    const { steps, permits } = this;
    let tool: string | undefined;
    let own: string | undefined;
    let tenant: string | undefined;
    for (let i = 0; i < this.taken; i++) {
      const fence = permits[i]!.fence;
      if (fence === undefined) continue;
      const { key } = steps[i]!;
      if (key.startsWith('args:')) return fence;
      if (key.startsWith('tool:')) tool = fence;
      else if (key.startsWith('tenant:')) tenant = fence;
      else own = fence;
    }
    return tool ?? own ?? tenant;
  }

  /** The fencing token of every fleet lane the call holds, by lane key (frozen). */
  fences(): Readonly<Record<string, string>> {
    const fences: Record<string, string> = {};
    for (let i = 0; i < this.taken; i++) {
      const fence = this.permits[i]!.fence;
      if (fence !== undefined) put(fences, this.steps[i]!.key, fence);
    }
    return Object.freeze(fences);
  }
}
