// The fan-out: every call of a phase enters its lanes at once, its concurrency coming from the
// lanes it must take (tenant rate -> tool rate -> turn's rates -> tenant -> turn -> turn-tool ->
// tool -> its own -> identical arguments), not from a count of its own.
// A call runs once every lane granted it a permit; its permits go back when it ends (or, for a
// body that still runs, when that body settles). mergeMap-style, with plain state: a record per
// call, no inner Observable or Subscriber per call. The rate lanes come first, so a call holds
// no permit while it waits on a clock; a partner's "slow down" pauses its tool's rate lane.
import type { OperatorFunction, SchedulerLike, Subscriber } from 'rxjs';
import { canonicalJson } from '../../canonical.js';
import { ConcurrencyConfig, isSlower, own, tenantRate, tighter, type RateOptions } from '../../config/index.js';
import type { ErrorInfo } from '../../errors.js';
import { RatedStore, type BudgetSpec, type LaneStore, type Loan } from '../../lanes/index.js';
import type { LoopMonitor } from '../../tools/index.js';
import type { BatchScope } from '../batchScope.js';
import type { CallBody } from '../callBody.js';
import { plainLane, type LaneKind, type LaneStep } from '../callLanes.js';
import { CallRecord, type CallNews, type LaneEntry } from '../records.js';
import type { BatchCall, BatchOptions, Outcome } from '../types.js';
import { Stage, staged } from '../../directSubscriber.js';

// ---- The rate lanes a call takes before any concurrency lane, and what a partner's "slow down" does to them ----

// Tool names are few: each key is made once, as a call start asks for it.
const rateKeys = new Map<string, string>();

// The key of tool `tool`'s rate lane, the one a partner's "slow down" pauses.
function toolRateKey(tool: string): string {
  let key = rateKeys.get(tool);
  if (key === undefined) {
    key = `rate:tool:${tool}`;
    if (rateKeys.size < 4096) rateKeys.set(tool, key);
  }
  return key;
}

// A store's rate lanes at each rate, made once per rate (and per store) for a fan-out.
class RateViews {
  private readonly views = new Map<RateOptions | undefined, RatedStore>();
  constructor(
    private readonly store: LaneStore,
    private readonly scheduler: SchedulerLike,
  ) {}

  of(rate: RateOptions | undefined): RatedStore {
    let view = this.views.get(rate);
    if (view === undefined) {
      view = new RatedStore(this.store, rate, this.scheduler);
      this.views.set(rate, view);
    }
    return view;
  }
}

// A rate lane step: one admission at a time.
function rateStep(store: LaneStore, key: string, party: string): LaneStep {
  return { store, key, limit: 1, party, loan: undefined };
}

// A call failed with a partner's "slow down" (`RateLimitedError`, or an error with HTTP status
// 429): its tool's rate lane admits nothing new for `retryAfterSeconds`, wherever the store is
// shared. Calls waiting for the lane wait on; they do not fail.
function slowDown(store: LaneStore, outcome: Outcome, scheduler: SchedulerLike): void {
  if (outcome.kind !== 'error' || outcome.stopped !== undefined) return;
  // A RateLimitedError, or any error that carries a partner's 429 (a wire adapter's ProviderHttpError).
  if (outcome.error.name !== 'RateLimitedError' && outcome.error.status !== 429) return;
  pauseTool(store, outcome.tool, outcome.error, scheduler);
}

// Pauses tool `tool`'s rate lane for the error's `retryAfterSeconds`; true if the store now says it is paused.
function pauseTool(store: LaneStore, tool: string, error: ErrorInfo, scheduler: SchedulerLike): boolean {
  const seconds = error.retryAfterSeconds;
  if (seconds === undefined || !(seconds > 0) || store.pause === undefined) return false;
  const key = toolRateKey(tool);
  store.pause(key, seconds, error.message, scheduler);
  return store.paused?.(key) === true;
}

// ---- The fan-out ----

/** The lanes calls enter, and what else entering them needs: the batch options of the same names. */
export type LanePlan = Pick<BatchOptions, 'concurrency' | 'shared' | 'tenant' | 'lent' | 'monitor'>;

const noSteps: readonly LaneStep[] = [];

// The runner's cost budget per tenant, when it declared one and its store keeps budgets.
function costBudgetOf(lanes: LaneStore, concurrency: ConcurrencyConfig): BudgetSpec | undefined {
  const budget = concurrency.perTenantBudget;
  if (budget?.cost === undefined || lanes.enterBudget === undefined) return undefined;
  return { measure: 'cost', limit: budget.cost, perSeconds: budget.perSeconds };
}
const noLoans: ReadonlyMap<string, Loan> = new Map();

