// ToolLanes: the lanes without the runner. A framework's tool call runs inside every lane that
// applies to it (the same lanes, in the same order, as a runner's calls: a request's calls flow
// through one batch, as a streamed turn's do), and a stopped call says how it ended. Built on a
// runner's `lanes`, it shares that runner's limits; its activity$ has the runner's shape, so one
// live view shows both.
import { randomUUID } from 'node:crypto';
import { asyncScheduler, merge, Subject, type Observable } from 'rxjs';
import { ConcurrencyConfig, describeValue, refuseNonConfig, refuseUnknownFields } from '../config/index.js';
import { ConfigError } from '../errors.js';
import { LaneTable, type LaneStore } from '../lanes/index.js';
import type { RunnerActivity } from '../runner/index.js';
import { checkCall, checkSignal, LaneRequest, type LaneHost } from './laneRequest.js';
import type { LaneBody, LaneCall, LaneCallContext, LaneRequestOptions, ToolLanesOptions } from './types.js';

const optionFields = ['concurrency', 'lanes', 'scheduler'];
const requestFields = ['tenant', 'signal', 'requestId', 'concurrency'];

function isLaneStore(value: unknown): value is LaneStore {
  return value !== null && typeof value === 'object' && typeof (value as LaneStore).enter === 'function' && typeof (value as LaneStore).occupancy === 'function';
}

/**
 * Runs any framework's tool calls inside agent-lanes' lanes: per tool, per tenant, per request
 * (`maxConcurrentTools`), rates kept fleet-wide, adaptive limits, budgets, and one at a time for
 * identical arguments of a tool that is not parallel-safe. Each call gets an AbortSignal, the
 * fencing token of a fleet lane, and a stable idempotency key; every permit goes back on every
 * ending; a stopped call rejects with a `CallStoppedError` whose `stopClass` says whether it
 * never went out, is safe to call again, or may have landed (docs/frameworks.md).
 *
 * ## Example
 * ```ts
 * const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ maxConcurrentTools: 4, perTool: { search: 2 } }) });
 * const request = lanes.request({ tenant: 'acme', signal: req.signal });
 * const hits = await request.run({ tool: 'search', args: { q }, callId: toolCallId }, ({ signal }) => search(q, { signal }));
 * // at most two searches at once across every request, four calls at once in this one
 * ```
 */
export class ToolLanes {
  /** The lanes' numbers. */
  readonly concurrency: ConcurrencyConfig;
  /** The shared lanes: give a runner's (`runner.lanes`) to share its limits, or a RedisLaneStore to share a fleet's. */
  readonly lanes: LaneStore;
  /**
   * Live scheduling events of every call: queued (on which lane), started, ended, released,
   * settled (with the call's `stopClass` when it was stopped), as `AgentRunner.activity$` tells
   * them (the request's id as `runId`, `turn` 1), and what the lane store says of itself.
   */
  readonly activity$: Observable<RunnerActivity>;
  private readonly host: LaneHost;

  constructor(options: ToolLanesOptions) {
    if (options === null || typeof options !== 'object') throw new ConfigError('ToolLanes', `ToolLanes options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, optionFields, 'ToolLanes');
    const { concurrency, lanes, scheduler = asyncScheduler } = options;
    if (concurrency === undefined) throw new ConfigError('concurrency', 'ToolLanes needs concurrency: a ConcurrencyConfig or its options');
    refuseNonConfig(concurrency, 'concurrency', 'ConcurrencyConfig');
    if (lanes !== undefined && !isLaneStore(lanes)) throw new ConfigError('lanes', `lanes must be a LaneStore (a LaneTable, a RedisLaneStore, a runner's lanes), got ${describeValue(lanes)}`);
    if (scheduler === null || typeof scheduler !== 'object' || typeof scheduler.now !== 'function' || typeof scheduler.schedule !== 'function') {
      throw new ConfigError('scheduler', `scheduler must be an RxJS SchedulerLike, got ${describeValue(scheduler)}`);
    }
    this.concurrency = concurrency instanceof ConcurrencyConfig ? concurrency : new ConcurrencyConfig(concurrency);
    // Its budgets and adaptive lanes read this clock (virtual time inside TestScheduler.run).
    this.lanes = lanes ?? new LaneTable({ now: () => scheduler.now() });
    const activity = new Subject<RunnerActivity>();
    // A store's news of itself reaches whoever watches, for as long as they watch (as the runner's does).
    const { notices$, pauses$, limits$ } = this.lanes;
    const news = [notices$, pauses$, limits$].filter((news$) => news$ !== undefined);
    this.activity$ = news.length === 0 ? activity.asObservable() : merge(activity, ...news);
    this.host = { shared: { lanes: this.lanes, concurrency: this.concurrency }, scheduler, activity };
  }

  /**
   * A request: the calls made for one user request (one agent run of the framework). Its calls
   * share its turn lanes (`maxConcurrentTools`, narrowed by `options.concurrency`), run for its
   * tenant, and are all stopped when its signal aborts.
   */
  request(options: ToolLanes.RequestOptions = {}): ToolLanes.Request {
    if (options === null || typeof options !== 'object') throw new TypeError(`ToolLanes.request: options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, requestFields, 'ToolLanes.request');
    const { tenant = 'default', signal, requestId = randomUUID(), concurrency } = options;
    if (typeof tenant !== 'string' || tenant === '') throw new TypeError(`ToolLanes.request: tenant must be a non-empty string, got ${describeValue(tenant)}`);
    if (typeof requestId !== 'string' || requestId === '') throw new TypeError(`ToolLanes.request: requestId must be a non-empty string, got ${describeValue(requestId)}`);
    checkSignal(signal, 'ToolLanes.request: signal');
    if (concurrency !== undefined && !(concurrency instanceof ConcurrencyConfig)) {
      throw new TypeError(`ToolLanes.request: concurrency must be a ConcurrencyConfig, got ${describeValue(concurrency)}`);
    }
    const bounds = concurrency === undefined ? this.concurrency : this.concurrency.narrowedTo(concurrency);
    return new LaneRequest(this.host, requestId, tenant, signal, bounds);
  }

  /** One call as a request of its own (`request` says what `options` are), run as `ToolLanes.Request.run` runs it. */
  run<T>(call: ToolLanes.Call, body: ToolLanes.Body<T>, options?: ToolLanes.RequestOptions): Promise<T> {
    // Checked before a request is made for it, so the message names run.
    checkCall(call, body, 'ToolLanes.run');
    return this.request(options).run(call, body);
  }
}

/** ToolLanes' types, reachable as its members (`ToolLanes.Call`), so the main entry keeps one name. */
export declare namespace ToolLanes {
  /** What a ToolLanes is made from: `concurrency`, and optionally `lanes` and `scheduler`. */
  export type Options = ToolLanesOptions;
  /** A request's options: `tenant`, `signal`, `requestId`, `concurrency`. */
  export type RequestOptions = LaneRequestOptions;
  /** A request: `run(call, body)`, and its `requestId`, `tenant`, `signal`, `concurrency`. */
  export type Request = LaneRequest;
  /** One call: `tool`, and optionally `args`, `callId`, `parallelSafe`, `idempotent`, `cost`, `signal`. */
  export type Call = LaneCall;
  /** What a body is handed. */
  export type Context = LaneCallContext;
  /** A call's body. */
  export type Body<T> = LaneBody<T>;
}
