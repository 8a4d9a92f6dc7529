// The heart: one model turn's calls -> one outcome per call, in call order.
//
//   phases, one after another -> the gate, one call at a time in call order
//   -> dispatch inside the lanes, all of a phase at once -> outcomes in finish order
//   -> reorder to call order -> settle, one at a time in call order
//
// This is the pipeline docs/concurrency.md draws with RxJS operators (concatMap over the
// phases, concatMap for the gate, a mergeMap fan-out, a scan-like reorder, concatMap to
// settle), driven here by one state machine per batch: the same steps in the same order,
// without an operator subscriber per step, which is most of what a batch costs
// (docs/performance.md).
//
// A stop (FAIL_RUN on a failure, a cancel, a deadline) tears the dispatches down, which
// gives every permit back and aborts every body in flight, then classifies each call
// that had not settled by what it had done: never dispatched, or stopped in flight.
import { asyncScheduler, from, isObservable, Observable, type ObservableInput, type Observer, type SchedulerLike, type Subscribable, type Subscription, type Unsubscribable } from 'rxjs';
import { canonicalJson } from '../canonical.js';
import { ConcurrencyConfig, own, tighter } from '../config/index.js';
import { DeadlineExceededError, ToolTimedOutError, toErrorInfo, type ErrorInfo } from '../errors.js';
import { LaneTable, type LaneStore, type Permit } from '../lanes/index.js';
import { Ceilings } from './ceilings.js';
import { assignDelta } from './deltas.js';
import { InvocationAbortedError, isPromiseLike, reportUnhandled } from './invocation.js';
import { failedBy, stoppedOutcome } from './stops.js';
import type { LoopMonitor, Watch } from '../tools/index.js';
import type { ActivitySink, BatchCall, BatchOptions, CallActivity, Delta, GateVerdict, InvokeContext, Outcome, StopReason } from './types.js';

// Where each call stands; a stop classifies by it.
const WAITING = 0; // not yet through the gate
const QUEUED = 1; // through the gate, waiting for its lanes
const RUNNING = 2; // every lane granted, body invoked
const SETTLED = 3; // has its outcome

const noLanes: ReadonlySet<string> = new Set();
const noSteps: readonly LaneStep[] = [];
const noPermits: Array<Permit | undefined> = [];

interface LaneStep {
  readonly store: LaneStore;
  readonly key: string;
  readonly limit: number;
  readonly party: string;
  // The store is a plain LaneTable (see isPlainTable): it is handed the call's record, whose
  // granted() carries on, instead of a closure per call.
  readonly direct: boolean;
}

// A bound the turn adds on top of a shared lane: only when it is tighter than the shared one.
function narrower(turn: number | undefined, shared: number | undefined): number | undefined {
  return turn !== undefined && (shared === undefined || turn < shared) ? turn : undefined;
}

// A lane of the batch's own can only bind if it has fewer permits than the calls that may take
// it; one that cannot is not taken at all (it would queue nobody, and costs a permit per call).
function bindingOver(limit: number | undefined, calls: number): number | undefined {
  return limit !== undefined && limit < calls ? limit : undefined;
}

// A LaneTable as the library makes it: not a subclass, and its enter not replaced on the
// instance (a wrapper for metrics, say) or by a proxy. Such a wrapper may call onGrant itself,
// so only a plain table is handed the call's record in place of a function.
function isPlainTable(store: LaneStore): boolean {
  return Object.getPrototypeOf(store) === LaneTable.prototype && store.enter === LaneTable.prototype.enter;
}

// Gives a permit back; one failing to go back (a remote store, say) must not keep the others.
function leave(permit: Permit): void {
  try {
    permit.leave();
  } catch (error) {
    reportUnhandled(error);
  }
}

// Ends an Observable body's subscription. A teardown of the body's that throws must not cut
// the call's bookkeeping short (its outcome undelivered, its permits held): the outcome stands,
// and the error is reported the way RxJS reports one nobody can receive.
function unsubscribeBody(running: Unsubscribable): void {
  try {
    running.unsubscribe();
  } catch (error) {
    reportUnhandled(error);
  }
}

function verdictError(verdict: unknown): ErrorInfo | undefined {
  if (verdict === undefined || verdict === null) return undefined;
  if (typeof verdict === 'string') return { name: 'ToolRejectedError', message: verdict };
  return toErrorInfo(verdict);
}

function isOutcome(value: unknown): value is Outcome {
  return value !== null && typeof value === 'object' && 'kind' in value && 'index' in value && !isObservable(value) && !isPromiseLike(value);
}

