// The batch's vocabulary: a call as the batch sees it (no models, no registry),
// the one outcome every call ends in, why a batch stopped, and its options.
import type { Observable, SchedulerLike, Subscribable } from 'rxjs';
import type { ConcurrencyConfig, DeadlineConfig } from '../config/index.js';
import type { ErrorInfo } from '../errors.js';
import type { LaneStore, LaneTable, LimitCause, Loan } from '../lanes/index.js';
import type { StopClass } from '../stopClass.js';
import type { LoopMonitor } from '../tools/index.js';

/** A delta: the keys a call changed in the run's state. */
export type Delta = Readonly<Record<string, unknown>>;

/**
 * What the batch hands a call's body when it starts it. `signal`, `lent` and `record` are
 * getters (made only when read), so read them from the context itself: a spread copy does not
 * carry them (`record` read once and passed on alone works). The runner's ToolContext, which
 * tool bodies get, does keep them in a spread.
 */
export interface InvokeContext {
  /**
   * Aborts when the call is stopped in flight or times out. Read after the stop, it is already
   * aborted: a body that awaits a step and then checks it sees the stop.
   */
  readonly signal: AbortSignal;
  /** Records what the call changed; kept apart and merged in call order once the batch resolves. */
  record(delta: Delta): void;
  /**
   * The shared lanes this call stands in (its callers' too), each as a loan its nested work may
   * run in: pass it as a nested batch's `lent`, so nested calls never queue behind their own
   * caller and still count against the lane once.
   */
  readonly lent: ReadonlyMap<string, Loan>;
  /** True once the call has its outcome, or was stopped: work started from its body now (a nested run) would outlive it. */
  readonly ended: boolean;
  /**
   * The fencing token of the narrowest fleet lane the call holds (its identical-arguments lane,
   * else its tool lane, else its own `lane`, else its tenant lane), from a store shared by a fleet (RedisLaneStore);
   * undefined on in-process lanes. A getter: read it from the context itself.
   */
  readonly fence?: string;
  /** Every fleet lane's fencing token the call holds, by lane key; empty on in-process lanes. A getter. */
  readonly fences?: Readonly<Record<string, string>>;
  /** Reports how far the body has got: a `progress` activity (dropped once the call has ended). */
  progress?(progress: number, total?: number, message?: string): void;
  /** Reports what the call cost in all, for the tenant's cost budget: it replaces the declared cost. */
  reportCost?(total: number): void;
}

/** One tool call of a model turn, as the batch schedules it. */
export interface BatchCall {
  readonly callId: string;
  readonly tool: string;
  /** The decoded arguments; their canonical JSON keys the identical-arguments lane. */
  readonly args?: unknown;
  /** false: the call runs in a phase of its own. Default true. */
  readonly parallelSafe?: boolean;
  /** true: a call stopped in flight is safe to call again. Default false. */
  readonly idempotent?: boolean;
  /**
   * A shared lane of the call's own (its server's, say), taken after the tool lane: `key` in the
   * shared lanes, with `limit` permits. The lanes of a tool's calls are worked out once per
   * phase, from its first call: give every call of a tool the same lane.
   */
  readonly lane?: { readonly key: string; readonly limit: number };
  /** What the call costs, for the tenant's cost budget (its tool's declared cost); a body may report its actual cost instead. */
  readonly cost?: number;
  /** Set when the call is refused before it starts (bad arguments, unknown tool): it ends with this error, never started, without its lanes. */
  readonly refused?: ErrorInfo;
  /**
   * The call's outcome when it is known already (a resumed run: the call ran, or was answered,
   * before): it is neither gated nor dispatched, and goes on with this outcome (its `index` this
   * call's) through the reorder and the settle steps; a stop does not change it. Read when the
   * call is dispatched, so a gate step may still give it one (a call that waits for a person).
   */
  readonly outcome?: Outcome;
  /** The work: returns a value, a Promise or an Observable (its first value is the result). */
  readonly invoke?: (context: InvokeContext) => unknown;
  /**
   * Told what the work threw, rejected with or errored with, as it was, before the batch reads
   * it as an ErrorInfo: a caller that rejects with the body's own error keeps it here, with no
   * Promise of its own around every body.
   */
  threw?(error: unknown): void;
  /**
   * Told what a lane turned the call away with before its body started (a budget that cannot
   * cover it, a lane store that lost or could not take it), as it was, before the batch reads it
   * as an ErrorInfo: a caller that rejects with the lane's own error keeps it here.
   */
  turnedAway?(error: unknown): void;
  /**
   * Told what cut the call off in flight, as it was (a lane store shared by a fleet that lost its
   * lease), before its outcome is decided: a caller whose outcome carries no error (indeterminate)
   * keeps the cause here.
   */
  cutOffBy?(error: unknown): void;
}

