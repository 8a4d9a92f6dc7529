// The batch's records: one CallRecord per call, the object every stage of the pipeline passes on.
// It says where the call stands and what it ended as; what it holds in its lanes is its
// `lanes` part (callLanes.ts), what its body does its `body` part (callBody.ts). A record per
// call with methods, rather than an Observable, a Subscriber and a dozen closures per call: a
// batch of thousands is mostly these (docs/performance.md). The BatchScope its calls share is in
// batchScope.ts.
import { JournalError, toErrorInfo, ToolTimedOutError, type ErrorInfo } from '../errors.js';
import { journalCouldNotRecord, neverDispatchedMessage } from '../stopClass.js';
import type { LoopMonitor } from '../tools/index.js';
import { CallBody } from './callBody.js';
import { CallLanes, type LaneSource, type LaneStep } from './callLanes.js';
import { assignDelta } from './deltas.js';
import { InvocationAbortedError } from './invocation.js';
import { errorOutcome, interrupted, lostBeforeDispatch, lostOutcome, stoppedOutcome } from './stops.js';
import type { BatchScope } from './batchScope.js';
import type { LimitChange } from '../lanes/index.js';
import type { BatchCall, Delta, Outcome, StopReason, WriteAheadWaiter } from './types.js';

/** Where a call stands: before its lanes, waiting for them, its body invoked, or its outcome decided. */
export type CallState = 'waiting' | 'queued' | 'running' | 'ended';

/**
 * What `inLanes` passes on: a call's body as it starts (its `CallBody`, which the ceilings time),
 * or a call whose outcome is decided (its `CallRecord`, which the reorder waits for). Two types,
 * so a stage tells them apart without reading where the call stands.
 */
export type CallNews = CallRecord | CallBody;

/** What a record needs of the stage that enters it in its lanes (inLanes): where its news goes. */
export interface LaneEntry extends LaneSource {
  readonly monitor: LoopMonitor | undefined;
  /** True while its records are torn down: a permit one of them leaves must not start another. */
  readonly closing: boolean;
  /** The record's body is starting: its body goes on to the ceilings. */
  started(body: CallBody): void;
  /** The record's outcome is decided, before its permits are left (a partner's "slow down" pauses its tool first). */
  ending?(record: CallRecord): void;
  /** The record's outcome is decided: it goes on to the reorder. */
  ended(record: CallRecord): void;
  /** The record is done with its bookkeeping (its permits left or kept by its body): its phase may end. */
  over(record: CallRecord): void;
  /** The lanes the record takes, in order (worked out when it enters them). */
  lanesOf(record: CallRecord): readonly LaneStep[];
  /**
   * The record's body failed with a partner's "slow down" (RateLimitedError) and the record may
   * enter its lanes again once (it is idempotent, and has not): true if the batch's config says
   * so, its tool's rate lane then paused (and the tool's lanes worked out again); false to let it fail.
   */
  takeAgain?(record: CallRecord, error: ErrorInfo): boolean;
}

/**
 * One call of a batch, from the gate to its outcome: its lanes entered in order, then its body.
 * Its permits are left as soon as its outcome is decided, unless its body is still running (a
 * lane counts bodies that run), and again (harmlessly) in the teardown, so every ending leaves
 * them.
 */
export class CallRecord implements WriteAheadWaiter {
  readonly parallelSafe: boolean;
  /** Where the call stands. */
  state: CallState = 'waiting';
  /** Its outcome, once decided (and replaced by the settle steps). */
  outcome: Outcome | undefined = undefined;
  // What the gate said, when it refused the call (set by `refuse`).
  private refusal: ErrorInfo | undefined = undefined;
  /** What it holds in its lanes. */
  readonly lanes: CallLanes;
  /** What its body does. */
  readonly body: CallBody;
  // Who entered it in its lanes (inLanes), told when its body starts and when it ends.
  private entry: LaneEntry | undefined = undefined;
  /** @internal True once its body started and said "slow down", and the call entered its lanes again. */
  retried = false;
  // What the call recorded; kept only if it succeeds.
  private delta: Record<string, unknown> | undefined = undefined;
  // The write-ahead record of its dispatch (a run journal's): not asked, asked, or written.
  private ahead: 'unasked' | 'asked' | 'written' = 'unasked';