// What a body is handed. Its signal and held lanes are getters on the prototype: the
// AbortController and the set are made only if the body asks, and a class whose instances all
// share one hidden class costs a few nanoseconds to make. (Defining them on each instance, so
// that a spread copy keeps them, costs about 0.1 µs per property per call; the runner's
// ToolContext, which tool bodies get, does that for `signal`, and builds on this one.)
class CallContext implements InvokeContext {
  readonly record: (delta: Delta) => void;
  #controller: AbortController | undefined = undefined;
  readonly #steps: readonly LaneStep[];
  readonly #sharedLanes: LaneStore;
  readonly #outer: ReadonlySet<string>;

  constructor(record: (delta: Delta) => void, steps: readonly LaneStep[], sharedLanes: LaneStore, outer: ReadonlySet<string>) {
    this.record = record;
    this.#steps = steps;
    this.#sharedLanes = sharedLanes;
    this.#outer = outer;
  }

  get signal(): AbortSignal {
    return (this.#controller ??= new AbortController()).signal;
  }

  /** The shared lanes this call stands in, its caller's included: a nested run does not take them again. */
  get held(): ReadonlySet<string> {
    const taken = this.#steps.filter((step) => step.store === this.#sharedLanes).map((step) => step.key);
    return taken.length === 0 ? this.#outer : new Set([...this.#outer, ...taken]);
  }

  /** Aborts the body's signal, if it ever asked for it. */
  abort(reason: Error): void {
    this.#controller?.abort(reason);
  }
}

/**
 * One call of a batch, from the gate to its outcome: its lanes taken in order, then its body,
 * under its ceiling and the batch's deadline. The permits go back as soon as the call settles,
 * and again (harmlessly) in the teardown, so every ending gives them back. A record per call,
 * with methods, rather than a dozen closures per call: a batch of thousands is mostly these.
 */
class CallRun {
  readonly parallelSafe: boolean;
  status = WAITING;
  /** What the gate said; set only when it refused. */
  refused: ErrorInfo | undefined = undefined;
  /** True from dispatch until the call is over (or torn down). */
  active = false;
  // The lanes this call takes, in order.
  private steps: readonly LaneStep[] = noSteps;
  // The permits it holds, in the order taken: `taken` of them. Sized once the lanes are known
  // (a few at most), so no call carries a grown array's spare room.
  private permits: Array<Permit | undefined> = noPermits;
  private taken = 0;
  // The lane asked last; a grant that comes later carries on from the next one.
  private asking = 0;
  // What the body was handed (its AbortController, if it asked for its signal).
  private invoked: CallContext | undefined = undefined;
  // An Observable body's subscription.
  private running: Unsubscribable | undefined = undefined;
  // The loop monitor's watch over this call's body.
  private watch: Watch | undefined = undefined;

  // Set once the call has its outcome (or was torn down): later answers are ignored.
  private settled = false;
  // Set once the call is over or torn down.
  private closed = false;
  // What the call recorded; kept only if it succeeds.
  private delta: Record<string, unknown> | undefined = undefined;
  // What a lane store other than a plain LaneTable is handed to call on a grant; made once, if one is asked.
  private onGrant: (() => void) | undefined = undefined;

  constructor(
    private readonly batch: BatchRun,
    readonly call: BatchCall,
    readonly index: number,
  ) {
    this.parallelSafe = call.parallelSafe !== false;
  }

  // The body, given what it is handed: a function of the call, so the monitor can run it without a closure.
  private static invoke(run: CallRun): unknown {
    return run.call.invoke?.(run.invoked!);
  }

  /** @internal A call that has its outcome (or was torn down): its ceilings no longer matter. */
  static stale(run: CallRun): boolean {
    return run.settled;
  }

  // The call's own ceiling (its tool's perToolSeconds) expired: the call fails, its body aborted.
  // Functions of the call, like invoke, so arming a ceiling makes no closure. Ceilings are not
  // cancelled when a call settles: one that comes due after does nothing.
  private static outran(run: CallRun): void {
    if (run.settled) return;
    const { tool, idempotent } = run.call;
    const seconds = own(run.batch.turn.perToolSeconds, tool)!;
    run.invoked?.abort(new InvocationAbortedError(`${tool} outran its ${seconds}s ceiling`));
    run.fail(new ToolTimedOutError(tool, seconds, idempotent === true));
  }