/** Why a batch stopped; `why` finishes the sentence "never dispatched: ...". */
export type StopReason =
  | { readonly kind: 'cancelled'; readonly why: string }
  | { readonly kind: 'failed'; readonly why: string; readonly callId: string; readonly error: ErrorInfo }
  | { readonly kind: 'deadline'; readonly why: string; readonly error: ErrorInfo; readonly callId?: string };

interface OutcomeBase {
  /** The call's position in the batch (call order). */
  readonly index: number;
  readonly callId: string;
  readonly tool: string;
  /** True when the body was invoked (every lane granted). */
  readonly dispatched: boolean;
}

export interface ResultOutcome extends OutcomeBase {
  readonly kind: 'result';
  readonly result: unknown;
  /** What the call recorded, merged in the order it recorded it; undefined when it recorded nothing. */
  readonly delta: Delta | undefined;
}

export interface ErrorOutcome extends OutcomeBase {
  readonly kind: 'error';
  readonly error: ErrorInfo;
  /** Set when the batch stopped the call, rather than the call failing by itself. */
  readonly stopped?: StopReason;
}

export interface IndeterminateOutcome extends OutcomeBase {
  readonly kind: 'indeterminate';
  readonly message: string;
  /**
   * The stop that ended the call in flight. Absent when the call alone was cut short: a lane
   * store shared by a fleet lost its permit (its lease), which stops neither the batch nor the run.
   */
  readonly stopped?: StopReason;
}

/** Every call of a batch ends in exactly one of these. */
export type Outcome = ResultOutcome | ErrorOutcome | IndeterminateOutcome;

/**
 * Live scheduling events of a batch, in the order they happen (not call order). A call may be
 * `queued` (once per lane it waits on), is `started` when its body runs, `ended` when the batch
 * decides its outcome (its body answered, failed, timed out, or the batch stopped), and
 * `settled` when that outcome, after the settle steps (output guardrail, end hook), goes out:
 * `settled.outcome` is the transcript's. Every call is settled exactly once. A body still running
 * when its call ended (`overrun`) keeps its permits until `released` (when it settles, or when
 * `abandonAfterSeconds` gives up on it: `abandoned`). A running body may report `progress`
 * (its context's `progress()`; an MCP server's `notifications/progress`).
 */
export type CallActivity =
  | { readonly type: 'queued'; readonly callId: string; readonly tool: string; readonly index: number; readonly lane: string; readonly at: number }
  | { readonly type: 'started'; readonly callId: string; readonly tool: string; readonly index: number; readonly at: number }
  | {
      readonly type: 'ended';
      readonly callId: string;
      readonly tool: string;
      readonly index: number;
      readonly at: number;
      /** The outcome as the batch decided it, before the settle steps. */
      readonly outcome: Outcome['kind'];
      /** True when the body was still running: it keeps its permits until `released`. */
      readonly overrun: boolean;
    }
  | {
      readonly type: 'progress';
      readonly callId: string;
      readonly tool: string;
      readonly index: number;
      readonly at: number;
      /** How far the body says it has got, and of how much (when it knows), and what it is doing. */
      readonly progress: number;
      readonly total?: number;
      readonly message?: string;
    }
  | { readonly type: 'released'; readonly callId: string; readonly tool: string; readonly index: number; readonly at: number; readonly abandoned: boolean }
  /**
   * An adaptive lane's limit moved on what this call reported (its outcome): `lane` is the
   * lane's key, `limit` the new limit, `previous` the old one, `cause` why (docs/concurrency.md).
   */
  | {
      readonly type: 'limit-changed';
      readonly callId: string;
      readonly tool: string;
      readonly index: number;
      readonly at: number;
      readonly lane: string;
      readonly limit: number;
      readonly previous: number;
      readonly cause: LimitCause;
    }
  | {
      readonly type: 'settled';
      readonly callId: string;
      readonly tool: string;
      readonly index: number;
      readonly at: number;
      readonly outcome: Outcome['kind'];
      /** How a stopped call ended (`stopClassOf` of its outcome), where the sink that tells it knows: ToolLanes' does. */
      readonly stopClass?: StopClass;
    };

