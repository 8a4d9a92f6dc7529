// One wrapped call as its request's batch runs it: the call (whose invoke keeps what its body threw,
// so a failure rejects with the body's own error), the context its body gets, the sink that tells
// its activity on ToolLanes' activity$ with its stop class, and how its outcome becomes the
// settling of the caller's Promise.
import type { Subject } from 'rxjs';
import { givenReason, type ActivitySink, type BatchCall, type CallActivity, type CallRecord, type InvokeContext, type Outcome, type StopReason } from '../batch/index.js';
import { wasCutOff } from '../batch/stops.js';
import { CallStoppedError, toErrorInfo, type ErrorInfo } from '../errors.js';
import type { RunnerActivity } from '../runner/index.js';
import { stopClassOf, type StopClass } from '../stopClass.js';
import type { LaneBody, LaneCallContext } from './types.js';

/** The stop a signal gives: `whose` (the request, the call) was cancelled, with the signal's reason when it gave one. */
export function cancelledBy(signal: AbortSignal, whose: string): StopReason {
  const given = givenReason(signal.reason);
  return { kind: 'cancelled', why: given === undefined ? `${whose} was cancelled` : `${whose} was cancelled: ${given}` };
}

// Nothing thrown yet (undefined can be thrown, so it cannot say so).
const nothing: unique symbol = Symbol('nothing thrown');
const noFences: Readonly<Record<string, string>> = Object.freeze({});

// What a body is handed: the batch's context, read through (its signal and fences are getters there).
class CallContext implements LaneCallContext {
  constructor(
    readonly callId: string,
    readonly tool: string,
    readonly tenant: string,
    readonly requestId: string,
    private readonly invocation: InvokeContext,
  ) {}

  get idempotencyKey(): string {
    return `${this.requestId}:${this.callId}`;
  }

  get signal(): AbortSignal {
    return this.invocation.signal;
  }

  get fence(): string | undefined {
    return this.invocation.fence;
  }

  get fences(): Readonly<Record<string, string>> {
    return this.invocation.fences ?? noFences;
  }

  progress(progress: number, total?: number, message?: string): void {
    this.invocation.progress?.(progress, total, message);
  }

  reportCost(total: number): void {
    this.invocation.reportCost?.(total);
  }
}

/** One wrapped call, as its batch schedules it. */
export class WrappedCall<T> implements BatchCall {
  /** What its body threw (or rejected with) last, if it did. */
  thrown: unknown = nothing;
  /** What a lane turned it away with before its body started, if one did (a budget's BudgetExceededError, say). */
  turnedAwayWith: unknown = nothing;
  /** What cut it off in flight (a lost fleet lease), if something did. */
  cutOffWith: unknown = nothing;
  /** Its record in its request's batch, once handed to it. */
  record: CallRecord | undefined = undefined;
  // The caller's Promise, settled by finish or fail.
  private resolve: ((value: T) => void) | undefined = undefined;
  private reject: ((error: unknown) => void) | undefined = undefined;

  constructor(
    readonly callId: string,
    readonly tool: string,
    readonly args: unknown,
    readonly parallelSafe: boolean | undefined,
    readonly idempotent: boolean | undefined,
    readonly cost: number | undefined,
    private readonly tenant: string,
    private readonly requestId: string,
    private readonly body: LaneBody<T>,
    /** The call's own signal: it stops this call alone. */
    readonly signal?: AbortSignal,
  ) {}

  /** Where its outcome goes: the caller's Promise. */
  settles(resolve: (value: T) => void, reject: (error: unknown) => void): void {
    this.resolve = resolve;
    this.reject = reject;
  }

  /** Its own signal aborted: the call alone is stopped, where it stands. */
  handleEvent(): void {
    this.record?.stopAlone(cancelledBy(this.signal!, 'the call'));
  }

  /** Its outcome is decided: the caller's Promise settles with it, and its signal is heard no more. */
  finish(outcome: Outcome): void {
    this.signal?.removeEventListener('abort', this);
    this.record = undefined;
    this.settle(outcome, this.resolve!, this.reject!);
  }

  /** Its batch failed (a bug in a stage): the caller's Promise rejects with that error. */
  fail(error: unknown): void {
    this.signal?.removeEventListener('abort', this);
    this.record = undefined;
    this.reject!(error);
  }

  /** Runs the body: what it returns goes to the batch as it is (what it throws or rejects with comes back through `threw`). */
  invoke(invocation: InvokeContext): unknown {
    return this.body(new CallContext(this.callId, this.tool, this.tenant, this.requestId, invocation));
  }