  // The batch's toolCallSeconds expired on this call: the whole batch stops.
  private static overdue(run: CallRun): void {
    if (run.settled) return;
    const { batch, call } = run;
    const error = new DeadlineExceededError('toolCallSeconds', batch.toolCallSeconds!, call);
    batch.stop({ kind: 'deadline', why: error.message, error: toErrorInfo(error), callId: call.callId });
  }

  dispatch(): void {
    const refused = this.call.rejected ?? this.refused;
    if (refused !== undefined) {
      this.finish(this.failure(false, refused));
      return;
    }
    const steps = (this.steps = this.batch.lanesOf(this));
    if (steps.length > 0) this.permits = new Array<Permit | undefined>(steps.length);
    this.status = QUEUED;
    this.acquire(0);
  }

  /** @internal A lane granted the permit this call asked for: a grant that came later carries on from the next lane. */
  granted(): void {
    if (this.taken > this.asking) this.acquire(this.asking + 1);
  }

  /** Takes the lanes from `first` on, in order. Each permit is stored before the next lane is asked, so the teardown always knows every permit held. */
  private acquire(first: number): void {
    const { steps, batch } = this;
    for (let i = first; i < steps.length; i++) {
      const { store, key, limit, party, direct } = steps[i]!;
      let permit: Permit;
      this.asking = i;
      // A stop set off inside the store (a watcher of its lanes, say) waits until the permit is
      // recorded here, so the teardown it brings gives that permit back too.
      batch.hold();
      try {
        // Granted later: granted() carries on from the next lane. Granted at once: the loop carries on.
        permit = direct ? (store as LaneTable).enter(key, limit, this, party) : store.enter(key, limit, (this.onGrant ??= () => this.granted()), party);
      } catch (error) {
        batch.letGo();
        // A store that cannot take the request: the call fails, never dispatched, and gives back what it holds.
        this.finish(this.failure(false, toErrorInfo(error)));
        return;
      }
      if (this.closed) {
        // Torn down while in the store (its subscriber left from a watcher of the lanes, say):
        // what it had stored is back already, and this permit goes back too, never stored.
        batch.letGo();
        leave(permit);
        return;
      }
      this.permits[this.taken++] = permit;
      batch.letGo();
      // Something the grant set off (a watcher of the lanes, say) may have stopped this call
      // already, its teardown run: give back what it holds and go no further.
      if (this.closed) {
        this.release();
        return;
      }
      if (!permit.holding) {
        if (batch.activity?.observed === true) {
          batch.tell({ type: 'queued', callId: this.call.callId, tool: this.call.tool, index: this.index, lane: key, at: batch.scheduler.now() });
        }
        return;
      }
    }
    this.start();
  }

  private start(): void {
    const { batch, call } = this;
    // A permit given back while the batch is being torn down can reach a waiter of this
    // same batch before its own teardown runs: such a call must not start now.
    if (batch.stopped !== undefined || batch.stopping || batch.closing || this.settled) return;
    batch.report(this);
    // The report may have set off a stop: then the body must not run.
    if (batch.stopped !== undefined || this.closed) return;
    this.status = RUNNING;
    const seconds = own(batch.turn.perToolSeconds, call.tool);
    if (seconds !== undefined) batch.arm(seconds * 1000, CallRun.outran, this);
    if (batch.toolCallSeconds !== undefined) batch.arm(batch.toolCallSeconds * 1000, CallRun.overdue, this);
    const context = (this.invoked = new CallContext((patch) => this.record(patch), this.steps, batch.shared.lanes, batch.held));
    const onError = (error: unknown): void => this.fail(error);
    let produced: unknown;
    try {
      const { monitor } = batch;
      if (monitor === undefined) produced = call.invoke?.(context);
      else {
        // Known before the body runs, so a synchronous stall's failure (halt) ends the watch too.
        this.watch = monitor.open(call.tool, onError);
        produced = monitor.run(this.watch, CallRun.invoke, this);
      }
    } catch (error) {
      this.fail(error);
      return;
    }
    if (this.settled) {
      // Failed (a synchronous stall) or torn down while the body ran: its answer no longer
      // counts, but a Promise's rejection must still be handled, or Node ends the process.
      try {
        if (isPromiseLike(produced)) produced.then(undefined, () => undefined);
      } catch {
        // A hostile thenable: the call has its outcome, and there is nothing left to handle.
      }
      return;
    }
    // Reading the answer can throw (a throwing getter on `then`, a Proxy's traps), and so can a
    // thenable's `then` or an Observable's `subscribe`: the call then fails with what was thrown,
    // as `await` would fail on such a value. Only a plain value is taken outside the guard.
    try {
      if (isObservable(produced)) {
        // Its first value is the result; an Observable that completes empty gives undefined.
        const running = produced.subscribe({ next: (result) => this.succeed(result), error: onError, complete: () => this.succeed(undefined) });
        if (this.settled) unsubscribeBody(running);
        else this.running = running;
        return;
      }
      if (isPromiseLike(produced)) {
        produced.then((result: unknown) => this.succeed(result), onError);
        return;
      }
    } catch (error) {
      this.fail(error);
      return;
    }
    this.succeed(produced);
  }

