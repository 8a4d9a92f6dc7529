// The batch's records: one CallRecord per call, the one object every stage of the pipeline reads
// and writes (where the call stands, the permits it holds, its body, its outcome). The BatchScope
// its calls share is in batchScope.ts. A record per call with methods, rather than an
// Observable, a Subscriber and a dozen closures per call: a batch of thousands is mostly these
// (docs/performance.md).
import { isObservable, type Subscription, type Unsubscribable } from 'rxjs';
import { toErrorInfo, ToolTimedOutError, type ErrorInfo, type EventLoopStalledError } from '../errors.js';
import { scheduleAfter } from '../time.js';
import { enterWithLoan, Loan, type LaneStore, type Permit } from '../lanes/index.js';
import type { LoopMonitor, Watch } from '../tools/index.js';
import { assignDelta } from './deltas.js';
import { takeAnswer } from './answer.js';
import { CallContext } from './callContext.js';
import { InvocationAbortedError, reportUnhandled } from './invocation.js';
import { errorOutcome, interrupted, lostBeforeDispatch, lostOutcome } from './stops.js';
import type { BatchScope } from './batchScope.js';
import type { BatchCall, Delta, Outcome } from './types.js';

/** Where a call stands: before its lanes, waiting for them, its body running, or its outcome decided. */
export type CallState = 'waiting' | 'queued' | 'running' | 'ended';

/** One lane a call takes, in the fixed order: the store, the key, its permits, whose turn it is. */
export interface LaneStep {
  readonly store: LaneStore;
  readonly key: string;
  readonly limit: number;
  readonly party: string;
  /** The permit of this lane a caller lends (a nested run), if any. */
  readonly loan: Loan | undefined;
}

/** What a record needs of the stage that dispatches it (inLanes): where its body's news goes. */
export interface Dispatcher {
  /** The shared lanes (the ones a call may lend to nested work). */
  readonly sharedLanes: LaneStore;
  /** Loans of the caller's permits (a nested run). */
  readonly lent: ReadonlyMap<string, Loan>;
  readonly monitor: LoopMonitor | undefined;
  /** Grace for an overrunning body, in seconds. */
  readonly abandonAfterSeconds: number | undefined;
  /** True while its records are torn down: a permit one of them gives back must not start another. */
  readonly closing: boolean;
  /** The record's body started: it goes on to the ceilings. */
  started(record: CallRecord): void;
  /** The record's outcome is decided: it goes on to the reorder. */
  ended(record: CallRecord): void;
  /** The record is done with its bookkeeping (permits back): its phase may end. */
  over(record: CallRecord): void;
  /** The lanes the record takes, in order (worked out when it is dispatched). */
  lanesOf(record: CallRecord): readonly LaneStep[];
  /**
   * The record's body failed with a partner's "slow down" (RateLimitedError) and the record may
   * be taken again once (it is idempotent, and has not been): true if the batch's config says so,
   * its tool's rate lane then paused (and the tool's lanes worked out again); false to let it fail.
   */
  takeAgain?(record: CallRecord, error: ErrorInfo): boolean;
}

const noSteps: readonly LaneStep[] = [];
const noPermits: Array<Permit | undefined> = [];
const noLoans: ReadonlyMap<string, Loan> = new Map();

// Gives a permit back; one failing to go back (a remote store, say) must not keep the others.
function leave(permit: Permit): void {
  try {
    permit.leave();
  } catch (error) {
    reportUnhandled(error);
  }
}

