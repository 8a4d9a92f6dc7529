// The ceilings: each call timed from the moment its body starts. Its own ceiling (its tool's
// perToolSeconds) fails that call alone with ToolTimedOutError; the run-wide toolCallSeconds
// stops the whole batch. Every call of one batch with the same duration shares one timer
// queue (they expire in the order they were armed), so a ceiling is three array slots, not a
// timer per call; the queues end with the subscription. On the batch's scheduler, so ceilings
// run in virtual time under TestScheduler.
import { identity, type MonoTypeOperatorFunction, type Subscriber } from 'rxjs';
import { own } from '../../config/index.js';
import { DeadlineExceededError, toErrorInfo } from '../../errors.js';
import { Ceilings } from '../ceilings.js';
import { CallRecord } from '../records.js';
import { Stage, staged } from './stage.js';

/** The durations calls are timed by, in seconds. */
export interface CeilingLimits {
  /** Each tool's own ceiling: outrunning it fails that call alone. */
  readonly perToolSeconds?: Readonly<Record<string, number>>;
  /** The run-wide ceiling on any one call: outrunning it stops the batch (reason `deadline`). */
  readonly toolCallSeconds?: number;
}

// What expires, as functions of the record, so arming a ceiling makes no closure.
function outran(record: CallRecord): void {
  const seconds = own(record.ceilingOf ?? {}, record.call.tool);
  if (seconds !== undefined) record.outrun(seconds);
}

function overdue(record: CallRecord): void {
  if (CallRecord.stale(record)) return;
  const seconds = record.deadlineOf!;
  const error = new DeadlineExceededError('toolCallSeconds', seconds, record.call);
  record.batch.stop({ kind: 'deadline', why: error.message, error: toErrorInfo(error), callId: record.call.callId });
}

/**
 * Times each record from the moment its body starts (when `inLanes` emits it as running):
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
export function ceiling(limits: CeilingLimits = {}): MonoTypeOperatorFunction<CallRecord> {
  const { perToolSeconds = {}, toolCallSeconds } = limits;
  if (Object.keys(perToolSeconds).length === 0 && toolCallSeconds === undefined) return identity;
  return staged((out) => new Ceiling(out, perToolSeconds, toolCallSeconds));
}

// One subscription of ceiling: the batch's timer queues, one per duration, made with the first record that needs one.
class Ceiling extends Stage<CallRecord> {
  private ceilings: Ceilings<CallRecord> | undefined = undefined;

  constructor(
    out: Subscriber<CallRecord>,
    private readonly perToolSeconds: Readonly<Record<string, number>>,
    private readonly toolCallSeconds: number | undefined,
  ) {
    super(out);
  }

  protected take(record: CallRecord): void {
    if (record.state === 'running' && record.ceilingOf === undefined) {
      const { perToolSeconds, toolCallSeconds } = this;
      const queues = (this.ceilings ??= new Ceilings<CallRecord>(record.batch.scheduler, CallRecord.stale));
      record.ceilingOf = perToolSeconds;
      const seconds = own(perToolSeconds, record.call.tool);
      if (seconds !== undefined) queues.arm(seconds * 1000, outran, record);
      // A call whose own ceiling is no longer than toolCallSeconds is ended by it first, or at
      // the same instant, and then its own ceiling wins: it is the more specific declaration,
      // and the call never ran longer than toolCallSeconds. So its deadline is not armed at
      // all, and which of two timers due together a scheduler runs first cannot change that.
      if (toolCallSeconds !== undefined && !(seconds !== undefined && seconds <= toolCallSeconds)) {
        record.deadlineOf = toolCallSeconds;
        queues.arm(toolCallSeconds * 1000, overdue, record);
      }
    }
    this.out.next(record);
  }

  override unsubscribe(): void {
    this.ceilings?.close();
    this.ceilings = undefined;
    super.unsubscribe();
  }
}