  private record(patch: Delta): void {
    if (this.settled) return; // too late: the call has its outcome
    if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) {
      throw new TypeError(`record(delta) expects an object of state keys, got ${patch === null ? 'null' : typeof patch}`);
    }
    this.delta = assignDelta(this.delta ?? {}, patch);
  }

  private succeed(result: unknown): void {
    this.finish({ index: this.index, callId: this.call.callId, tool: this.call.tool, kind: 'result', dispatched: true, result, delta: this.delta });
  }

  private fail(error: unknown): void {
    this.finish(this.failure(true, toErrorInfo(error)));
  }

  // This call's error outcome, built field by field (see docs/performance.md on spreads).
  private failure(dispatched: boolean, error: ErrorInfo): Outcome {
    return { index: this.index, callId: this.call.callId, tool: this.call.tool, kind: 'error', dispatched, error };
  }

  private finish(outcome: Outcome): void {
    if (this.settled) return;
    this.settled = true;
    this.halt();
    this.invoked = undefined;
    const { batch } = this;
    // A stop set off by anything below (the consumer of the outcome, an activity watcher, a lane
    // watcher, the permits given back) takes effect once this call has done all of it.
    batch.hold();
    try {
      // Marked settled and delivered in one step, so a stop finds the outcome in.
      this.status = SETTLED;
      batch.deliver(outcome);
      batch.report(this, outcome.kind);
      const failing = batch.failFast && outcome.kind === 'error';
      // The permits this failure gives back must not start a sibling the stop is about to end.
      if (failing) batch.stopping = true;
      this.release();
      // Under FAIL_RUN, a failure stops the batch once its own outcome is in (stopping first
      // would let the classified siblings overtake it), and before this call is over, which
      // could end its phase and let the next phase's gate ask for approvals in vain.
      if (failing) batch.stop(failedBy(outcome, outcome.error));
    } finally {
      batch.letGo();
    }
    if (!this.closed) {
      this.closed = true;
      batch.over(this);
    }
  }

  private release(): void {
    const { permits } = this;
    for (let i = this.taken - 1; i >= 0; i--) leave(permits[i]!);
    // Given back (leaving twice would do nothing): the batch, kept until its last call is out,
    // need not keep them.
    this.taken = 0;
    this.permits = noPermits;
  }

  // Ends the watch and an Observable body's subscription, and lets go of them (and of the
  // context the body was handed): a settled call keeps only what it reports. Its ceilings,
  // once it is settled, do nothing when they come due.
  private halt(): void {
    this.watch?.release();
    if (this.running !== undefined) unsubscribeBody(this.running);
    this.watch = this.running = undefined;
  }

  /** Ends the call where it stands: permits back, the body's signal aborted if it had not settled. */
  teardown(): void {
    this.closed = true;
    if (!this.settled) {
      this.settled = true;
      this.halt();
      this.invoked?.abort(new InvocationAbortedError('the call was stopped before it settled'));
    }
    this.release();
  }
}

/** One subscription to a batch: the state machine that moves its calls from the gate to their outcomes. */
class BatchRun {
  readonly count: number;
  readonly runs: CallRun[];
  readonly shared: { readonly lanes: LaneStore; readonly concurrency: ConcurrencyConfig };
  readonly held: ReadonlySet<string>;
  readonly scheduler: SchedulerLike;
  readonly activity: ActivitySink | undefined;
  readonly monitor: LoopMonitor | undefined;
  readonly failFast: boolean;
  readonly toolCallSeconds: number | undefined;
  private readonly tenant: string;
  private readonly gate: BatchOptions['gate'];
  private readonly settle: BatchOptions['settle'];
  private readonly turnLimit: number | undefined;