  constructor(
    readonly batch: BatchScope,
    readonly call: BatchCall,
    readonly index: number,
  ) {
    this.parallelSafe = call.parallelSafe !== false;
    this.lanes = new CallLanes(this);
    this.body = new CallBody(this);
  }

  /** A record whose outcome is decided (or that was torn down): its ceilings no longer matter. */
  static stale(record: CallRecord): boolean {
    return record.body.ended;
  }

  /** @internal True while `entry` entered this call in its lanes and its body has not ended. */
  inFlightFor(entry: LaneEntry): boolean {
    return this.entry === entry && !this.body.ended;
  }

  /** What the gate said, when it refused the call. */
  get refused(): ErrorInfo | undefined {
    return this.refusal;
  }

  /** The gate turned the call away: it will end as this error, never started. Only before it enters its lanes. */
  refuse(error: ErrorInfo): void {
    if (this.state === 'waiting') this.refusal = error;
  }

  /**
   * Enters the call in the lanes `entry.lanesOf` gives, in order; once all granted, its body
   * starts. A refused call ends at once, never started. `entry` hears when the body starts and
   * when the call ends.
   */
  enter(entry: LaneEntry): void {
    this.entry = entry;
    // Known already (a resumed run): never entered, never run again.
    const known = this.call.outcome;
    if (known !== undefined) {
      this.finish(known);
      return;
    }
    const refused = this.call.rejected ?? this.refused;
    if (refused !== undefined) {
      this.finish(this.failure(false, refused));
      return;
    }
    this.state = 'queued';
    this.lanes.enter(entry, entry.lanesOf(this));
  }

  /** @internal Every lane granted: the body starts, unless the batch or the call ended meanwhile. */
  start(): void {
    const { batch, call, body } = this;
    const entry = this.entry!;
    // A permit left while the batch is stopping, or while its fan-out is torn down (its
    // subscriber left), can reach a waiter of this same batch before its own teardown runs:
    // such a call must not start now.
    if (batch.stopped !== undefined || batch.closed || body.ended || entry.closing) return;
    // Write-ahead: a journaled call's dispatch is recorded before its body starts; it waits
    // here, holding its permits, and a stop meanwhile finds it queued (never started).
    if (batch.writeAhead !== undefined && this.ahead !== 'written') {
      if (this.ahead === 'unasked') {
        this.ahead = 'asked';
        batch.writeAhead.dispatching(call, this.index, this);
      }
      return;
    }
    if (batch.watched) batch.report({ type: 'started', callId: call.callId, tool: call.tool, index: this.index, at: batch.scheduler.now() });
    // The report may have set off a stop: then the body must not run.
    if (batch.stopped !== undefined || batch.closed || body.ended) return;
    // On to the ceilings, which time the call from here. A call entered again after a "slow down"
    // runs within the ceilings armed at its first start: its body goes on only once.
    if (!this.retried) entry.started(body);
    if (batch.stopped !== undefined || batch.closed || body.ended) return;
    // Running from the moment its body is invoked: a call stopped before that never started.
    this.state = 'running';
    // Its rate lanes count it from here, whatever lanes it waited in after them.
    this.lanes.started();
    body.start(entry.monitor);
  }

  /** @internal The write-ahead record of its dispatch was written (the body starts), or could not be (the call fails, never started). */
  written(error: Error | undefined): void {
    if (this.body.ended || this.ahead !== 'asked') return;
    if (error !== undefined) {
      this.finish(this.failure(false, toErrorInfo(new JournalError(neverDispatchedMessage(journalCouldNotRecord(error.message))))));
      return;
    }
    this.ahead = 'written';
    this.start();
  }