  /** What the body threw, rejected with or errored with: kept, so the caller's Promise rejects with the body's own error. */
  threw(error: unknown): void {
    this.thrown = error;
  }

  /** What a lane turned the call away with: kept, so the caller's Promise rejects with the lane's own error (its class and fields). */
  turnedAway(error: unknown): void {
    this.turnedAwayWith = error;
  }

  /** What cut it off in flight: kept, so a call that ends indeterminate still says why (its `cause`). */
  cutOffBy(error: unknown): void {
    this.cutOffWith = error;
  }

  /**
   * The Promise's settling for `outcome`: the result; the body's own error; a CallStoppedError
   * with the call's stop class; the lane's own error for a call a lane turned away before its
   * body started (a budget's BudgetExceededError); otherwise an Error of the outcome's name and
   * message.
   */
  settle(outcome: Outcome, resolve: (value: T) => void, reject: (error: unknown) => void): void {
    if (outcome.kind === 'result') {
      resolve(outcome.result as T);
      return;
    }
    const stopClass = stopClassOf(outcome);
    const message = outcome.kind === 'indeterminate' ? outcome.message : outcome.error.message;
    const own = outcome.kind === 'error' && this.threwIt(outcome.error);
    if (stopClass !== undefined) {
      // What cut it off, when it was not the call's stop: a ceiling, a lost lease, the body's CallInterruptedError.
      const by = outcome.kind === 'error' && outcome.stopped === undefined && outcome.error.name !== 'CallStoppedError' ? outcome.error : undefined;
      const cause = own ? this.thrown : by === undefined ? this.cutOffCause(outcome) : errorFrom(by);
      reject(new CallStoppedError(message, outcome.dispatched, { tool: this.tool, callId: this.callId, stopClass, cause }));
      return;
    }
    const { error } = outcome as { error: ErrorInfo };
    if (own) reject(this.thrown);
    else if (!outcome.dispatched && this.turnedAwayWith instanceof Error && this.turnedAwayWith.name === error.name) reject(this.turnedAwayWith);
    else reject(errorFrom(error));
  }

  // What cut off a call that ends indeterminate without a stop of its batch (an indeterminate
  // outcome carries no error): the lost lease, or the body's own CallInterruptedError.
  private cutOffCause(outcome: Outcome): unknown {
    if (outcome.kind !== 'indeterminate' || outcome.stopped !== undefined) return undefined;
    if (this.cutOffWith !== nothing) return this.cutOffWith;
    return this.thrown !== nothing && wasCutOff(this.thrown) ? this.thrown : undefined;
  }

  // True when `error` is what the body threw, read as the batch read it.
  private threwIt(error: ErrorInfo): boolean {
    if (this.thrown === nothing) return false;
    const info = toErrorInfo(this.thrown);
    return info.name === error.name && info.message === error.message;
  }
}

/** An Error that says what `info` says: its name, its message, and its facts as fields. */
export function errorFrom(info: ErrorInfo): Error {
  const error = new Error(info.message);
  error.name = info.name;
  const { status, code, attempts, isRetryable, retryAfterSeconds } = info;
  return Object.assign(error, withoutUndefined({ status, code, attempts, isRetryable, retryAfterSeconds }));
}

function withoutUndefined(fields: Record<string, unknown>): Record<string, unknown> {
  for (const key of Object.keys(fields)) if (fields[key] === undefined) delete fields[key];
  return fields;
}

/**
 * One call's activity as ToolLanes' activity$ carries it: the runner's shape (its request's id
 * as `runId`, turn 1), and on `settled` the call's stop class, so a view that never sees the
 * framework's error still knows whether the call went out.
 */
export class CallActivitySink implements ActivitySink {
  // The stop class of the outcome told just before its settled activity.
  private stopClass: StopClass | undefined = undefined;

  constructor(
    private readonly activity: Subject<RunnerActivity>,
    private readonly runId: string,
  ) {}

  get observed(): boolean {
    return this.activity.observed;
  }

  outcome(_index: number, outcome: Outcome): void {
    this.stopClass = stopClassOf(outcome);
  }

  next(activity: CallActivity): void {
    const { runId, stopClass } = this;
    const told = activity.type === 'settled' && stopClass !== undefined ? { runId, turn: 1, stopClass } : { runId, turn: 1 };
    this.activity.next(Object.assign({}, activity, told));
  }
}