  // True from the moment the subscriber unsubscribes (or the batch ends). Set before the
  // dispatches are torn down: a permit one of them gives back can then not start another
  // call of this same batch.
  closing = false;
  // The first stop wins; later ones change nothing.
  stopped: StopReason | undefined = undefined;
  // Set by a failure under FAIL_RUN from the moment it settles until its stop takes effect.
  stopping = false;
  // Every call's ceiling and deadline, ended with the batch; made when a call first needs one.
  private ceilings: Ceilings | undefined = undefined;
  // This batch's own lanes: the turn lane, and per-tool bounds the agent narrowed for its turn.
  private local: LaneTable | undefined = undefined;
  // The lanes of a parallel-safe call depend only on its tool: worked out once per tool. Most
  // batches call one tool, kept in two fields; a map is made for a second.
  private firstTool: string | undefined = undefined;
  private firstSteps: readonly LaneStep[] = noSteps;
  private stepsByTool: Map<string, readonly LaneStep[]> | undefined = undefined;

  // The executing side: phases one after another, the gate one call at a time. The current
  // phase ends at phaseEnd; gateNext is the next call to gate.
  private phaseEnd = 0;
  private gateNext = 0;
  // Dispatches of the current phase that are not over.
  private open = 0;
  // A gate answer being waited for.
  private gating: Unsubscribable | undefined = undefined;
  // True once every phase is done, or a stop ended the executing side.
  private executed = false;
  // The external stop's subscription.
  private stopSubscription: Unsubscribable | undefined = undefined;
  // Calls in the middle of their own bookkeeping, and whether a stop waits for them.
  private busy = 0;
  private stopWaits = false;
  private advancing = false;

  // The settling side: outcomes wait here by index until every earlier call's is out.
  private readonly ready: Array<Outcome | undefined>;
  // The next index to settle.
  private released = 0;
  // A settle answer being waited for.
  private settling: Subscription | undefined = undefined;
  private pumping = false;

  constructor(
    readonly calls: readonly BatchCall[],
    readonly turn: ConcurrencyConfig,
    options: BatchOptions,
    private readonly subscriber: BatchSink,
  ) {
    this.count = calls.length;
    this.runs = calls.map((call, index) => new CallRun(this, call, index));
    this.ready = new Array<Outcome | undefined>(calls.length);
    this.shared = options.shared ?? { lanes: new LaneTable(), concurrency: turn };
    this.held = options.held ?? noLanes;
    this.scheduler = options.scheduler ?? asyncScheduler;
    this.activity = typeof options.onActivity === 'function' ? { observed: true, next: options.onActivity } : options.onActivity;
    this.monitor = options.monitor;
    this.failFast = options.failFast ?? false;
    this.toolCallSeconds = options.deadline?.toolCallSeconds;
    this.tenant = options.tenant ?? 'default';
    this.gate = options.gate;
    this.settle = options.settle;
    this.turnLimit = bindingOver(tighter(turn.maxConcurrentTools, narrower(turn.perTenant, this.shared.concurrency.perTenant)), calls.length);
  }

  begin(stop$: Subscribable<StopReason> | undefined): void {
    // A stop from outside: a stop that has already happened stops the batch before any call is asked for.
    if (stop$ !== undefined) {
      const subscription = stop$.subscribe({ next: (reason) => this.stop(reason) });
      if (this.executed) subscription.unsubscribe();
      else this.stopSubscription = subscription;
    }
    this.advance();
    // An empty batch, or one stopped before it began, ends here.
    this.pump();
  }

  /** The subscriber's teardown: everything still running ends, every permit goes back. */
  end(): void {
    this.closing = true;
    this.ceilings?.close();
    this.settling?.unsubscribe();
    this.unlistenStop();
    this.tearDownExecuting();
  }

  // Stops listening for the stop from outside, once: a hand-made subscribe need not take a second unsubscribe.
  private unlistenStop(): void {
    const subscription = this.stopSubscription;
    this.stopSubscription = undefined;
    subscription?.unsubscribe();
  }

  arm(ms: number, expire: (run: CallRun) => void, run: CallRun): void {
    (this.ceilings ??= new Ceilings(this.scheduler, CallRun.stale as (target: unknown) => boolean)).arm(ms, expire, run);
  }

  report(run: CallRun, outcome?: Outcome['kind']): void {
    const { activity } = this;
    if (activity === undefined || !activity.observed) return;
    const { call, index } = run;
    const at = this.scheduler.now();
    this.tell(
      outcome === undefined
        ? { type: 'started', callId: call.callId, tool: call.tool, index, at }
        : { type: 'settled', callId: call.callId, tool: call.tool, index, at, outcome },
    );
  }

