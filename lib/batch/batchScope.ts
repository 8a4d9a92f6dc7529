// What the calls of one batch share: their records in call order, their clock, where their
// activity goes, and their stop (deferred while a call is mid-bookkeeping). Made once per batch by
// runBatch (or by phases); every stage reaches it through a record's `batch`.
import { asyncScheduler, type Observer, type SchedulerLike, type Subscribable, type Unsubscribable } from 'rxjs';
import { LaneTable } from '../lanes/index.js';
import { reportUnhandled } from '../unhandled.js';
import { CallRecord } from './records.js';
import { failedBy, failsFast } from './stops.js';
import type { ActivitySink, BatchCall, CallActivity, ErrorOutcome, Outcome, StopReason, WriteAhead } from './types.js';

/** What a batch is made with (by `phases`, or by `runBatch` for all its stages). */
export interface BatchScopeOptions {
  /** For time: activity stamps, ceilings, grace timers. Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
  /** Live scheduling events: a function, or a sink that says whether anyone is watching. */
  readonly onActivity?: ((activity: CallActivity) => void) | ActivitySink;
  /** Stop the batch at the first failed call (the FAIL_RUN policy). */
  readonly failFast?: boolean;
  /** A stop from outside, listened to from the moment the batch is made until it ends. */
  readonly stop$?: Subscribable<StopReason>;
  /** Records each call's dispatch before its body starts. */
  readonly writeAhead?: WriteAhead;
  /** The turn lanes, when the batch shares a turn with others. Default: a table of its own, made on first use. */
  readonly turnLanes?: LaneTable;
}

/**
 * What the calls of one batch share: their records in call order, their clock, where their
 * activity goes, and their stop. Made once per batch (per subscription); it is also the
 * batch's stop source (`untilStopped(batch)` hears the first stop from anywhere).
 */
export class BatchScope implements Subscribable<StopReason> {
  /** Every call's record, in call order. */
  readonly records: CallRecord[] = [];
  /** The calls, when the turn was given whole: how many there are, and to which tools, is known before the first enters its lanes. */
  readonly given: readonly BatchCall[] | undefined;
  readonly scheduler: SchedulerLike;
  readonly activity: ActivitySink | undefined;
  readonly failFast: boolean;
  /** Where each call's dispatch is recorded before its body starts, if anywhere. */
  readonly writeAhead: WriteAhead | undefined;
  // The first stop; later ones change nothing. Written by stop() alone.
  private reason: StopReason | undefined = undefined;
  /** True once the batch's subscriber left (or the batch ended): nothing more enters its lanes or is asked. */
  closed = false;
  // How many calls the batch has, once they have all arrived (or at once, given whole).
  private total: number | undefined;
  // Who hears the stop once it takes effect (untilStopped).
  private listener: ((reason: StopReason) => void) | undefined = undefined;
  // Calls in the middle of their own bookkeeping, and whether the stop waits for them.
  private busy = 0;
  private stopWaits = false;
  private told = false;
  // The outside stop's subscription.
  private outside: Unsubscribable | undefined = undefined;
  // Calls whose settled activity went out: every call before this index.
  private settledUpTo = 0;
  // The batch's own lanes, made on first use: its turn lanes (the turn, and the turn's narrower
  // per-tool bounds), and the lanes a batch given no shared ones keeps for itself. One of each
  // per batch, not per phase: a body that overruns its call keeps its permits into later phases.
  private turnTable: LaneTable | undefined = undefined;
  private ownTable: LaneTable | undefined = undefined;

  /**
   * `given`: the calls, when the turn is given whole (an array, not an Observable of calls): how
   * many there are, and to which tools, is known before the first enters its lanes.
   */
  constructor(options: BatchScopeOptions = {}, given?: readonly BatchCall[]) {
    this.given = given;
    this.total = given?.length;
    this.scheduler = options.scheduler ?? asyncScheduler;
    const { onActivity } = options;
    this.activity = typeof onActivity === 'function' ? { observed: true, next: onActivity } : onActivity;
    this.failFast = options.failFast ?? false;
    this.writeAhead = options.writeAhead;
    this.turnTable = options.turnLanes;
    if (options.stop$ !== undefined) {
      const subscription = options.stop$.subscribe({ next: (reason) => this.stop(reason) });
      if (this.stopped !== undefined) subscription.unsubscribe();
      else this.outside = subscription;
    }
  }

  /** A record for call `call`, the batch's call number `index`. */
  record(call: BatchCall, index: number): CallRecord {
    const record = new CallRecord(this, call, index);
    this.records.push(record);
    return record;
  }

  /** Every call has arrived: `count` of them. */
  arrived(count: number): void {
    this.total = count;
  }

  /** @internal The batch's turn lanes, shared by all of its phases. */
  get turnLanes(): LaneTable {
    return (this.turnTable ??= new LaneTable());
  }

  /** @internal The shared lanes of a batch given none, shared by all of its phases. */
  get ownLanes(): LaneTable {
    return (this.ownTable ??= new LaneTable());
  }

  /** How many calls the batch has (so far, while they may still arrive). */
  get size(): number {
    return this.total ?? this.records.length;
  }

  /** How many calls the batch will have, if all have arrived or were given at once. */
  get expected(): number | undefined {
    return this.total;
  }

  /**
   * The batch's stop, once it was stopped: the one holder of it (untilStopped and the fan-outs
   * read it here). Set by `stop` alone; the first stop wins.
   */
  get stopped(): StopReason | undefined {
    return this.reason;
  }