  /** @internal A lane store could not take the call's request: it fails, never started. */
  failUnstarted(error: ErrorInfo): void {
    if (!this.body.ended) this.finish(this.failure(false, error));
  }

  /** @internal The body's result. */
  succeed(result: unknown): void {
    this.finish({ index: this.index, callId: this.call.callId, tool: this.call.tool, kind: 'result', dispatched: true, result, delta: this.delta });
  }

  /** @internal The body's error; one that says its request went out and was cut off is a call stopped in flight. */
  fail(error: unknown): void {
    if (interrupted(error)) this.finish(lostOutcome(this.call, this.index, toErrorInfo(error)));
    else this.finish(this.failure(true, toErrorInfo(error)));
  }

  /**
   * @internal The body said "slow down" (RateLimitedError) after its synchronous part returned:
   * an idempotent call, not entered again yet, leaves its permits and enters its lanes again
   * from the first when the turn's config says `retryRateLimited` (its tool's rate lane, paused,
   * makes it wait out the pause holding nothing else), and its body starts once more. False to
   * let it fail.
   */
  takeAgain(error: unknown): boolean {
    const { entry, batch, body } = this;
    if (this.retried || this.call.idempotent !== true || this.state !== 'running' || entry?.takeAgain === undefined) return false;
    if (batch.stopped !== undefined || batch.closed || entry.closing || interrupted(error)) return false;
    const info = toErrorInfo(error);
    if (info.name !== 'RateLimitedError' || !entry.takeAgain(this, info)) return false;
    this.retried = true;
    body.again();
    this.state = 'queued';
    // Worked out again: the tool's rate lane, paused now, is among them even where no rate is declared.
    this.lanes.enterAgain(entry.lanesOf(this));
    return true;
  }

  // This call's error outcome.
  private failure(dispatched: boolean, error: ErrorInfo): Outcome {
    const { callId, tool } = this.call;
    return errorOutcome({ index: this.index, callId, tool }, dispatched, error);
  }

  /**
   * @internal A lane store shared by a fleet lost a permit this call held or waited for (its
   * lease ran out unrefreshed, or its Redis could not be reached): a call whose body had not
   * started fails, never started; a call running has its body aborted and ends alone, safe to
   * call again if idempotent, else its side effect may have landed. Nothing runs it again.
   */
  lost(error: Error): void {
    if (this.body.ended) return;
    const info = toErrorInfo(error);
    if (this.state !== 'running') {
      this.finish(this.failure(false, lostBeforeDispatch(info)));
      return;
    }
    this.body.abort(error);
    this.finish(lostOutcome(this.call, this.index, info));
  }

  /** The call outran its own ceiling (its tool's perToolSeconds): it fails, its body aborted. */
  outrun(seconds: number): void {
    if (this.body.ended) return;
    const { tool, idempotent } = this.call;
    this.body.abort(new InvocationAbortedError(`${tool} outran its ${seconds}s ceiling`));
    this.fail(new ToolTimedOutError(tool, seconds, idempotent === true));
  }