  // A watcher that throws must not cut a call's bookkeeping short (a permit not given back,
  // a call never completed): its error is reported the way RxJS reports a subscriber's.
  tell(event: CallActivity): void {
    try {
      this.activity!.next(event);
    } catch (error) {
      reportUnhandled(error);
    }
  }

  lanesOf({ call, parallelSafe: safe }: CallRun): readonly LaneStep[] {
    if (safe && call.tool === this.firstTool) return this.firstSteps;
    const known = safe ? this.stepsByTool?.get(call.tool) : undefined;
    if (known !== undefined) return known;
    const { shared, turn, tenant } = this;
    const steps: LaneStep[] = [];
    this.addStep(steps, shared.lanes, `tenant:${tenant}`, shared.concurrency.perTenant, tenant);
    const toolBound = narrower(own(turn.perTool, call.tool), own(shared.concurrency.perTool, call.tool));
    const turnTool = toolBound === undefined ? undefined : bindingOver(toolBound, this.callsOf(call.tool));
    if (this.turnLimit !== undefined || turnTool !== undefined) {
      const local = (this.local ??= new LaneTable());
      this.addStep(steps, local, 'turn', this.turnLimit, '');
      this.addStep(steps, local, `turn-tool:${call.tool}`, turnTool, '');
    }
    this.addStep(steps, shared.lanes, `tool:${call.tool}`, own(shared.concurrency.perTool, call.tool), tenant);
    if (!safe) this.addStep(steps, shared.lanes, `args:${call.tool}:${canonicalJson(call.args)}`, 1, tenant);
    // Copied to its exact length: an array grown by push keeps room for seventeen, and every
    // call of the tool holds this one until the batch ends.
    const exact = steps.length === 0 ? noSteps : steps.slice();
    if (safe && this.firstTool === undefined) {
      this.firstTool = call.tool;
      this.firstSteps = exact;
    } else if (safe) (this.stepsByTool ??= new Map()).set(call.tool, exact);
    return exact;
  }

  // How many of this batch's calls are to `tool` (counted once, when first asked).
  private callsOf(tool: string): number {
    if (this.perTool === undefined) {
      this.perTool = new Map();
      for (const { tool: name } of this.calls) this.perTool.set(name, (this.perTool.get(name) ?? 0) + 1);
    }
    return this.perTool.get(tool) ?? 0;
  }
  private perTool: Map<string, number> | undefined = undefined;

  private addStep(steps: LaneStep[], store: LaneStore, key: string, limit: number | undefined, party: string): void {
    if (limit !== undefined && !(store === this.shared.lanes && this.held.has(key))) steps.push({ store, key, limit, party, direct: isPlainTable(store) });
  }

  // Moves the executing side on as far as it can go now: through the gate, into the lanes,
  // on to the next phase. Re-entered calls (a dispatch that ends at once) return, and the
  // running loop picks up where they left off.
  private advance(): void {
    if (this.advancing) return;
    this.advancing = true;
    try {
      const { runs, count } = this;
      while (!this.executed && this.stopped === undefined && !this.closing && this.gating === undefined) {
        if (this.gateNext < this.phaseEnd) {
          // A batch that is stopping asks nobody about calls it will not dispatch.
          if (this.stopping) return;
          const run = runs[this.gateNext++]!;
          if (this.gate === undefined || run.call.rejected !== undefined) this.launch(run);
          else this.ask(run);
        } else if (this.open === 0) {
          if (this.phaseEnd === count) {
            this.executed = true;
            this.unlistenStop();
            this.pump();
            return;
          }
          // The next phase: consecutive parallel-safe calls, or one call that is not.
          let end = this.phaseEnd;
          this.gateNext = end;
          if (runs[end]!.parallelSafe) while (end < count && runs[end]!.parallelSafe) end++;
          else end++;
          this.phaseEnd = end;
        } else {
          return; // waiting for this phase's dispatches
        }
      }
    } finally {
      this.advancing = false;
    }
  }

  // Dispatches one call of the current phase (the fan-out: nothing waits for it here).
  private launch(run: CallRun): void {
    this.open++;
    run.active = true;
    run.dispatch();
  }

  /** A dispatch is over: when it was its phase's last, the next phase may begin. */
  over(run: CallRun): void {
    if (this.executed || !run.active) return;
    run.active = false;
    this.open--;
    this.advance();
  }