// A bound the turn adds on top of a shared lane: only when it is tighter than the shared one.
function narrower(turn: number | undefined, shared: number | undefined): number | undefined {
  return turn !== undefined && (shared === undefined || turn < shared) ? turn : undefined;
}

// A lane of the batch's own can only bind if it has fewer permits than the calls that may take
// it; one that cannot is not taken at all (it would queue nobody, and costs a permit per call).
// While calls may still arrive, every bound may bind.
function bindingOver(limit: number | undefined, calls: number | undefined): number | undefined {
  return limit !== undefined && (calls === undefined || limit < calls) ? limit : undefined;
}

// One subscription of inLanes: the entry its records report to, and the lanes each tool's
// calls take, worked out once per tool.
class FanOut extends Stage<CallRecord, CallNews> implements LaneEntry {
  readonly lent: ReadonlyMap<string, Loan>;
  readonly monitor: LoopMonitor | undefined;
  readonly abandonAfterSeconds: number | undefined;
  // The shared lanes; for a batch given none, its own table, known from its first record.
  private shared: { readonly lanes: LaneStore; readonly concurrency: ConcurrencyConfig } | undefined;
  private readonly turn: ConcurrencyConfig;
  private readonly tenant: string;
  // The lanes of a parallel-safe call depend only on its tool: most batches call one tool, kept
  // in two fields; a map is made for a second.
  private firstTool: string | undefined = undefined;
  private firstSteps: readonly LaneStep[] = noSteps;
  private stepsByTool: Map<string, readonly LaneStep[]> | undefined = undefined;
  // How many of the batch's calls go to each tool (counted once, when first asked).
  private perTool: Map<string, number> | undefined = undefined;
  // The rate lanes of the shared store and of the turn's own table, at each rate (made when first needed).
  private sharedRates: RateViews | undefined = undefined;
  private turnRates: RateViews | undefined = undefined;

  // How many records entered here are not yet over, and whether the source is done. (Which
  // ones, the batch's records say: a teardown with some still open looks them up there.)
  open = 0;
  sourceDone = false;
  // Set once the teardown began: no record of this fan-out starts any more.
  closing = false;
  // The batch, known from the first record.
  private batch: BatchScope | undefined = undefined;

  constructor(plan: LanePlan, out: Subscriber<CallNews>) {
    super(out);
    out.add(() => this.teardown());
    const turn = plan.concurrency ?? new ConcurrencyConfig();
    this.turn = turn;
    this.shared = plan.shared;
    this.tenant = plan.tenant ?? 'default';
    this.lent = plan.lent ?? noLoans;
    this.monitor = plan.monitor;
    this.abandonAfterSeconds = turn.abandonAfterSeconds;
  }

  /** Read only by a record that took its lanes, so once they are known. */
  get sharedLanes(): LaneStore {
    return this.shared!.lanes;
  }

  started(body: CallBody): void {
    this.out.next(body);
  }

  ending(record: CallRecord): void {
    // A partner's "slow down" pauses the tool's rate lane before its permits go back, so no call waiting for them starts.
    if (record.outcome?.kind === 'error' && this.shared !== undefined) slowDown(this.shared.lanes, record.outcome, record.batch.scheduler);
  }

  ended(record: CallRecord): void {
    this.out.next(record);
  }

  done(_record: CallRecord): void {
    this.open--;
    if (this.open === 0 && this.sourceDone) this.out.complete();
  }

  private enter(record: CallRecord): void {
    // A stopped or closed batch enters nothing more: the call waits to be classified, never
    // started. Nor does a fan-out torn down: a phase handing over its calls from inside its
    // subscribe goes on after its subscriber left (from a watcher of a grant), and nothing would
    // leave what the call took.
    if (record.batch.stopped !== undefined || record.batch.closed || this.closing) return;
    this.batch ??= record.batch;
    this.open++;
    record.enter(this);
  }

  protected take(record: CallRecord): void {
    // Decided before it got here (a cache stage, say): it passes on as it is.
    if (record.outcome !== undefined) this.out.next(record);
    else this.enter(record);
  }

  protected override sourceCompleted(): void {
    this.sourceDone = true;
    if (this.open === 0) this.out.complete();
  }

  // Ends the calls still in their lanes here: when `out` leaves, which may be long after the phase ended.
  private teardown(): void {
    // Set before any record leaves its permits, which could grant them to another record here.
    this.closing = true;
    if (this.open === 0 || this.batch === undefined) return;
    // Together: the fan-out is closing (start() checks), so a permit left by one starts no other
    // (its body would run after the subscriber left).
    for (const record of this.batch.records) if (record.inFlightFor(this)) record.teardown();
  }

