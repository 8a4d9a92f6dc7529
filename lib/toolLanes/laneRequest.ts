// A request: the calls a framework makes for one user request, flowing through one batch on the
// shared lanes while any is open (requestFlow.ts; a call that is not parallel-safe in a batch of
// one of its own), all of them under one turn lane table (the request's `maxConcurrentTools` and
// narrower per-tool bounds), stopped together by the request's signal and each by its own.
import type { SchedulerLike, Subject } from 'rxjs';
import type { BatchCall, WriteAhead, WriteAheadWaiter } from '../batch/index.js';
import { describeValue, type ConcurrencyConfig } from '../config/index.js';
import { LaneTable, type LaneStore } from '../lanes/index.js';
import type { RunnerActivity } from '../runner/index.js';
import { CallActivitySink, WrappedCall } from './laneCall.js';
import { RequestFlow, type FlowPlan } from './requestFlow.js';
import type { LaneBody, LaneCall } from './types.js';

/** What every request of one ToolLanes shares. */
export interface LaneHost {
  readonly shared: { readonly lanes: LaneStore; readonly concurrency: ConcurrencyConfig };
  readonly scheduler: SchedulerLike;
  readonly activity: Subject<RunnerActivity>;
}

const callFields = ['tool', 'args', 'callId', 'parallelSafe', 'idempotent', 'cost', 'signal'];

/** Refuses a call that is not one, naming the field and what was expected. */
export function checkCall(call: LaneCall, body: unknown, where: string): void {
  if (call === null || typeof call !== 'object') throw new TypeError(`${where}: call must be an object with a tool name, got ${describeValue(call)}`);
  for (const key of Object.keys(call)) {
    if (!callFields.includes(key)) throw new TypeError(`${where}: call has no field ${key}; its fields are ${callFields.join(', ')}`);
  }
  if (typeof call.tool !== 'string' || call.tool === '') throw new TypeError(`${where}: call.tool must be a non-empty string, got ${describeValue(call.tool)}`);
  if (call.callId !== undefined && (typeof call.callId !== 'string' || call.callId === '')) {
    throw new TypeError(`${where}: call.callId must be a non-empty string, got ${describeValue(call.callId)}`);
  }
  for (const flag of ['parallelSafe', 'idempotent'] as const) {
    if (call[flag] !== undefined && typeof call[flag] !== 'boolean') throw new TypeError(`${where}: call.${flag} must be a boolean, got ${describeValue(call[flag])}`);
  }
  if (call.cost !== undefined && (typeof call.cost !== 'number' || !(call.cost >= 0) || !Number.isFinite(call.cost))) {
    throw new TypeError(`${where}: call.cost must be a finite number from 0 up, got ${describeValue(call.cost)}`);
  }
  checkSignal(call.signal, `${where}: call.signal`);
  if (typeof body !== 'function') throw new TypeError(`${where}: body must be a function (context) => result, got ${describeValue(body)}`);
}

/** Refuses a signal that is not an AbortSignal. */
export function checkSignal(signal: unknown, what: string): void {
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError(`${what} must be an AbortSignal, got ${describeValue(signal)}`);
}

// A batch of one call of its own ends with it: nothing to forget.
const alone = (): void => undefined;

/**
 * The last step before a body starts: once its request's signal, or the call's own, has aborted,
 * the call does not start, not even in a permit a stopped sibling just left (its own stop, heard
 * from the same signal, may come after that sibling's: a framework hands every call of a step
 * one signal). It waits there, holding its permits, until that stop classifies it as never
 * dispatched, which happens within the same abort.
 */
class RequestGate implements WriteAhead {
  constructor(private readonly signal: AbortSignal | undefined) {}

  dispatching(call: BatchCall, _index: number, written: WriteAheadWaiter): void {
    if (this.signal?.aborted === true || (call as WrappedCall<unknown>).signal?.aborted === true) return;
    written.written(undefined);
  }
}

/**
 * One request's calls: each runs inside every lane that applies to it (its tenant's, the
 * request's turn lanes, its tool's rate, adaptive and counting lanes, the tenant's budget, and
 * for a call that is not parallel-safe its identical-arguments lane), in the documented order.
 */
export class LaneRequest {
  /** The request's own turn lanes, shared by all of its calls. */
  private readonly turnLanes: LaneTable;
  // Holds back a call whose request, or whose own signal, has stopped.
  private readonly gate: RequestGate;
  // How many calls were given no id of their own.
  private unnamed = 0;
  // What its batches are made with, and the batch its calls join now (none while no call is open).
  private readonly plan: FlowPlan;
  private flow: RequestFlow | undefined = undefined;
  private readonly flowEnded = (flow: RequestFlow): void => {
    if (this.flow === flow) this.flow = undefined;
  };

  constructor(
    host: LaneHost,
    readonly requestId: string,
    readonly tenant: string,
    readonly signal: AbortSignal | undefined,
    /** The request's bounds: the shared numbers, narrowed by the request's own. */
    readonly concurrency: ConcurrencyConfig,
  ) {
    const { scheduler } = host;
    this.turnLanes = new LaneTable({ now: () => scheduler.now() });
    this.gate = new RequestGate(signal);
    this.plan = { host, tenant, concurrency, turnLanes: this.turnLanes, signal, gate: this.gate, sink: new CallActivitySink(host.activity, requestId) };
  }

  /**
   * Runs `body` once the call holds every lane that applies to it, and settles with its result.
   * A body's failure rejects with its own error (and costs only this call); a stopped call
   * rejects with a CallStoppedError whose `stopClass` says whether it went out; every permit
   * goes back on every ending (a body that ignores its abort keeps its permits until it settles).
   */
  run<T>(call: LaneCall, body: LaneBody<T>): Promise<T> {
    checkCall(call, body, 'ToolLanes.run');
    const { requestId, tenant } = this;
    const callId = call.callId ?? `call-${++this.unnamed}`;
    const wrapped = new WrappedCall(callId, call.tool, call.args, call.parallelSafe, call.idempotent, call.cost, tenant, requestId, body, call.signal);
    return new Promise<T>((resolve, reject) => {
      wrapped.settles(resolve, reject);
      // A call that is not parallel-safe would wait for every call before it in a shared batch: it
      // has a batch of its own, on the same lanes, which no other call joins.
      if (call.parallelSafe === false) {
        new RequestFlow(this.plan, alone).join(wrapped as WrappedCall<unknown>);
        return;
      }
      let flow = this.flow;
      if (flow === undefined || !flow.joinable) flow = this.flow = new RequestFlow(this.plan, this.flowEnded);
      flow.join(wrapped as WrappedCall<unknown>);
    });
  }
}
