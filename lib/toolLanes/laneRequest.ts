// A request: the calls a framework makes for one user request, flowing through one batch on the
// shared lanes while any is open (requestFlow.ts; a call that is not parallel-safe in a batch of
// one of its own), all of them under one turn lane table (the request's `maxConcurrentTools` and
// narrower per-tool bounds), stopped together by the request's signal and each by its own.
import { Observable, type Observer, type SchedulerLike, type Subject, type Subscribable, type Subscription, type Unsubscribable } from 'rxjs';
import { runBatch, type BatchCall, type BatchOptions, type StopReason, type WriteAhead, type WriteAheadWaiter } from '../batch/index.js';
import { describeValue, type ConcurrencyConfig } from '../config/index.js';
import { LaneTable, type LaneStore } from '../lanes/index.js';
import type { RunnerActivity } from '../runner/index.js';
import { CallActivitySink, cancelledBy, WrappedCall } from './laneCall.js';
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

// The stop a call run in a batch of its own hears: its request's signal or its own, whichever aborts first, as a cancel.
class SignalStop implements Subscribable<StopReason> {
  constructor(
    private readonly request: AbortSignal | undefined,
    private readonly call: AbortSignal | undefined,
  ) {}

  subscribe(observer: Partial<Observer<StopReason>>): Unsubscribable {
    const { request, call } = this;
    if (request?.aborted === true) observer.next?.(cancelledBy(request, 'the request'));
    else if (call?.aborted === true) observer.next?.(cancelledBy(call, 'the call'));
    const onRequest = (): void => observer.next?.(cancelledBy(request!, 'the request'));
    const onCall = (): void => observer.next?.(cancelledBy(call!, 'the call'));
    request?.addEventListener('abort', onRequest, { once: true });
    call?.addEventListener('abort', onCall, { once: true });
    return {
      unsubscribe: () => {
        request?.removeEventListener('abort', onRequest);
        call?.removeEventListener('abort', onCall);
      },
    };
  }
}

/**
 * The last step before a body starts: once its request's signal has aborted, no call of the
 * request starts, not even in a permit a stopped sibling just left (its own stop, heard from the
 * same signal, may come after that sibling's). It waits there, holding its permits, until that
 * stop classifies it as never dispatched, which happens within the same abort.
 */
class RequestGate implements WriteAhead {
  constructor(private readonly signal: AbortSignal) {}

  dispatching(_call: BatchCall, _index: number, written: WriteAheadWaiter): void {
    if (!this.signal.aborted) written.written(undefined);
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
  // Holds back a call whose request has stopped (only a request with a signal has one).
  private readonly gate: RequestGate | undefined;
  // How many calls were given no id of their own.
  private unnamed = 0;
  // What its batches are made with, and the batch its calls join now (none while no call is open).
  private readonly plan: FlowPlan;
  private flow: RequestFlow | undefined = undefined;
  private readonly flowEnded = (flow: RequestFlow): void => {
    if (this.flow === flow) this.flow = undefined;
  };

  constructor(
    private readonly host: LaneHost,
    readonly requestId: string,
    readonly tenant: string,
    readonly signal: AbortSignal | undefined,
    /** The request's bounds: the shared numbers, narrowed by the request's own. */
    readonly concurrency: ConcurrencyConfig,
  ) {
    const { scheduler } = host;
    this.turnLanes = new LaneTable({ now: () => scheduler.now() });
    this.gate = signal === undefined ? undefined : new RequestGate(signal);
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
    // A call that is not parallel-safe would wait for every call before it in a shared batch: it runs in a batch of its own.
    if (call.parallelSafe === false) return this.runAlone(wrapped, call.signal);
    return new Promise<T>((resolve, reject) => {
      wrapped.settles(resolve, reject);
      let flow = this.flow;
      if (flow === undefined || !flow.joinable) flow = this.flow = new RequestFlow(this.plan, this.flowEnded);
      flow.join(wrapped as WrappedCall<unknown>);
    });
  }

  // One call as a batch of one, on the same lanes.
  private runAlone<T>(wrapped: WrappedCall<T>, signal: AbortSignal | undefined): Promise<T> {
    const { host, requestId, tenant } = this;
    const options: BatchOptions = {
      concurrency: this.concurrency,
      shared: host.shared,
      tenant,
      stop$: this.signal === undefined && signal === undefined ? undefined : new SignalStop(this.signal, signal),
      onActivity: new CallActivitySink(host.activity, requestId),
      scheduler: host.scheduler,
      turnLanes: this.turnLanes,
      writeAhead: this.gate,
    };
    return new Promise<T>((resolve, reject) => {
      let ended = false;
      let subscription: Subscription | undefined;
      // The call, and no end: a batch that knows its calls are all here drops a turn lane that cannot bind.
      const calls$ = new Observable<BatchCall>((subscriber) => subscriber.next(wrapped));
      subscription = runBatch(calls$, options).subscribe({
        next: (outcome) => {
          ended = true;
          wrapped.settle(outcome, resolve, reject);
          subscription?.unsubscribe();
        },
        error: reject,
      });
      // Its outcome came while subscribing (a body that answered at once): the batch ends now.
      if (ended) subscription.unsubscribe();
    });
  }
}
