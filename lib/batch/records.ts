// A call's life, in one place: one CallRecord per call, from its arrival to its outcome, with
// the one state it stands in and one verb for each way it can end (docs/architecture.md, "A
// call's life"). What it holds in its lanes is its `lanes` part (callLanes.ts); what its body is
// handed, and how an Observable answer or a stall is heard, its `body` part (callBody.ts);
// neither keeps a state of its own. A value or a Promise answer the record hears itself. A record
// per call with methods, rather than an Observable, a Subscriber and a dozen closures per call: a
// batch of thousands is mostly these (docs/performance.md).
import type { Subscribable, Unsubscribable } from 'rxjs';
import { EventLoopStalledError, JournalError, toErrorInfo, ToolTimedOutError, type ErrorInfo } from '../errors.js';
import { journalCouldNotRecord, neverDispatchedMessage } from '../stopClass.js';
import type { LoopMonitor } from '../tools/index.js';
import { takeAnswer, unsubscribeQuietly, type AnswerObserver } from './answer.js';
import { CallBody, InvocationAbortedError, threw } from './callBody.js';
import { CallLanes, type LaneSource, type LaneStep } from './callLanes.js';
import { errorOutcome, lostBeforeDispatch, lostOutcome, stoppedOutcome, wasCutOff } from './stops.js';
import type { BatchScope } from './batchScope.js';
import type { BatchCall, Outcome, StopReason, WriteAheadWaiter } from './types.js';

/**
 * Where a call stands: the one state of its life, written here alone.
 * - `arrived`: made, not in its lanes yet (the gate may still refuse it).
 * - `queued`: in its lanes, not every one granted yet (or entering them again after a "slow down").
 * - `writing`: every lane granted, its start being written ahead (a run journal); it holds its permits.
 * - `invoking`: its body's synchronous part runs, or its answer is being read.
 * - `awaiting`: its body answered with a Promise (or a thenable) not yet settled.
 * - `subscribed`: its body answered with an Observable whose first value has not come.
 * - `returning`: it ended while its body's synchronous part ran: its permits wait for the answer.
 * - `overrun`: it ended while its body's Promise still runs: a lane counts it until that settles.
 * - `over`: it ended, and nothing of its body runs.
 * The first six are open; the last three ended. A call ended by a teardown has no outcome until
 * the stop's classification gives it one (`cutOff`).
 */
export type CallState = 'arrived' | 'queued' | 'writing' | 'invoking' | 'awaiting' | 'subscribed' | 'returning' | 'overrun' | 'over';

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
  done(record: CallRecord): void;
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
 * It ends one of five ways, each with its verb:
 * - `answered(value)`: its body's answer, a result;
 * - `failed(error)`: its body threw, rejected or errored;
 * - `cutOff(cause)`: something outside its body ended it: the batch's stop, a lost lane, its
 *   ceiling, the loop monitor;
 * - `refuse(error)`: turned away before its body started (the gate, a lane store, the journal);
 * - `decide(outcome)`: its outcome known already (a resumed run, a cache stage).
 * Its permits are left as soon as its outcome is decided, unless its body is still running (a
 * lane counts bodies that run), and again (harmlessly) in the teardown, so every ending leaves them.
 */
export class CallRecord implements WriteAheadWaiter, AnswerObserver<unknown> {
  readonly parallelSafe: boolean;
  /** Where the call stands. */
  state: CallState = 'arrived';
  /** Its outcome, once decided (and replaced by the settle steps). */
  outcome: Outcome | undefined = undefined;
  // What the gate said, when it refused the call (set by `refuse` before its lanes).
  private refusal: ErrorInfo | undefined = undefined;
  /** What it holds in its lanes. */
  readonly lanes: CallLanes;
  /** What its body is handed, and how its answer is heard. */
  readonly body: CallBody;
  // Who entered it in its lanes (inLanes), told when its body starts and when it ends.
  private entry: LaneEntry | undefined = undefined;
  /** @internal How many times its body started: 0, 1, or 2 after a "slow down" (it entered its lanes again). */
  starts = 0;

  constructor(
    readonly batch: BatchScope,
    readonly call: BatchCall,
    readonly index: number,
  ) {
    this.parallelSafe = call.parallelSafe !== false;
    this.lanes = new CallLanes(this);
    this.body = new CallBody(this);
  }

  /** True while its body runs and the call is open (invoking, awaiting, subscribed). */
  get running(): boolean {
    const { state } = this;
    return state === 'invoking' || state === 'awaiting' || state === 'subscribed';
  }

  /** True once the call ended (it has its outcome, or was torn down): later answers change nothing. */
  get ended(): boolean {
    const { state } = this;
    return state === 'returning' || state === 'overrun' || state === 'over';
  }