  lanesOf(record: CallRecord): readonly LaneStep[] {
    const { call, parallelSafe: safe, batch } = record;
    if (safe && call.tool === this.firstTool) return this.firstSteps;
    const known = safe ? this.stepsByTool?.get(call.tool) : undefined;
    if (known !== undefined) return known;
    const { turn, tenant } = this;
    const shared = (this.shared ??= { lanes: batch.ownLanes, concurrency: turn });
    const expected = batch.expected;
    const steps: LaneStep[] = [];
    // The rate lanes first: a call waits on a clock before it holds any permit.
    this.addRateSteps(steps, call.tool, tenant);
    // Budget lanes come before any concurrency permit (laneKinds.ts): a call they cannot cover holds nothing.
    const costBudget = costBudgetOf(shared.lanes, shared.concurrency);
    if (costBudget !== undefined) this.addStep(steps, shared.lanes, `budget:cost:${tenant}`, 1, tenant, { adaptive: undefined, budget: costBudget, amount: call.cost ?? 0 });
    this.addStep(steps, shared.lanes, `tenant:${tenant}`, shared.concurrency.perTenant, tenant);
    const turnLimit = bindingOver(tighter(turn.maxConcurrentTools, narrower(turn.perTenant, shared.concurrency.perTenant)), expected);
    // An adaptive tool lane replaces the fixed perTool number; an agent's narrower max bounds its own turn.
    // A store without adaptive lanes takes the lane at its max.
    const adaptive = own(shared.concurrency.perToolAdaptive, call.tool);
    const sharedTool = adaptive === undefined ? own(shared.concurrency.perTool, call.tool) : adaptive.max;
    const toolBound = tighter(narrower(own(turn.perTool, call.tool), sharedTool), narrower(own(turn.perToolAdaptive, call.tool)?.max, adaptive?.max));
    const turnTool = toolBound === undefined ? undefined : bindingOver(toolBound, batch.given === undefined ? undefined : this.callsOf(batch.given, call.tool));
    if (turnLimit !== undefined || turnTool !== undefined) {
      const local = batch.turnLanes;
      this.addStep(steps, local, 'turn', turnLimit, '');
      this.addStep(steps, local, `turn-tool:${call.tool}`, turnTool, '');
    }
    const adaptiveKind = adaptive === undefined || shared.lanes.enterAdaptive === undefined ? plainLane : { adaptive, budget: undefined, amount: 0 };
    this.addStep(steps, shared.lanes, `tool:${call.tool}`, sharedTool, tenant, adaptiveKind);
    // A lane the call names for itself (its server's), shared like the tool lane.
    if (call.lane !== undefined) this.addStep(steps, shared.lanes, call.lane.key, call.lane.limit, tenant);
    if (!safe) this.addStep(steps, shared.lanes, `args:${call.tool}:${canonicalJson(call.args)}`, 1, tenant);
    // Copied to its exact length: an array grown by push keeps spare room, and every call of the
    // tool holds this one until the batch ends.
    const exact = steps.length === 0 ? noSteps : steps.slice();
    if (safe && this.firstTool === undefined) {
      this.firstTool = call.tool;
      this.firstSteps = exact;
    } else if (safe) (this.stepsByTool ??= new Map()).set(call.tool, exact);
    return exact;
  }

  pausedSteps(record: CallRecord, steps: readonly LaneStep[], waitedAt: number): readonly LaneStep[] | undefined {
    const lanes = this.shared?.lanes;
    if (lanes?.paused === undefined) return undefined;
    const { tool } = record.call;
    const key = toolRateKey(tool);
    if (!lanes.paused(key)) return undefined;
    // Just admitted by the paused lane itself, nothing after it waited: that lane decided (a fleet's server, say).
    const at = steps.findIndex((step) => step.key === key);
    if (at !== -1 && waitedAt <= at) return undefined;
    this.forget(tool);
    return this.lanesOf(record);
  }

  /** An idempotent call refused with "slow down" enters its lanes again once when the turn's config says `retryRateLimited`, after the pause. */
  takeAgain(record: CallRecord, error: ErrorInfo): boolean {
    const { shared } = this;
    if (this.turn.retryRateLimited !== true || shared === undefined) return false;
    const { tool } = record.call;
    if (!pauseTool(shared.lanes, tool, error, record.batch.scheduler)) return false;
    this.forget(tool);
    return true;
  }

  // The tool's lanes change (its rate lane is paused): worked out again on the next ask.
  private forget(tool: string): void {
    if (this.firstTool === tool) {
      this.firstTool = undefined;
      this.firstSteps = noSteps;
    }
    this.stepsByTool?.delete(tool);
  }

  // Has the shared store's rate lane `key` learn its pace (an adaptive tool's `pace: true`); false if the store cannot.
  private learnRate(key: string): boolean {
    const lanes = this.shared!.lanes;
    if (lanes.learnRate === undefined) return false;
    lanes.learnRate(key, this.batch!.scheduler);
    return true;
  }