  /** @internal What the body recorded (through its context's `record`). */
  recorded(patch: Delta): void {
    if (this.body.ended) return; // too late: the call has its outcome
    if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) {
      throw new TypeError(`record(delta) expects an object of state keys, got ${patch === null ? 'null' : typeof patch}`);
    }
    this.delta = assignDelta(this.delta ?? {}, patch);
  }

  /** @internal The body reported what the call cost in all: its budget lanes take it (dropped once the call has ended). */
  costReported(total: number): void {
    if (!this.body.ended) this.lanes.charge(total);
  }

  /** @internal An adaptive lane's limit moved on what this call reported: told to watchers. */
  limitChanged(change: LimitChange): void {
    const { batch, call, index } = this;
    if (!batch.watched) return;
    const { key: lane, limit, previous, cause } = change;
    batch.report({ type: 'limit-changed', callId: call.callId, tool: call.tool, index, at: batch.scheduler.now(), lane, limit, previous, cause });
  }

  /** @internal The body reported how far it has got: told to watchers while the call has not ended. */
  progressed(progress: number, total: number | undefined, message: string | undefined): void {
    const { batch, call, index } = this;
    if (this.body.ended || !batch.watched) return;
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

  // The call's own end (its answer, failure, ceiling, lost lane, refusal): decided once. Its
  // callers come only while the call is open (the body hears an answer only then).
  private finish(outcome: Outcome): void {
    const { batch, body, entry } = this;
    if (this.state === 'ended') return;
    body.halt(undefined);
    // A stop set off by anything below (the consumer of the outcome, an activity watcher, a lane
    // watcher, the permits left) takes effect once this call has done all of it: under FAIL_RUN,
    // the failure's own outcome goes out and its permits are left before its siblings are
    // classified, and no sibling starts in the permits it left.
    batch.hold();
    try {
      this.conclude(outcome);
      entry?.ending?.(this);
      // The permits are left before the outcome travels on, so the next waiter starts without
      // waiting for what the outcome sets off downstream (the settle steps, the transcript, a
      // run's next turn). Not a failure under FAIL_RUN: it stops the batch on its way, before any
      // sibling may start in its permits.
      if (batch.failsOn(outcome)) {
        entry?.ended(this);
        this.leaveLanes();
      } else {
        this.leaveLanes();
        entry?.ended(this);
      }
    } finally {
      batch.endHold();
    }
    entry?.over(this);
  }

  /**
   * Gives the call its outcome (a stage answering from a cache, before `inLanes`; the stop's
   * classification), told as ended. A body that had not started never will.
   */
  decide(outcome: Outcome): void {
    this.body.halt(undefined);
    this.conclude(outcome);
  }

  /**
   * The batch stopped with `reason` and the call has no outcome: it gets one, by whether its body
   * was invoked (a call waiting to start again after a "slow down" was: its first attempt went out).
   */
  classify(reason: StopReason): void {
    if (this.outcome !== undefined) return;
    this.decide(stoppedOutcome(this.call, this.index, this.state === 'running' || this.retried, reason));
  }

  /** The settle steps gave the call its final outcome. */
  settled(outcome: Outcome): void {
    this.outcome = outcome;
    this.batch.settledActivity(this, outcome);
  }

  private conclude(outcome: Outcome): void {
    const { call, index, batch } = this;
    this.outcome = outcome;
    this.state = 'ended';
    // Adaptive and budget lanes hear how the work went before any permit is left.
    this.lanes.tell(outcome);
    if (batch.watched) batch.report({ type: 'ended', callId: call.callId, tool: call.tool, index, at: batch.scheduler.now(), outcome: outcome.kind, overrun: this.body.state === 'overrun' });
  }

  /**
   * @internal The call ended: its permits are left, unless its body still runs (a Promise not
   * yet settled, its abort ignored or not yet heard), which keeps them until it settles or
   * abandonAfterSeconds gives up on it; a body still in its synchronous part decides once it returns.
   */
  leaveLanes(): void {
    const { state } = this.body;
    if (state === 'invoking' || state === 'ending') return;
    if (state === 'overrun') this.lanes.keep();
    else this.lanes.leave();
  }

  /** Ends the call where it stands: the body's signal aborted if it had not settled, permits left (or kept by a body that still runs). */
  teardown(): void {
    // Once is enough: a teardown re-entered (from a watcher of the permits it leaves) or
    // repeated (by the batch's close) leaves the first to finish what it started.
    if (this.body.ended) return;
    this.lanes.tell(this.state === 'running' ? 'stopped' : 'unstarted');
    this.body.halt(new InvocationAbortedError('the call was stopped before it settled'));
    this.leaveLanes();
  }

  /**
   * Ends these calls where they stand. None starts in a permit another leaves: whoever tears
   * them down marks it first (the batch closed or stopped, the fan-out closing), and start() checks.
   */
  static teardownAll(records: readonly CallRecord[]): void {
    for (const record of records) record.teardown();
  }
}