  /** A record that ended: its ceilings no longer matter. */
  static stale(record: CallRecord): boolean {
    return record.ended;
  }

  /** @internal True while `entry` entered this call in its lanes and it has not ended. */
  inFlightFor(entry: LaneEntry): boolean {
    return this.entry === entry && !this.ended;
  }

  /** What the gate said, when it refused the call. */
  get refused(): ErrorInfo | undefined {
    return this.refusal;
  }

  // ---- Its way in: the lanes, the write-ahead, the body ----

  /**
   * Enters the call in the lanes `entry.lanesOf` gives, in order; once all granted, its body
   * starts. A call refused before (by the gate, or its arguments) or whose outcome is known ends
   * at once, never started. `entry` hears when the body starts and when the call ends.
   */
  enter(entry: LaneEntry): void {
    this.entry = entry;
    // Known already (a resumed run): never entered, never run again.
    const known = this.call.outcome;
    if (known !== undefined) {
      this.end(known, true);
      return;
    }
    const refused = this.call.refused ?? this.refusal;
    if (refused !== undefined) {
      this.end(this.failure(false, refused), true);
      return;
    }
    this.state = 'queued';
    this.lanes.enter(entry, entry.lanesOf(this));
  }

  /**
   * @internal Every lane granted (its lanes part says so): the body starts, unless the batch or
   * the call ended meanwhile. `written`: its start was written ahead already.
   */
  start(written = false): void {
    const { batch, call, body } = this;
    const entry = this.entry!;
    // A permit left while the batch is stopping, or while its fan-out is torn down (its
    // subscriber left), can reach a waiter of this same batch before its own teardown runs:
    // such a call must not start now.
    if (batch.stopped !== undefined || batch.closed || this.ended || entry.closing) return;
    // Write-ahead: a journaled call's start is recorded before its body starts; it waits here,
    // holding its permits, and a stop meanwhile finds it never started. A call entering its
    // lanes again after a "slow down" was written at its first start.
    if (batch.writeAhead !== undefined && this.starts === 0 && !written) {
      if (this.state === 'queued') {
        this.state = 'writing';
        batch.writeAhead.dispatching(call, this.index, this);
      }
      return;
    }
    if (batch.watched) batch.report({ type: 'started', callId: call.callId, tool: call.tool, index: this.index, at: batch.scheduler.now() });
    // The report may have set off a stop: then the body must not run.
    if (batch.stopped !== undefined || batch.closed || this.ended) return;
    // On to the ceilings, which time the call from here. A call that entered its lanes again
    // after a "slow down" runs within the ceilings armed at its first start.
    if (this.starts === 0) entry.started(body);
    if (batch.stopped !== undefined || batch.closed || this.ended) return;
    // Started from the moment its body is invoked: a call stopped before that never started.
    this.starts++;
    this.state = 'invoking';
    // Its rate lanes count it from here, whatever lanes it waited in after them.
    this.lanes.started();
    this.follow(body.invoke(entry.monitor));
  }

  /** @internal The write-ahead record of its start was written (the body starts), or could not be (the call is refused). */
  written(error: Error | undefined): void {
    if (this.state !== 'writing') return;
    if (error === undefined) this.start(true);
    else this.refuse(toErrorInfo(new JournalError(neverDispatchedMessage(journalCouldNotRecord(error.message)))));
  }

  // What the body produced: a value or a Promise is taken (the record is its observer), an
  // Observable subscribed (its body part is its observer). While its synchronous part ran,
  // whatever ended the call (a stall, a stop the body set off itself) left the permits where they
  // are: only the answer says whether the body still runs (a Promise keeps them until it
  // settles) or is over.
  private follow(produced: unknown): void {
    const { body } = this;
    if (produced === threw) {
      // Left now, if the call's end waited for the body to return.
      this.leaveLanes();
      return;
    }
    const running = takeAnswer(produced, this);
    if (this.now() === 'invoking') {
      // No answer yet: the Observable's first value is awaited.
      body.following(running);
      this.state = 'subscribed';
      return;
    }
    // Answered while being subscribed, or ended meanwhile: nothing more is wanted of it.
    if (running !== undefined) unsubscribeQuietly(running);
    if (this.now() === 'returning') this.state = 'over';
    // Whether the call's end waited for the answer or not, its permits' fate is known now (leaving twice does nothing).
    if (this.now() !== 'awaiting') this.leaveLanes();
  }