  // The gate for one call: a plain answer is taken at once; a Promise or an Observable is
  // waited for, the next call's gate behind it. A gate that throws or rejects refuses the
  // call with its message. Refused calls are dispatched too, and end at once without their lanes.
  private ask(run: CallRun): void {
    let answer: unknown;
    try {
      answer = this.gate!(run.call, run.index);
    } catch (error) {
      run.refused = toErrorInfo(error);
      this.launch(run);
      return;
    }
    if (!isObservable(answer) && !isPromiseLike(answer)) {
      run.refused = verdictError(answer);
      this.launch(run);
      return;
    }
    let answered = false;
    let subscription: Subscription | undefined;
    const take = (refused: ErrorInfo | undefined): void => {
      if (answered) return;
      answered = true;
      subscription?.unsubscribe();
      this.gating = undefined;
      run.refused = refused;
      this.launch(run);
      this.advance();
    };
    if (isObservable(answer)) {
      const verdicts = answer;
      this.gating = { unsubscribe: () => ((answered = true), subscription?.unsubscribe()) };
      subscription = verdicts.subscribe({
        next: (verdict) => take(verdictError(verdict)),
        error: (error: unknown) => take(toErrorInfo(error)),
        complete: () => take(undefined),
      });
      if (answered) subscription.unsubscribe();
    } else {
      this.gating = { unsubscribe: () => void (answered = true) };
      (answer as PromiseLike<GateVerdict>).then(
        (verdict) => take(verdictError(verdict)),
        (error: unknown) => take(toErrorInfo(error)),
      );
    }
  }

  // The stop: the executing side is torn down (permits back, bodies aborted), then every
  // call without an outcome gets one, by what it had done.
  stop(reason: StopReason): void {
    // A batch its subscriber left has nobody to report to.
    if (this.stopped !== undefined || this.closing) return;
    this.stopped = reason;
    if (this.executed) return;
    // From here no call starts and the gate asks nobody; the teardown waits for calls in the
    // middle of their own bookkeeping.
    if (this.busy > 0) this.stopWaits = true;
    else this.takeStop(reason);
  }

  /** A call is in the middle of its own bookkeeping: a stop waits for it. */
  hold(): void {
    this.busy++;
  }

  letGo(): void {
    if (--this.busy > 0 || !this.stopWaits) return;
    this.stopWaits = false;
    if (!this.closing && this.stopped !== undefined) this.takeStop(this.stopped);
  }

  private takeStop(reason: StopReason): void {
    if (this.executed) return;
    this.executed = true;
    this.unlistenStop();
    this.tearDownExecuting();
    for (const run of this.runs) {
      const at = run.status;
      if (at === SETTLED) continue;
      run.status = SETTLED;
      const outcome = stoppedOutcome(run.call, run.index, at === RUNNING, reason);
      this.report(run, outcome.kind);
      this.ready[run.index] = outcome;
    }
    this.pump();
  }

  private tearDownExecuting(): void {
    for (const run of this.runs) {
      if (run.active) {
        run.active = false;
        run.teardown();
      }
    }
    this.gating?.unsubscribe();
    this.gating = undefined;
  }

  /** An outcome in finish order: it waits for every earlier call's. */
  deliver(outcome: Outcome): void {
    this.ready[outcome.index] = outcome;
    this.pump();
  }

  // Moves the settling side on: each outcome whose turn has come goes through `settle`, one
  // at a time and in call order, then out. Re-entered calls return; the running loop goes on.
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    const { subscriber, ready, count, settle } = this;
    try {
      while (this.settling === undefined && this.released < count && !subscriber.closed) {
        const outcome = ready[this.released];
        if (outcome === undefined) break;
        ready[this.released++] = undefined;
        if (settle === undefined) {
          subscriber.next(outcome);
          continue;
        }
        let answer: Outcome | ObservableInput<Outcome>;
        try {
          answer = settle(outcome, this.calls[outcome.index]!);
        } catch (error) {
          subscriber.error(error);
          return;
        }
        if (isOutcome(answer)) {
          this.settledOut(answer);
          continue;
        }
        let finished = false;
        const subscription = from(answer).subscribe({
          next: (settled) => this.settledOut(settled),
          error: (error: unknown) => subscriber.error(error),
          complete: () => {
            finished = true;
            this.settling = undefined;
            this.pump();
          },
        });
        if (!finished) this.settling = subscription;
      }
      if (this.executed && this.settling === undefined && !subscriber.closed) {
        // Every call has its outcome by now; one missing is a bug, and it must not pass silently.
        if (this.released === count) subscriber.complete();
        else subscriber.error(new Error(`internal: the batch ended with call #${this.released} unsettled`));
      }
    } finally {
      this.pumping = false;
    }
  }

  // Under FAIL_RUN an outcome a settle step turned into a failure (a rejected output) stops the
  // batch too, once that outcome has gone out.
  private settledOut(outcome: Outcome): void {
    this.subscriber.next(outcome);
    if (this.failFast && outcome.kind === 'error' && outcome.stopped === undefined) this.stop(failedBy(outcome, outcome.error));
  }
}