  // The shared store's rate lanes at `rate` (`turn`: the batch's own table's), made once per fan-out.
  private rateView(turn: boolean, rate: RateOptions | undefined): LaneStore {
    const batch = this.batch!;
    if (turn) return (this.turnRates ??= new RateViews(batch.turnLanes, batch.scheduler)).of(rate);
    return (this.sharedRates ??= new RateViews(this.shared!.lanes, batch.scheduler)).of(rate);
  }

  /**
   * Adds a call's rate lanes to `steps`, in the fixed order: its tenant's, its tool's, then the
   * turn's own where the agent narrowed them (in the batch's table, so they bound this turn only).
   * A tool with no rate declared takes its rate lane only while the store says it is paused, or
   * always when it is adaptive with `pace: true` (the lane learns the partner's pace): a call with
   * no rate lane pays nothing.
   */
  private addRateSteps(steps: LaneStep[], tool: string, tenant: string): void {
    const { concurrency: sharedConfig, lanes: sharedLanes } = this.shared!;
    const turnConfig = this.turn;
    const tenantRateOf = tenantRate(sharedConfig.perTenantRate, tenant);
    if (tenantRateOf !== undefined) steps.push(rateStep(this.rateView(false, tenantRateOf), `rate:tenant:${tenant}`, tenant));
    const toolRate = own(sharedConfig.perToolRate, tool);
    const key = toolRateKey(tool);
    // An adaptive tool that learns its partner's pace takes its rate lane always: the lane counts what it admits.
    const learning = toolRate === undefined && own(sharedConfig.perToolAdaptive, tool)?.pace === true && this.learnRate(key);
    if (toolRate !== undefined || learning || sharedLanes.paused?.(key) === true) steps.push(rateStep(this.rateView(false, toolRate), key, tenant));
    if (turnConfig === sharedConfig) return;
    const turnTenant = tenantRate(turnConfig.perTenantRate, tenant);
    if (isSlower(turnTenant, tenantRateOf)) steps.push(rateStep(this.rateView(true, turnTenant), `turn-rate:tenant:${tenant}`, ''));
    const turnTool = own(turnConfig.perToolRate, tool);
    if (isSlower(turnTool, toolRate)) steps.push(rateStep(this.rateView(true, turnTool), `turn-rate:tool:${tool}`, ''));
  }

  private callsOf(calls: readonly BatchCall[], tool: string): number {
    if (this.perTool === undefined) {
      this.perTool = new Map();
      for (const { tool: name } of calls) this.perTool.set(name, (this.perTool.get(name) ?? 0) + 1);
    }
    return this.perTool.get(tool) ?? 0;
  }

  private addStep(steps: LaneStep[], store: LaneStore, key: string, limit: number | undefined, party: string, kind: LaneKind = plainLane): void {
    if (limit === undefined) return;
    // A shared lane a caller lends (a nested run): its calls may run in the lent permit. A budget is never lent.
    const loan = store === this.sharedLanes && kind.budget === undefined ? this.lent.get(key) : undefined;
    steps.push({ store, key, limit, party, loan, kind });
  }
}

/**
 * Enters every record it receives in its lanes at once, taken in one fixed order:
 * its rate lanes (tenant rate, tool rate, then the turn's own rates where the agent narrowed them),
 * then tenant, turn, turn-tool, tool, the call's own `lane` if it names one (its server's), then (for
 * a call that is not parallel-safe) its identical-arguments lane. The turn and turn-tool lanes
 * are the batch's own, taken only where they can bind. A call that fails with `RateLimitedError`
 * (or an error of HTTP status 429) pauses its tool's rate lane for its `retryAfterSeconds`.
 * The concurrency is the lanes': a call runs when every lane granted it a permit. Emits a
 * call's `CallBody` when its body starts (so the ceilings can time it from there) and its
 * `CallRecord` when its outcome is decided; completes once its source completed and every record
 * it entered is over. Records already decided, or refused at the gate, end at once without their
 * lanes.
 * Unsubscribing ends every call where it stands: bodies aborted, permits left (a body that
 * still runs keeps its own until it settles).
 *
 * ## Example
 * ```ts
 * const lanes = new LaneTable();
 * const concurrency = new ConcurrencyConfig({ perTool: { search: 2 } });
 * phase$.pipe(inLanes({ concurrency, shared: { lanes, concurrency }, tenant: 'acme' }));
 * // at most two searches at once, across every batch that shares `lanes`
 * ```
 */
export function inLanes(plan: LanePlan = {}): OperatorFunction<CallRecord, CallNews> {
  if (plan.concurrency !== undefined && !(plan.concurrency instanceof ConcurrencyConfig)) {
    throw new TypeError('inLanes: plan.concurrency must be a ConcurrencyConfig');
  }
  return staged((out) => new FanOut(plan, out));
}