// An Observable answer, read without throwing (a hostile value is not one).
function isObservableSafely(value: unknown): boolean {
  try {
    return isObservable(value);
  } catch {
    return false;
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

/**
 * One call of a batch, from the gate to its outcome: its lanes taken in order, then its body.
 * Its permits go back as soon as its outcome is decided, unless its body is still running (a
 * lane counts bodies that run), and again (harmlessly) in the teardown, so every ending gives
 * them back.
 */
export class CallRecord {
  readonly parallelSafe: boolean;
  /** Where the call stands. */
  state: CallState = 'waiting';
  /** Its outcome, once decided (and replaced by the settle steps). */
  outcome: Outcome | undefined = undefined;
  /** What the gate said; set only when it refused. */
  refused: ErrorInfo | undefined = undefined;
  /** @internal The ceilings it was timed by (set by `ceiling` once it is armed). */
  ceilingOf: Readonly<Record<string, number>> | undefined = undefined;
  /** @internal The toolCallSeconds it was timed by. */
  deadlineOf: number | undefined = undefined;

  // Who dispatched it (inLanes), told when its body starts and when it ends.
  private dispatcher: Dispatcher | undefined = undefined;
  // The lanes this call takes, in order.
  private steps: readonly LaneStep[] = noSteps;
  // The permits it holds, in the order taken: `taken` of them. Sized once the lanes are known.
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
  private done = false;
  /** @internal True while `dispatcher` dispatched this call and its bookkeeping is not over. */
  inFlightFor(dispatcher: Dispatcher): boolean {
    return this.dispatcher === dispatcher && !this.closed;
  }

  /** @internal True once the call has its outcome or was torn down. */
  get isDone(): boolean {
    return this.done;
  }
  // Set once the call is over or torn down.
  private closed = false;
  /** @internal True once its body was started and failed with a "slow down", and the call took its lanes again. */
  retried = false;
  // What the call recorded; kept only if it succeeds.
  private delta: Record<string, unknown> | undefined = undefined;
  // The permits this call lends to nested work, by position in `permits`, and the lanes a nested
  // run of its body may run in (its callers' loans too); made when the body first asks.
  private loans: Array<Loan | undefined> | undefined = undefined;
  private lentLanes: ReadonlyMap<string, Loan> | undefined = undefined;
  // True while a body's Promise has not settled: the body is running, whatever its call's outcome.
  private bodyRunning = false;
  // True while the body's synchronous part runs, and whether the call's end waits for it to return.
  private invoking = false;
  private letGoWaits = false;
  // Set while the body runs past its call's end and keeps its permits (an overrun): the
  // abandonAfterSeconds timer, if one is armed, or true.
  private overrun: Subscription | true | undefined = undefined;

  constructor(
    readonly batch: BatchScope,
    readonly call: BatchCall,
    readonly index: number,
  ) {
    this.parallelSafe = call.parallelSafe !== false;
  }

  // The body, given what it is handed: a function of the call, so the monitor can run it without a closure.
  private static invoke(run: CallRecord): unknown {
    return run.call.invoke?.(run.invoked!);
  }

  /** A record whose outcome is decided (or that was torn down): its ceilings no longer matter. */
  static stale(run: CallRecord): boolean {
    return run.done;
  }

  /**
   * Dispatches the call: a refused call ends at once, never dispatched; the others take the
   * lanes `dispatcher.lanesOf` gives, in order, then run. `dispatcher` hears when the body starts and when the call ends.
   */
  dispatch(dispatcher: Dispatcher): void {
    this.dispatcher = dispatcher;
    const refused = this.call.rejected ?? this.refused;
    if (refused !== undefined) {
      this.finish(this.failure(false, refused));
      return;
    }
    const lanes = (this.steps = dispatcher.lanesOf(this));
    if (lanes.length > 0) this.permits = new Array<Permit | undefined>(lanes.length);
    this.state = 'queued';
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
      const { store, key, limit, party, loan } = steps[i]!;
      let permit: Permit;
      this.asking = i;
      // A stop set off inside the store (a watcher of its lanes, say) waits until the permit is
      // recorded here, so the teardown it brings gives that permit back too.
      batch.hold();
      try {
        // The store is handed this record, whose granted() carries on from the next lane when the
        // grant comes later; granted at once, the loop carries on.
        permit = loan === undefined ? store.enter(key, limit, this, party) : enterWithLoan(loan, store, key, limit, this, party);
      } catch (error) {
        batch.letGo();
        // A store that cannot take the request: the call fails, never dispatched, and gives back what it holds.
        this.finish(this.failure(false, toErrorInfo(error)));
        return;
      }
      if (this.closed) {
        // Torn down while in the store: what it had stored is back already, and this permit goes back too, never stored.
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
        if (batch.watched) {
          batch.report({ type: 'queued', callId: this.call.callId, tool: this.call.tool, index: this.index, lane: key, at: batch.scheduler.now() });
        }
        return;
      }
    }
    this.start();
  }

  private start(): void {
    const { batch, call } = this;
    // A permit given back while the batch is stopping, or while its dispatches are torn down
    // (its subscriber left), can reach a waiter of this same batch before its own teardown
    // runs: such a call must not start now.
    if (batch.stopped !== undefined || batch.closed || this.done || this.closed || this.dispatcher!.closing) return;
    if (batch.watched) batch.report({ type: 'started', callId: call.callId, tool: call.tool, index: this.index, at: batch.scheduler.now() });
    // The report may have set off a stop: then the body must not run.
    if (batch.stopped !== undefined || batch.closed || this.closed) return;
    this.state = 'running';
    // On to the ceilings, which time the call from here.
    this.dispatcher!.started(this);
    if (batch.stopped !== undefined || batch.closed || this.closed) return;
    const context = (this.invoked = new CallContext(this));
    let produced: unknown;
    // While the body's synchronous part runs, whatever ends the call (a stall, a stop the body
    // set off itself) leaves the permits where they are: only the body's answer says whether
    // it still runs (a Promise keeps them until it settles) or is over.
    this.invoking = true;
    try {
      const monitor = this.dispatcher!.monitor;
      if (monitor === undefined) produced = call.invoke?.(context);
      else {
        // Known before the body runs, so a synchronous stall's failure (halt) ends the watch too.
        this.watch = monitor.open(call.tool, this);
        produced = monitor.run(this.watch, CallRecord.invoke, this);
      }
    } catch (error) {
      this.invoking = false;
      this.fail(error);
      this.letGoIfWaiting();
      return;
    }
    this.invoking = false;
    // A body that already has its outcome (a synchronous stall, a stop while it ran) is still
    // followed: a Promise's rejection must be handled, and a body still running keeps its lanes.
    if (this.done && isObservableSafely(produced)) {
      this.letGoIfWaiting();
      return; // nothing to follow: not subscribed at all
    }
    const running = takeAnswer(produced, this);
    this.letGoIfWaiting();
    if (running === undefined) return;
    if (this.done) unsubscribeBody(running);
    else this.running = running;
  }

  // The permits' fate, held while the body's synchronous part ran, is decided now that its answer is known.
  private letGoIfWaiting(): void {
    if (!this.letGoWaits) return;
    this.letGoWaits = false;
    this.letGo();
  }

  /** @internal The body's answer: its first value (or a plain one) is the result. */
  answered(result: unknown): void {
    if (this.bodyRunning) this.bodyEnded();
    this.succeed(result);
  }

  /** @internal The loop monitor saw the body hold the event loop past loopStallMs: the call fails. */
  loopStalled(error: EventLoopStalledError): void {
    this.fail(error);
  }

  /** @internal The body failed: it threw, rejected or errored (or its answer could not be read). */
  failed(error: unknown): void {
    if (this.bodyRunning) this.bodyEnded();
    this.fail(error);
  }

  /** @internal An Observable body completed without a value: the result is undefined. */
  unanswered(): void {
    this.succeed(undefined);
  }

  /** @internal The body answered with a Promise: until it settles the body runs, and counts in its lanes even if its call ends first. */
  waiting(): void {
    this.bodyRunning = true;
  }

  /** @internal What the body recorded (through its context's `record`). */
  recorded(patch: Delta): void {
    if (this.done) return; // too late: the call has its outcome
    if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) {
      throw new TypeError(`record(delta) expects an object of state keys, got ${patch === null ? 'null' : typeof patch}`);
    }
    this.delta = assignDelta(this.delta ?? {}, patch);
  }

  private succeed(result: unknown): void {
    this.finish({ index: this.index, callId: this.call.callId, tool: this.call.tool, kind: 'result', dispatched: true, result, delta: this.delta });
  }

  // A body's error; one that says its request went out and was cut off is a call stopped in flight.
  private fail(error: unknown): void {
    if (interrupted(error)) {
      this.finish(lostOutcome(this.call, this.index, toErrorInfo(error)));
      return;
    }
    const info = toErrorInfo(error);
    if (info.name === 'RateLimitedError' && this.mayTakeAgain(info)) this.takeAgain();
    else this.finish(this.failure(true, info));
  }

  // An idempotent call refused by its partner ("slow down"), once, when the batch's config says so.
  private mayTakeAgain(info: ErrorInfo): boolean {
    const { dispatcher, batch } = this;
    if (this.retried || this.done || this.closed || this.call.idempotent !== true || this.state !== 'running' || this.bodyRunning) return false;
    if (batch.stopped !== undefined || batch.closed || dispatcher === undefined || dispatcher.closing) return false;
    return dispatcher.takeAgain?.(this, info) === true;
  }

  // Gives back what the call holds and takes its lanes again from the first (its rate lanes wait
  // out the pause); its ceiling, armed at its first start, still runs.
  private takeAgain(): void {
    this.retried = true;
    this.halt();
    this.invoked = undefined;
    this.release();
    this.lentLanes = undefined;
    // Worked out again: the tool's rate lane, paused now, is among them even where no rate is declared.
    const steps = (this.steps = this.dispatcher!.lanesOf(this));
    this.permits = steps.length > 0 ? new Array<Permit | undefined>(steps.length) : noPermits;
    this.asking = 0;
    this.state = 'queued';
    this.acquire(0);
  }

  // This call's error outcome.
  private failure(dispatched: boolean, error: ErrorInfo): Outcome {
    const { callId, tool } = this.call;
    return errorOutcome({ index: this.index, callId, tool }, dispatched, error);
  }

  /**
   * @internal A lane store shared by a fleet lost a permit this call held or waited for (its
   * lease ran out unrefreshed, or its Redis could not be reached): a call still queued fails,
   * never dispatched; a call in flight has its body aborted and ends alone, safe to call again if
   * idempotent, else its side effect may have landed. Nothing runs it again.
   */
  lost(error: Error): void {
    if (this.done) return;
    const info = toErrorInfo(error);
    if (this.state !== 'running') {
      this.finish(this.failure(false, lostBeforeDispatch(info)));
      return;
    }
    this.invoked?.abort(error);
    this.finish(lostOutcome(this.call, this.index, info));
  }

  /**
   * @internal The fencing token of the narrowest fleet lane the call holds: its identical-arguments
   * lane, else its tool lane, else the lane its declaration names (an MCP server's, shared by all
   * of the server's tools), else its tenant lane.
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

  /** @internal The fencing token of every fleet lane the call holds, by lane key (frozen). */
  fences(): Readonly<Record<string, string>> {
    const fences: Record<string, string> = {};
    for (let i = 0; i < this.taken; i++) {
      const fence = this.permits[i]!.fence;
      if (fence !== undefined) fences[this.steps[i]!.key] = fence;
    }
    return Object.freeze(fences);
  }

  /** @internal The body reported how far it has got: told to watchers while the call has not ended. */
  progressed(progress: number, total: number | undefined, message: string | undefined): void {
    const { batch, call, index } = this;
    if (this.done || !batch.watched) return;
    batch.report({
      type: 'progress',
      callId: call.callId,
      tool: call.tool,
      index,
      at: batch.scheduler.now(),
      progress,
      ...(total === undefined ? {} : { total }),
      ...(message === undefined ? {} : { message }),
    });
  }

  /** The call outran its own ceiling (its tool's perToolSeconds): it fails, its body aborted. */
  outrun(seconds: number): void {
    if (this.done) return;
    const { tool, idempotent } = this.call;
    this.invoked?.abort(new InvocationAbortedError(`${tool} outran its ${seconds}s ceiling`));
    this.fail(new ToolTimedOutError(tool, seconds, idempotent === true));
  }

  private finish(outcome: Outcome): void {
    if (this.done) return;
    this.done = true;
    this.halt();
    this.invoked = undefined;
    const { batch } = this;
    // A stop set off by anything below (the consumer of the outcome, an activity watcher, a lane
    // watcher, the permits given back) takes effect once this call has done all of it: under
    // FAIL_RUN, the failure's own outcome goes out and its permits go back before its siblings
    // are classified, and no sibling starts in the permits it gave back.
    batch.hold();
    try {
      this.outcome = outcome;
      this.state = 'ended';
      if (batch.watched) this.endedActivity(outcome, this.bodyRunning);
      // The permits go back before the outcome travels on, so the next waiter starts without
      // waiting for what the outcome sets off downstream (the settle steps, the transcript, a
      // run's next turn). Not a failure under FAIL_RUN: it stops the batch on its way, before any
      // sibling may start in its permits.
      if (batch.failsOn(outcome)) {
        this.dispatcher?.ended(this);
        this.letGo();
      } else {
        this.letGo();
        this.dispatcher?.ended(this);
      }
    } finally {
      batch.letGo();
    }
    if (!this.closed) {
      this.closed = true;
      this.dispatcher?.over(this);
    }
  }

  /** The stop classified this call (it had no outcome): decided, and told as ended. */
  decide(outcome: Outcome): void {
    this.done = true;
    this.outcome = outcome;
    this.state = 'ended';
    if (this.batch.watched) this.endedActivity(outcome, this.bodyRunning);
  }

  /** The settle steps gave the call its final outcome. */
  settled(outcome: Outcome): void {
    this.outcome = outcome;
    this.batch.settledActivity(this, outcome);
  }

  private endedActivity(outcome: Outcome, overrun: boolean): void {
    const { call, index, batch } = this;
    batch.report({ type: 'ended', callId: call.callId, tool: call.tool, index, at: batch.scheduler.now(), outcome: outcome.kind, overrun });
  }

  private release(): void {
    const { permits, loans } = this;
    for (let i = this.taken - 1; i >= 0; i--) {
      const permit = permits[i]!;
      const loan = loans?.[i];
      // A lent permit goes back once no nested call runs in it.
      if (loan === undefined) leave(permit);
      else loan.recall(() => leave(permit));
    }
    // Given back (leaving twice would do nothing): the batch need not keep them.
    this.taken = 0;
    this.permits = noPermits;
    this.loans = undefined;
  }

  // The call is over: its permits go back, unless its body still runs (a Promise that has not
  // settled, its abort ignored or not yet heard): a lane counts bodies that actually run, so
  // such a body keeps them until it settles, or until abandonAfterSeconds gives up on it.
  private letGo(): void {
    if (this.invoking) {
      this.letGoWaits = true;
      return;
    }
    if (!this.bodyRunning || this.taken === 0) {
      this.release();
      return;
    }
    if (this.overrun !== undefined) return;
    const grace = this.dispatcher?.abandonAfterSeconds;
    this.overrun = grace === undefined ? true : scheduleAfter(this.batch.scheduler, () => CallRecord.abandon(this), grace * 1000);
  }

  // The body settled: an overrun ends, and its permits go back.
  private bodyEnded(): void {
    this.bodyRunning = false;
    const { overrun } = this;
    if (overrun === undefined) return;
    this.overrun = undefined;
    if (overrun !== true) overrun.unsubscribe();
    // Told first, so a watcher reads the permits going back before a waiter starts in them.
    this.permitsBack(false);
    this.release();
  }

  // The grace ran out on an overrunning body: its permits go back while it still runs.
  private static abandon(run: CallRecord): void {
    if (run.overrun === undefined) return;
    run.overrun = undefined;
    run.permitsBack(true);
    run.release();
  }

  private permitsBack(abandoned: boolean): void {
    const { batch, call, index } = this;
    if (batch.watched) batch.report({ type: 'released', callId: call.callId, tool: call.tool, index, at: batch.scheduler.now(), abandoned });
  }

  /** @internal The shared lanes a nested run of this call's body may run in: this call's permits, lent, and its callers' loans. */
  lend(): ReadonlyMap<string, Loan> {
    if (this.lentLanes !== undefined) return this.lentLanes;
    const { steps, taken, dispatcher } = this;
    const lanes = new Map(dispatcher?.lent ?? noLoans);
    // Only while the call holds its permits: a call that is over lends nothing of its own.
    if (dispatcher !== undefined && taken > 0 && this.state === 'running' && !this.done) {
      const loans = (this.loans = new Array<Loan | undefined>(taken));
      for (let i = 0; i < taken; i++) {
        const step = steps[i]!;
        if (step.store !== dispatcher.sharedLanes) continue;
        const loan = new Loan(step.key, this.permits[i]!.fence);
        loans[i] = loan;
        lanes.set(step.key, loan);
      }
    }
    return (this.lentLanes = lanes);
  }

  // Ends the watch and an Observable body's subscription, and lets go of them: a settled call
  // keeps only what it reports. Its ceilings, once it is done, do nothing when they come due.
  private halt(): void {
    this.watch?.release();
    if (this.running !== undefined) unsubscribeBody(this.running);
    this.watch = this.running = undefined;
  }

  /** Ends the call where it stands: the body's signal aborted if it had not settled, permits back (or kept by a body that still runs). */
  teardown(): void {
    // Once is enough: a teardown re-entered (from a watcher of the permits it gives back) or
    // repeated (by the batch's close) leaves the first to finish what it started.
    if (this.closed) return;
    this.closed = true;
    if (!this.done) {
      this.done = true;
      this.halt();
      this.invoked?.abort(new InvocationAbortedError('the call was stopped before it settled'));
    }
    this.letGo();
  }

  /**
   * Ends these calls where they stand. None starts in a permit another gives back: whoever tears
   * them down marks it first (the batch closed or stopped, the fan-out closing), and start() checks.
   */
  static teardownAll(records: readonly CallRecord[]): void {
    for (const record of records) record.teardown();
  }
}
