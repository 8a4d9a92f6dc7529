// What ToolLanes is given and what it hands a body: its options, a request's options, one call
// as a framework describes it, and the context the call's body gets. The public names are
// ToolLanes' members (ToolLanes.Options, ToolLanes.Call, ...), so the main entry grows by one name.
import type { Observable, SchedulerLike } from 'rxjs';
import type { ConcurrencyConfig, ConcurrencyOptions } from '../config/index.js';
import type { LaneStore } from '../lanes/index.js';

/** What a ToolLanes is made from. */
export interface ToolLanesOptions {
  /**
   * The lanes' numbers, a config or its options: `perTool`, `perTenant`, the rates, adaptive
   * limits and budgets are shared by every call on the store; `maxConcurrentTools` (and the
   * config's narrower bounds) bound each request; `perToolSeconds` is each call's ceiling.
   */
  readonly concurrency: ConcurrencyConfig | ConcurrencyOptions;
  /** Where the shared lanes live. Default: an in-process LaneTable of this ToolLanes' own. Give a runner's `lanes` to share its lanes. */
  readonly lanes?: LaneStore;
  /** For time: ceilings, rate lanes, activity stamps. Default `asyncScheduler` (virtual inside `TestScheduler.run`). */
  readonly scheduler?: SchedulerLike;
}

/** What a request is: the calls a framework makes for one user request (one agent run). */
export interface LaneRequestOptions {
  /** The tenant its calls run for; its lane (`perTenant`) is shared by all of its requests. Default `'default'`. */
  readonly tenant?: string;
  /** Aborting it stops every call of the request: queued ones never start, running ones are classified. */
  readonly signal?: AbortSignal;
  /** The request's id (the framework's run id): with a call's id it makes the call's idempotency key. Default: a random UUID. */
  readonly requestId?: string;
  /** Narrows this request's own bounds (`maxConcurrentTools`, `perTool` inside the request); never widens the shared lanes. */
  readonly concurrency?: ConcurrencyConfig;
}

/** One tool call as the framework describes it. */
export interface LaneCall {
  /** The tool's name: its lanes (`perTool`, rates, adaptive limit) are keyed by it. */
  readonly tool: string;
  /** The arguments; their canonical JSON keys the identical-arguments lane of a call that is not parallel-safe. */
  readonly args?: unknown;
  /** The framework's id for the call (its tool call id). Default: `call-<n>`, numbered within its request. */
  readonly callId?: string;
  /** false: calls of this tool with identical arguments run one at a time, across every request on the store. Default true. */
  readonly parallelSafe?: boolean;
  /** true: a call stopped in flight is safe to call again. Default false (its side effect may have landed). */
  readonly idempotent?: boolean;
  /** What the call costs, for the tenant's cost budget (`perTenantBudget.cost`); the body may report its actual cost. */
  readonly cost?: number;
  /** Aborting it stops this call alone (a framework's per-call signal). */
  readonly signal?: AbortSignal;
}

/** What a call's body is handed. */
export interface LaneCallContext {
  readonly callId: string;
  readonly tool: string;
  readonly tenant: string;
  readonly requestId: string;
  /** `<requestId>:<callId>`, the same key the runner gives its calls: stable for as long as those two are. */
  readonly idempotencyKey: string;
  /** Aborts when the call is stopped in flight or outruns its `perToolSeconds` ceiling. */
  readonly signal: AbortSignal;
  /** The fencing token of the narrowest fleet lane the call holds (RedisLaneStore); undefined on in-process lanes. */
  readonly fence: string | undefined;
  /** Every fleet lane's fencing token the call holds, by lane key; empty on in-process lanes. */
  readonly fences: Readonly<Record<string, string>>;
  /** Reports how far the body has got: a `progress` activity. */
  progress(progress: number, total?: number, message?: string): void;
  /** Reports what the call cost in all, for the tenant's cost budget: it replaces the declared cost. */
  reportCost(total: number): void;
}

/**
 * A call's body, as a runner's tool body: what it returns is the call's result, a Promise's (or
 * any thenable's) value when it resolves, an Observable's first value (it is then unsubscribed).
 */
export type LaneBody<T> = (context: LaneCallContext) => T | PromiseLike<T> | Observable<T>;