  /** Stops the batch (the first stop wins); it takes effect once no call is mid-bookkeeping. */
  stop(reason: StopReason): void {
    if (this.reason !== undefined) return;
    this.reason = reason;
    this.outside?.unsubscribe();
    this.outside = undefined;
    if (this.busy > 0) this.stopWaits = true;
    else this.tell(reason);
  }

  /**
   * FAIL_RUN, decided here alone: true when `outcome` is a failure of the call's own (not a stop
   * of this batch) and the batch fails fast. Such a call's permits go back only after its outcome
   * went on (records.ts), so no sibling starts in them before the stop.
   */
  failsOn(outcome: Outcome): outcome is ErrorOutcome {
    return failsFast(this.failFast, outcome);
  }

  /**
   * The one step of FAIL_RUN, taken by each stage that lets an outcome go on (untilStopped, for a
   * body's failure; settle, for a failure a settle step made) once it has gone on: a failure of
   * the call's own stops the batch, its reason naming the call. The first stop wins, so a failure
   * seen by both stages stops the batch once. The order it relies on: the failing record defers
   * the stop (`deferStop`) and sends its outcome on before its permits go back (`failsOn`, in
   * records.ts), so `stopped` is set before a sibling could start in them (a start checks it),
   * and the stop is told (its siblings classified) only once the record allows it.
   */
  stopIfFailed(outcome: Outcome): void {
    if (this.failsOn(outcome)) this.stop(failedBy(outcome, outcome.error));
  }

  /** Who hears the stop once it takes effect. One listener: the batch's untilStopped. */
  onStop(listener: (reason: StopReason) => void): void {
    this.listener = listener;
    if (this.stopped !== undefined && this.busy === 0 && !this.stopWaits) this.tell(this.stopped);
  }

  /** Subscribable: `untilStopped(batch)` listens to the batch's own stop. */
  subscribe(observer: Partial<Observer<StopReason>>): Unsubscribable {
    this.onStop((reason) => observer.next?.(reason));
    return { unsubscribe: () => (this.listener = undefined) };
  }

  private tell(reason: StopReason): void {
    if (this.told || this.listener === undefined) return;
    this.told = true;
    this.listener(reason);
  }

  /** A call is in the middle of its own bookkeeping: a stop waits for it. */
  deferStop(): void {
    this.busy++;
  }

  /** The call's bookkeeping is done: a stop that waited for the last one takes effect. */
  allowStop(): void {
    if (--this.busy > 0 || !this.stopWaits) return;
    this.stopWaits = false;
    if (this.stopped !== undefined) this.tell(this.stopped);
  }

  /** Ends every call in its lanes (queued, or its body started) where it stands: bodies aborted, permits left. */
  teardownEntered(): void {
    // Together: every one is marked before any leaves its permits (the batch is closed or
    // stopped, which start() checks), so none starts in them.
    for (const record of this.records) if (record.state !== 'arrived' && !record.ended) record.teardown();
  }

  /** The records without an outcome, in call order. */
  unsettled(): CallRecord[] {
    return this.records.filter((record) => record.outcome === undefined);
  }

  /**
   * The stop's classification: every record without an outcome is cut off by it, and gets an
   * outcome by whether its body was invoked (`CallRecord.cutOff`). Returns them, in call order. A record decided
   * meanwhile (by the batch's close, its subscriber gone from inside a watcher) keeps its outcome.
   */
  classify(reason: StopReason): CallRecord[] {
    const open = this.unsettled();
    for (const record of open) record.cutOff(reason);
    return open;
  }

  // Live scheduling events, made only when someone watches.

  /** @internal */ get watched(): boolean {
    return this.activity?.observed === true;
  }

  /** @internal A watcher that throws must not cut a call's bookkeeping short: its error is reported the way RxJS reports a subscriber's. */
  report(event: CallActivity): void {
    try {
      this.activity!.next(event);
    } catch (error) {
      reportUnhandled(error);
    }
  }

  /** @internal The call's final outcome went out: what the transcript says of it. */
  settledActivity(record: CallRecord, outcome: Outcome): void {
    this.settledUpTo = record.index + 1;
    if (!this.watched) return;
    const sink = this.activity!;
    if (sink.outcome !== undefined) {
      try {
        sink.outcome(record.index, outcome);
      } catch (error) {
        reportUnhandled(error);
      }
    }
    const { callId, tool } = record.call;
    this.report({ type: 'settled', callId, tool, index: record.index, at: this.scheduler.now(), outcome: outcome.kind });
  }

  /**
   * The batch ends (its subscriber left, or it completed): from here no stop is heard, then
   * `tearDown` ends its stages (bodies aborted, permits left; a permit left may set off a
   * watcher that would stop the batch). A batch its subscriber left still tells watchers how
   * each call ended, so a timeline never shows a call running forever: a call with no outcome
   * yet is classified as a cancel would classify it.
   */
  close(tearDown?: () => void): void {
    this.closed = true;
    this.outside?.unsubscribe();
    this.outside = undefined;
    this.listener = undefined;
    tearDown?.();
    // Every call still in its lanes ends where it stands, whatever the stages' teardown reached:
    // left from inside that teardown (a watcher of the permits it leaves), the batch does
    // not wait for it to come round to the calls it has not torn down yet.
    this.teardownEntered();
    const { records } = this;
    if (this.settledUpTo >= records.length || !this.watched) return;
    const left: StopReason = { kind: 'cancelled', why: 'the batch was left before it ended (unsubscribed)' };
    for (let index = this.settledUpTo; index < records.length; index++) {
      const record = records[index]!;
      record.cutOff(left);
      this.settledActivity(record, record.outcome!);
    }
  }
}