/** Where live scheduling events go; an RxJS Subject is one. */
export interface ActivitySink {
  readonly observed: boolean;
  next(activity: CallActivity): void;
  /**
   * A call's final outcome itself, told just before its `settled` activity, for a sink that
   * reads more of it than its kind (a run's trace reads its stop class, with `stopClassOf`).
   */
  outcome?(index: number, outcome: Outcome): void;
}

/** A gate's verdict: nothing to let the call through, an error (or its text) to refuse it. */
export type GateVerdict = void | undefined | ErrorInfo | string;

export interface BatchOptions {
  /** This turn's limits: the runner's config narrowed by the agent's. Its `perToolSeconds` are the calls' ceilings. */
  readonly concurrency?: ConcurrencyConfig;
  /** The runner's shared lanes and the numbers they are declared with. Default: a table of this batch's own. */
  readonly shared?: { readonly lanes: LaneStore; readonly concurrency: ConcurrencyConfig };
  /** The tenant the calls run for; its lane is shared by all of its runs. Default `'default'`. */
  readonly tenant?: string;
  /**
   * Permits of shared lanes the caller lends (a nested run, from its caller's `lent`): a call
   * of this batch runs in the lent permit of a lane, or in a free one, whichever comes first.
   */
  readonly lent?: ReadonlyMap<string, Loan>;
  /** `toolCallSeconds`: a call in flight longer than this stops the batch (reason `deadline`). */
  readonly deadline?: DeadlineConfig;
  /** Stop the batch at the first failed call (the FAIL_RUN policy). */
  readonly failFast?: boolean;
  /** Serial, in call order, before a call enters its lanes: approvals, input guardrails, start hooks. */
  readonly gate?: (call: BatchCall, index: number) => GateVerdict | PromiseLike<GateVerdict> | Observable<GateVerdict>;
  /** Serial, in call order, after the reorder: output guardrails, end hooks. May replace the outcome. */
  readonly settle?: (outcome: Outcome, call: BatchCall) => Outcome | PromiseLike<Outcome> | Observable<Outcome>;
  /**
   * A stop from outside (cancel, the run's deadline). The first value stops the batch. An
   * Observable, or anything with RxJS's `subscribe(observer)` shape (a run hands its batches a
   * source of its own, lighter than an Observable).
   */
  readonly stop$?: Subscribable<StopReason>;
  /**
   * Live scheduling events: a function, or a sink that says whether anyone is watching
   * (`observed`, as an RxJS Subject does), so that no event is built for nobody.
   */
  readonly onActivity?: ((activity: CallActivity) => void) | ActivitySink;
  /** Watches each body's synchronous stretches; a stall fails that call alone. */
  readonly monitor?: LoopMonitor;
  /** For time: timeouts, deadlines and activity stamps. Default `asyncScheduler`. */
  readonly scheduler?: SchedulerLike;
  /** Records each call's dispatch before its body starts (a run journal): the body waits for it. */
  readonly writeAhead?: WriteAhead;
  /**
   * The turn lanes (`maxConcurrentTools`, the turn's narrower per-tool bounds), when several
   * batches share one turn (a ToolLanes request: its batches one after another, and its calls that are not parallel-safe, each a batch of one). Default:
   * a table of this batch's own. Give calls as an Observable that stays open for as long as the
   * batch runs: a batch that knows how many calls it has does not take a turn lane that cannot bind.
   */
  readonly turnLanes?: LaneTable;
}

/**
 * Where a call's dispatch is recorded before its body starts (write-ahead): once every lane has
 * granted the call a permit, `dispatching` is asked, and the body starts only when `written`
 * hears `undefined`. An error there fails the call, never dispatched. The call keeps its permits
 * while it waits, and a stop meanwhile classifies it as never dispatched.
 */
export interface WriteAhead {
  dispatching(call: BatchCall, index: number, written: WriteAheadWaiter): void;
  /**
   * Hears each outcome as the batch decides it, before the reorder keeps it behind an earlier
   * call still running and before the settle steps: a journal keeps what a crash would otherwise lose.
   */
  decided?(outcome: Outcome): void;
}

/** Hears once whether a call's dispatch was recorded: `undefined`, or why it could not be. */
export interface WriteAheadWaiter {
  written(error: Error | undefined): void;
}