  /** @internal Its body answered with an Observable (AnswerObserver): its body part subscribes it. */
  observable(answer: Subscribable<unknown>): Unsubscribable | undefined {
    // A call that ended while its body ran is not subscribed to its Observable at all.
    if (this.state === 'returning') {
      this.state = 'over';
      return undefined;
    }
    return this.body.subscribe(answer);
  }

  // The state as it is now: the calls above may have changed it (an answer, a stall, a stop).
  private now(): CallState {
    return this.state;
  }

  /** @internal Its body answered with a Promise: until it settles it runs, and counts in its lanes even if the call ends first. */
  pending(): void {
    if (this.state === 'invoking') this.state = 'awaiting';
    else if (this.state === 'returning') this.state = 'overrun';
  }

  // ---- How it ends: one verb for each way ----

  /** Its body answered: its value (a Promise's, an Observable's first, or undefined for one that completed without) is the result. */
  answered(result: unknown): void {
    if (this.bodyDone()) this.end({ index: this.index, callId: this.call.callId, tool: this.call.tool, kind: 'result', dispatched: true, result, delta: this.body.delta }, false);
  }

  /** @internal Its body's answer ended without a value (AnswerObserver): the result is undefined. */
  unanswered(): void {
    this.answered(undefined);
  }

  /**
   * Its body failed: it threw, rejected or errored (or its answer could not be read). One that
   * says its request went out and was cut off (CallInterruptedError) ends as a call cut off in
   * flight; one that says "slow down" after its synchronous part returned may start once more
   * (retryRateLimited).
   */
  failed(error: unknown): void {
    this.call.threw?.(error);
    const later = this.state === 'awaiting' || this.state === 'subscribed';
    if (!this.bodyDone()) return;
    if (later && this.takeAgain(error)) return;
    const info = toErrorInfo(error);
    this.end(wasCutOff(error) ? lostOutcome(this.call, this.index, info) : this.failure(true, info), false);
  }

  /**
   * Something outside its body ended the call:
   * - the batch stopped (`cause` a StopReason): a call without an outcome gets one by whether its
   *   body started (a call waiting to start again after a "slow down" did: its first attempt went
   *   out). Its teardown came first; the stop's stage passes it on.
   * - its ceiling (a ToolTimedOutError): it fails, its body's signal aborted;
   * - the loop monitor (an EventLoopStalledError): it fails;
   * - a lane store shared by a fleet lost a permit it held or waited for (any other error: its
   *   lease ran out unrefreshed, its Redis could not be reached), or a budget lane refused it: a
   *   call not started fails, never started; a running one has its body aborted and ends safe to
   *   call again if idempotent, else its side effect may have landed. Nothing runs it again.
   */
  cutOff(cause: StopReason | Error): void {
    if (!(cause instanceof Error)) {
      if (this.outcome === undefined) this.decide(stoppedOutcome(this.call, this.index, this.starts > 0, cause));
      return;
    }
    if (this.ended) return;
    if (cause instanceof ToolTimedOutError) {
      this.body.abort(new InvocationAbortedError(`${cause.tool} outran its ${cause.seconds}s ceiling`));
      this.end(this.failure(true, toErrorInfo(cause)), true);
      return;
    }
    if (cause instanceof EventLoopStalledError) {
      this.end(this.failure(true, toErrorInfo(cause)), true);
      return;
    }
    const info = toErrorInfo(cause);
    if (!this.running) {
      this.call.turnedAway?.(cause);
      this.end(this.failure(false, lostBeforeDispatch(info)), true);
      return;
    }
    this.body.abort(cause);
    this.call.cutOffBy?.(cause);
    this.end(lostOutcome(this.call, this.index, info), true);
  }

  /**
   * This call alone is stopped (its own signal), its batch going on: it ends where it stands
   * (its body's signal aborted, its permits left, or kept by a body that still runs) with the
   * outcome a stop of its batch would give it: never dispatched, or stopped in flight (safe to
   * call again if idempotent, else indeterminate). Its fan-out passes it on as any ended call.
   */
  stopAlone(reason: StopReason): void {
    if (this.ended || this.outcome !== undefined) return;
    this.lanes.tell(this.running ? 'stopped' : 'unstarted');
    this.halt(new InvocationAbortedError('the call was stopped before it settled'), true);
    this.end(stoppedOutcome(this.call, this.index, this.starts > 0, reason), true);
  }

  /**
   * The call is turned away before its body starts: it ends as `error`, never started. Before
   * its lanes (the gate), it ends so when it enters them, in its turn; in them (a lane store that
   * cannot take it, a journal that cannot write its start), at once. Once started, too late.
   */
  refuse(error: ErrorInfo): void {
    if (this.state === 'arrived') this.refusal = error;
    else if (this.state === 'queued' || this.state === 'writing') this.end(this.failure(false, error), true);
  }

