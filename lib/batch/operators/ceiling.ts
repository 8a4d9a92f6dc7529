// The ceilings: each call timed from the moment its body starts. Its own ceiling (its tool's
// perToolSeconds) fails that call alone with ToolTimedOutError; the run-wide toolCallSeconds
// stops the whole batch. Every call of one batch with the same duration shares one timer
// queue (they expire in the order they were armed), so a ceiling is three array slots, not a
// timer per call; the queues end with the subscription. On the batch's scheduler, so ceilings
// run in virtual time under TestScheduler.
import { identity, type MonoTypeOperatorFunction, type Subscriber } from 'rxjs';
import { own } from '../../config/index.js';
import { DeadlineExceededError, toErrorInfo, ToolTimedOutError } from '../../errors.js';
import { Ceilings } from '../ceilings.js';
import { CallBody } from '../callBody.js';
import { CallRecord, type CallNews } from '../records.js';
import { Stage, staged } from '../../directSubscriber.js';

/** The durations calls are timed by, in seconds. */
export interface CeilingLimits {
  /** Each tool's own ceiling: outrunning it fails that call alone. */
  readonly perToolSeconds?: Readonly<Record<string, number>>;
  /** The run-wide ceiling on any one call: outrunning it stops the batch (reason `deadline`). */
  readonly toolCallSeconds?: number;
}

/**
 * Times each call from the moment its body starts (when `inLanes` emits its `CallBody`):
 * `perToolSeconds[tool]` fails that call alone with `ToolTimedOutError` (its body's signal
 * aborted), `toolCallSeconds` stops the whole batch with a `DeadlineExceededError`. When both
 * are equal, the call's own ceiling comes first: it fails alone and the batch goes on. A record
 * whose outcome is decided first is passed over when its time comes. Without limits, the
 * identity.
 *
 * ## Example
 * ```ts
 * concatMap((phase$) => phase$.pipe(inLanes(plan))),
 * ceiling({ perToolSeconds: { search: 2 } }),
 * // a search still running 2s after it started: TOOL_ERROR ToolTimedOutError
 * ```
 */
export function ceiling(limits: CeilingLimits = {}): MonoTypeOperatorFunction<CallNews> {
  const { perToolSeconds = {}, toolCallSeconds } = limits;
  if (Object.keys(perToolSeconds).length === 0 && toolCallSeconds === undefined) return identity;
  return staged((out) => new Ceiling(out, perToolSeconds, toolCallSeconds));
}

// One subscription of ceiling: the batch's timer queues, one per duration, made with the first
// body that needs one, and what expires on them. The stage alone knows what each call is timed
// by: nothing of it is written on the record.
class Ceiling extends Stage<CallNews> {
  private ceilings: Ceilings<CallRecord> | undefined = undefined;
  // What expires, made once per subscription (not per call): the call's own ceiling fails it
  // alone; toolCallSeconds stops the batch.
  private readonly outran: (record: CallRecord) => void;
  private readonly overdue: (record: CallRecord) => void;

  constructor(
    out: Subscriber<CallNews>,
    private readonly perToolSeconds: Readonly<Record<string, number>>,
    private readonly toolCallSeconds: number | undefined,
  ) {
    super(out);
    this.outran = (record) => record.cutOff(new ToolTimedOutError(record.call.tool, own(perToolSeconds, record.call.tool)!, record.call.idempotent === true));
    this.overdue = (record) => {
      if (CallRecord.stale(record)) return;
      const error = new DeadlineExceededError('toolCallSeconds', toolCallSeconds!, record.call);
      record.batch.stop({ kind: 'deadline', why: error.message, error: toErrorInfo(error), callId: record.call.callId });
    };
  }

  protected take(news: CallNews): void {
    if (news instanceof CallBody) this.arm(news.record);
    this.out.next(news);
  }

  private arm(record: CallRecord): void {
    const { perToolSeconds, toolCallSeconds } = this;
    const queues = (this.ceilings ??= new Ceilings<CallRecord>(record.batch.scheduler, CallRecord.stale));
    const seconds = own(perToolSeconds, record.call.tool);
    if (seconds !== undefined) queues.arm(seconds * 1000, this.outran, record);
    // A call whose own ceiling is no longer than toolCallSeconds is ended by it first, or at
    // the same instant, and then its own ceiling wins: it is the more specific declaration,
    // and the call never ran longer than toolCallSeconds. So its deadline is not armed at
    // all, and which of two timers due together a scheduler runs first cannot change that.
    if (toolCallSeconds !== undefined && !(seconds !== undefined && seconds <= toolCallSeconds)) queues.arm(toolCallSeconds * 1000, this.overdue, record);
  }

  override unsubscribe(): void {
    this.ceilings?.close();
    this.ceilings = undefined;
    super.unsubscribe();
  }
}
