// A request's calls as one batch: a turn whose calls arrive as the framework makes them. The
// calls go through the batch's stages (phases -> inLanes -> ceiling -> untilStopped), and each
// call's Promise settles from its own record as soon as its outcome is decided, whatever the
// calls before it are doing. The batch is made with the request's first open call and ends once
// no call of it is open (or its request's signal has stopped it): a request dropped keeps
// nothing alive, and its next call starts another. A batch takes at most `CALLS_PER_BATCH`
// calls: a request that is never idle (tools wrapped once for a whole server) goes on in a new
// batch, and the full one ends with its last call, so what a request keeps stays bounded.
import { concatMap, Observable, Subject } from 'rxjs';
import { BatchScope, CallBody, ceiling, inLanes, phases, untilStopped, type CallNews, type CallRecord, type WriteAhead } from '../batch/index.js';
import type { ConcurrencyConfig } from '../config/index.js';
import { DirectSubscriber } from '../directSubscriber.js';
import type { LaneTable } from '../lanes/index.js';
import { cancelledBy, type CallActivitySink, type WrappedCall } from './laneCall.js';
import type { LaneHost } from './laneRequest.js';

/**
 * The most calls one batch of a request takes. A batch keeps its records until it ends; the
 * request's own lanes (its turn cap) are shared by all of its batches, so a call's bounds do not
 * change with the batch it joins.
 */
export const CALLS_PER_BATCH = 256;

/** What a request's batch is made with: the request's own parts. */
export interface FlowPlan {
  readonly host: LaneHost;
  readonly tenant: string;
  readonly concurrency: ConcurrencyConfig;
  readonly turnLanes: LaneTable;
  readonly signal: AbortSignal | undefined;
  readonly gate: WriteAhead | undefined;
  readonly sink: CallActivitySink;
}

// The look at whether a batch is idle, one function for every batch.
function lookIdle(flow: RequestFlow): void {
  flow.idle();
}

/**
 * One batch of a request: its calls' source, its scope, and how many of its calls are open.
 * It hears its request's signal while it lives (one listener, not one per call). It is the
 * batch's subscriber itself (a `DirectSubscriber`): no wrapper of RxJS's around it per request.
 */
export class RequestFlow extends DirectSubscriber<CallNews> {
  readonly scope: BatchScope;
  // The calls, to the batch, one by one, as records.
  private readonly calls = new Subject<CallRecord>();
  // Calls handed in and not yet settled.
  private open = 0;
  // True once no call can enter any more: it ended, was stopped, or is ending for want of calls.
  private closing = false;
  // True while a look at whether it is idle is due.
  private looking = false;
  private readonly signal: AbortSignal | undefined;

  constructor(
    plan: FlowPlan,
    private readonly onEnd: (flow: RequestFlow) => void,
  ) {
    super();
    const { host, tenant, concurrency, turnLanes, signal, gate, sink } = plan;
    this.signal = signal;
    this.scope = new BatchScope({ scheduler: host.scheduler, onActivity: sink, writeAhead: gate, turnLanes });
    const scope = this.scope;
    const laned = inLanes({ concurrency, shared: host.shared, tenant });
    this.calls
      .pipe(
        phases(() => scope),
        concatMap((phase$: Observable<CallRecord>) => phase$.pipe(laned)),
        ceiling({ perToolSeconds: concurrency.perToolSeconds }),
        untilStopped(scope),
      )
      .subscribe(this);
    signal?.addEventListener('abort', this);
  }

  /** True while a call may still join this batch. */
  get joinable(): boolean {
    return !this.closing && this.scope.stopped === undefined && this.scope.records.length < CALLS_PER_BATCH;
  }

  /** Hands `call` to the batch: its record, numbered in arrival order. Settles through `call.finish`. */
  join(call: WrappedCall<unknown>): void {
    const record = this.scope.record(call, this.scope.records.length);
    call.record = record;
    this.open++;
    const { signal } = call;
    // Its own signal aborted already: it is stopped before it enters any lane.
    if (signal?.aborted === true) record.stopAlone(cancelledBy(signal, 'the call'));
    else signal?.addEventListener('abort', call);
    this.calls.next(record);
    // The request stopped already: the call is classified as the stop classifies its siblings.
    if (this.signal?.aborted === true) this.scope.stop(cancelledBy(this.signal, 'the request'));
  }

  /** The request's signal aborted: every open call of the batch is stopped. */
  handleEvent(): void {
    this.scope.stop(cancelledBy(this.signal!, 'the request'));
  }

  override next(news: CallNews): void {
    if (this.closed || news instanceof CallBody) return;
    const { outcome } = news;
    if (outcome === undefined) return;
    // Told as settled (what the caller's Promise says), then the Promise settles.
    news.settled(outcome);
    (news.call as WrappedCall<unknown>).finish(outcome);
    if (--this.open === 0 && !this.looking) {
      this.looking = true;
      // Looked at once the callers have heard: a caller that makes its next call right away keeps
      // the batch. A Promise's reaction, not queueMicrotask, which makes an AsyncResource each time.
      void Promise.resolve(this).then(lookIdle);
    }
  }

  override error(error: unknown): void {
    if (this.closed) return;
    this.closing = true;
    for (const record of this.scope.unsettled()) (record.call as WrappedCall<unknown>).fail(error);
    this.ended();
    this.unsubscribe();
  }

  override complete(): void {
    if (this.closed) return;
    this.closing = true;
    this.ended();
    this.unsubscribe();
  }

  /** No call was open a moment ago: the batch ends, unless a call has come since. */
  idle(): void {
    this.looking = false;
    if (this.open > 0 || this.closing) return;
    this.closing = true;
    // Every call has its outcome: the batch completes, and its stages let go of everything.
    this.calls.complete();
    this.unsubscribe();
  }

  private ended(): void {
    this.signal?.removeEventListener('abort', this);
    this.onEnd(this);
  }
}