  /**
   * Gives the call its outcome from outside (a stage answering from a cache, before `inLanes`; the
   * stop's classification), told as ended; whoever decides passes the record on. A body that had
   * not started never will.
   */
  decide(outcome: Outcome): void {
    this.halt(undefined, true);
    this.conclude(outcome);
  }

  /** The settle steps gave the call its final outcome. */
  settled(outcome: Outcome): void {
    this.outcome = outcome;
    this.batch.settledActivity(this, outcome);
  }

  // The body answered or failed: true when the call is open and takes it. A body its call
  // outlived is over now, an overrun's permits going back.
  private bodyDone(): boolean {
    switch (this.state) {
      case 'invoking':
      case 'awaiting':
      case 'subscribed':
        return true;
      case 'overrun':
        this.state = 'over';
        this.lanes.bodyOver();
        return false;
      case 'returning':
        this.state = 'over';
        return false;
      default:
        return false;
    }
  }

  /**
   * The body said "slow down" (RateLimitedError) after its synchronous part returned: an
   * idempotent call, not entered again yet, leaves its permits and enters its lanes again from
   * the first when the turn's config says `retryRateLimited` (its tool's rate lane, paused, makes
   * it wait out the pause holding nothing else), and its body starts once more. False to let it fail.
   */
  private takeAgain(error: unknown): boolean {
    const { entry, batch } = this;
    if (this.starts !== 1 || this.call.idempotent !== true || entry?.takeAgain === undefined) return false;
    if (batch.stopped !== undefined || batch.closed || entry.closing || wasCutOff(error)) return false;
    const info = toErrorInfo(error);
    if (info.name !== 'RateLimitedError' || !entry.takeAgain(this, info)) return false;
    this.body.drop(undefined);
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

  // The call's own end (every way but a decision from outside): decided once, told to its
  // fan-out. `bodyRuns`: false when its body's own answer ends it.
  private end(outcome: Outcome, bodyRuns: boolean): void {
    const { batch, entry } = this;
    if (this.outcome !== undefined) return;
    this.halt(undefined, bodyRuns);
    // A stop set off by anything below (the consumer of the outcome, an activity watcher, a lane
    // watcher, the permits left) takes effect once this call has done all of it: under FAIL_RUN,
    // the failure's own outcome goes out and its permits are left before its siblings are
    // classified, and no sibling starts in the permits it left.
    batch.deferStop();
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
      batch.allowStop();
    }
    entry?.done(this);
  }

  private conclude(outcome: Outcome): void {
    const { call, index, batch } = this;
    this.outcome = outcome;
    // Adaptive and budget lanes hear how the work went before any permit is left.
    this.lanes.tell(outcome);
    if (batch.watched) batch.report({ type: 'ended', callId: call.callId, tool: call.tool, index, at: batch.scheduler.now(), outcome: outcome.kind, overrun: this.state === 'overrun' });
  }

  // The call ends where it stands: a body in its synchronous part is `returning`, a Promise still
  // running an `overrun`, anything else `over`; its body let go (its signal aborted with `reason`
  // if one is given, its watch ended, an Observable unsubscribed). An ended call stays as it is.
  private halt(reason: Error | undefined, bodyRuns: boolean): void {
    const { state } = this;
    if (state === 'returning' || state === 'overrun' || state === 'over') return;
    this.state = !bodyRuns ? 'over' : state === 'invoking' ? 'returning' : state === 'awaiting' ? 'overrun' : 'over';
    this.body.drop(reason);
  }

  /**
   * @internal The call ended: its permits are left, unless its body still runs (a Promise not
   * yet settled, its abort ignored or not yet heard), which keeps them until it settles or
   * abandonAfterSeconds gives up on it; a body still in its synchronous part decides once it returns.
   */
  leaveLanes(): void {
    const { state } = this;
    if (state === 'invoking' || state === 'returning') return;
    if (state === 'overrun') this.lanes.keep();
    else this.lanes.leave();
  }

  /**
   * Ends the call where it stands, with no outcome yet: its body's signal aborted if it had not
   * answered, permits left (or kept by a body that still runs). When several calls are torn down
   * together, none may start in a permit another leaves: whoever tears them down marks it first
   * (the batch closed or stopped, the fan-out closing), and start() checks.
   */
  teardown(): void {
    // Once is enough: a teardown re-entered (from a watcher of the permits it leaves) or
    // repeated (by the batch's close) leaves the first to finish what it started.
    if (this.ended) return;
    this.lanes.tell(this.running ? 'stopped' : 'unstarted');
    this.halt(new InvocationAbortedError('the call was stopped before it settled'), true);
    this.leaveLanes();
  }
}