/** What a batch reports to: an RxJS Subscriber, or a runner's own observer through `openBatch`. */
interface BatchSink {
  readonly closed: boolean;
  next(outcome: Outcome): void;
  error(error: unknown): void;
  complete(): void;
}

/** A batch opened with `openBatch`: `begin()` starts it, `unsubscribe()` ends it where it stands. */
export interface OpenBatch extends Unsubscribable {
  begin(): void;
}

const noObserver: Observer<Outcome> = { next: () => undefined, error: () => undefined, complete: () => undefined };

// A batch's sink for a runner, in place of an Observable and its subscriber: it keeps the
// Subscriber's contract the batch relies on. After an error or the completion nothing more is
// passed on; the observer hears the end before the batch is torn down, as a Subscriber's
// finalizers run after its observer's complete; an observer that throws is reported, not
// thrown into the batch; and unsubscribing tears the batch down once.
class DirectBatch implements BatchSink, OpenBatch {
  closed = false;
  private stopped = false;
  private readonly batch: BatchRun;

  constructor(
    calls: readonly BatchCall[],
    private readonly options: BatchOptions,
    // Let go of once the batch is torn down, as a Subscriber lets go of its destination: a
    // body that never settles keeps the batch, not whoever observed it.
    private observer: Observer<Outcome>,
  ) {
    this.batch = new BatchRun(calls, options.concurrency ?? new ConcurrencyConfig(), options, this);
  }

  begin(): void {
    this.batch.begin(this.options.stop$);
  }

  next(outcome: Outcome): void {
    if (this.stopped) return;
    try {
      this.observer.next(outcome);
    } catch (error) {
      reportUnhandled(error);
    }
  }

  error(error: unknown): void {
    this.last((observer) => observer.error(error));
  }

  complete(): void {
    this.last((observer) => observer.complete());
  }

  // The observer hears the end (once), then the batch is torn down.
  private last(tell: (observer: Observer<Outcome>) => void): void {
    if (this.stopped) return;
    this.stopped = true;
    try {
      tell(this.observer);
    } catch (thrown) {
      reportUnhandled(thrown);
    } finally {
      this.unsubscribe();
    }
  }

  unsubscribe(): void {
    if (this.closed) return;
    this.closed = true;
    this.stopped = true;
    this.batch.end();
    this.observer = noObserver;
  }
}

/**
 * @internal A batch as `runBatch` runs it, reporting straight to `observer`: what a runner uses
 * for each turn, without the Observable and the subscriber a subscription makes. Call `begin()`
 * once whatever may need to end it holds the handle.
 */
export function openBatch(calls: readonly BatchCall[], options: BatchOptions, observer: Observer<Outcome>): OpenBatch {
  return new DirectBatch(calls, options, observer);
}

/**
 * Runs one turn's calls concurrently inside their lanes and emits one outcome per call,
 * in call order, as soon as each and every earlier call have settled.
 *
 * Lanes are taken in one fixed order: tenant, turn, tool (then the identical-arguments
 * lane of a call that is not parallel-safe). A call's `perToolSeconds` ceiling runs from
 * dispatch, not from queueing. The Observable is cold: each subscription is a new batch.
 *
 * ## Example
 * ```ts
 * const calls = ['a', 'b', 'c', 'd'].map((q) => ({ callId: q, tool: 'lookup', invoke: () => fetchIt(q) }));
 * runBatch(calls, { concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }) })
 *   .subscribe((o) => console.log(o.callId, o.kind));
 * // a result, b result, c result, d result: in call order, whichever finished first
 * ```
 */
export function runBatch(calls: readonly BatchCall[], options: BatchOptions = {}): Observable<Outcome> {
  const turn = options.concurrency ?? new ConcurrencyConfig();
  if (!(turn instanceof ConcurrencyConfig)) throw new TypeError('runBatch: options.concurrency must be a ConcurrencyConfig');
  return new Observable<Outcome>((subscriber) => {
    const batch = new BatchRun(calls, turn, options, subscriber);
    subscriber.add(() => batch.end());
    batch.begin(options.stop$);
  });
}
