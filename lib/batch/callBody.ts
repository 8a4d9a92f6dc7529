// What a call's body is handed and how it is followed: the context it gets (its signal, its
// record function, its lent lanes and fences), the loop monitor's watch over it, an Observable
// answer's subscription. It keeps no state of its own: where the call stands is its record's
// (records.ts), which hears a value or a Promise answer itself, and which this part tells of an
// Observable's answer and of a stall.
import type { Observer, Subscribable, Unsubscribable } from 'rxjs';
import type { EventLoopStalledError } from '../errors.js';
import type { Keep } from '../keep.js';
import type { Loan } from '../lanes/index.js';
import type { LoopMonitor, Watch } from '../tools/index.js';
import type { StallListener } from '../tools/loopMonitor.js';
import { unsubscribeQuietly } from './answer.js';
import { assignDelta } from './deltas.js';
import type { CallRecord } from './records.js';
import type { Delta, InvokeContext } from './types.js';

/** Why a body's signal aborted: its call was stopped, or outran its ceiling, before it settled. */
export class InvocationAbortedError extends Error {
  override readonly name = 'AbortError';
}

/** What `invoke` returns when the body threw: its record has heard the failure already. */
export const threw: unique symbol = Symbol('threw');

/**
 * A call's body, as it runs: it is the RxJS observer of an Observable answer's first value and the
 * loop monitor's stall listener, so following a body makes no closure and no observer object of
 * its own; each thing it hears goes to its record, in the verb of that ending. (A value or a
 * Promise answer its record hears itself.)
 */
export class CallBody implements StallListener, Observer<unknown> {
  // What the body was handed (its AbortController, if it asked for its signal), until the call ends.
  private context: CallContext | undefined = undefined;
  // An Observable answer's subscription, while its first value is awaited.
  private subscription: Unsubscribable | undefined = undefined;
  // The loop monitor's watch over the body.
  private watch: Watch | undefined = undefined;
  /** What the body recorded (through its context's `record`); kept only if the call answers. */
  delta: Record<string, unknown> | undefined = undefined;

  constructor(readonly record: CallRecord) {}

  /** The lanes part of its call, which a context lends and reads fences from. */
  get lanes(): CallRecord['lanes'] {
    return this.record.lanes;
  }

  /** True once its call ended: what the body tells from then on is dropped. */
  get ended(): boolean {
    return this.record.ended;
  }

  // The body, given what it is handed: a function of the body, so the monitor runs it without a closure.
  private static run(body: CallBody): unknown {
    return body.record.call.invoke?.(body.context!);
  }

  /** Invokes the body (under `monitor`, if one watches): what it produced, or `threw` once its record heard the failure. */
  invoke(monitor: LoopMonitor | undefined): unknown {
    const { record } = this;
    const context = (this.context = new CallContext(this));
    try {
      if (monitor === undefined) return record.call.invoke?.(context);
      // Known before the body runs, so a synchronous stall's failure ends the watch too.
      this.watch = monitor.open(record.call.tool, this);
      return monitor.run(this.watch, CallBody.run, this);
    } catch (error) {
      record.failed(error);
      return threw;
    }
  }

  /** Subscribes to an Observable answer; a subscribe that throws is the body's failure. */
  subscribe(answer: Subscribable<unknown>): Unsubscribable | undefined {
    try {
      return answer.subscribe(this);
    } catch (error) {
      this.record.failed(error);
      return undefined;
    }
  }

  /** The Observable answer's first value is awaited on `subscription`. */
  following(subscription: Unsubscribable | undefined): void {
    this.subscription = subscription;
  }

  /** RxJS observer of an Observable answer: its first value is the result. */
  next(value: unknown): void {
    this.record.answered(value);
  }

  /** RxJS observer of an Observable answer: its error is the call's failure. */
  error(error: unknown): void {
    this.record.failed(error);
  }

  /** RxJS observer of an Observable answer: completed without a value, the result is undefined. */
  complete(): void {
    this.record.answered(undefined);
  }

  /** The loop monitor saw the body hold the event loop past loopStallMs: the call is cut off. */
  loopStalled(error: EventLoopStalledError): void {
    this.record.cutOff(error);
  }

  /** Lets the body go (its call ended, or enters its lanes again): its watch ended, an Observable unsubscribed, its signal aborted with `reason` if one is given. */
  drop(reason: Error | undefined): void {
    const { subscription, watch, context } = this;
    this.context = this.subscription = this.watch = undefined;
    watch?.release();
    if (subscription !== undefined) unsubscribeQuietly(subscription);
    if (reason !== undefined) context?.abort(reason);
  }

  /** Aborts the body's signal while the call is open (it was cut off: a lost lane, its ceiling). */
  abort(reason: Error): void {
    this.context?.abort(reason);
  }

  /** What the body recorded (through its context's `record`): kept apart, and dropped once the call has ended. */
  recorded(patch: Delta): void {
    if (this.ended) return; // too late: the call has its outcome
    if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) {
      throw new TypeError(`record(delta) expects an object of state keys, got ${patch === null ? 'null' : typeof patch}`);
    }
    this.delta = assignDelta(this.delta ?? {}, patch);
  }

  /** The body reported what the call cost in all: its budget lanes take it (dropped once the call has ended). */
  costReported(total: number): void {
    if (!this.ended) this.record.lanes.charge(total);
  }

  /** The body reported how far it has got: told to watchers while the call has not ended. */
  progressed(progress: number, total: number | undefined, message: string | undefined): void {
    const { batch, call, index } = this.record;
    if (this.ended || !batch.watched) return;
    batch.report({
      type: 'progress',
      callId: call.callId,
      tool: call.tool,
      index,
      at: batch.scheduler.now(),
      progress,
      ...(total === undefined ? {} : { total }),
      ...(message === undefined ? {} : { message }),
    });
  }
}

/** What a context reads and tells of its call (the call's body part). */
export interface ContextOwner {
  recorded(delta: Delta): void;
  progressed(progress: number, total: number | undefined, message: string | undefined): void;
  costReported(total: number): void;
  readonly lanes: { lend(): ReadonlyMap<string, Loan>; fence(): string | undefined; fences(): Readonly<Record<string, string>> };
  readonly ended: boolean;
}

/**
 * What a call's body is handed (its `InvokeContext`). Its signal, lent lanes and record function
 * are getters on the prototype: the AbortController, the loans and the closure are made only if
 * the body asks, and a class whose instances all share one hidden class costs a few
 * nanoseconds to make. (Defining them on each instance, so that a spread copy keeps them, costs
 * about 0.1 µs per property per call; the runner's ToolContext, which tool bodies get, does
 * that, and builds on this one.)
 */
export class CallContext implements InvokeContext {
  #record: ((delta: Delta) => void) | undefined = undefined;
  #controller: AbortController | undefined = undefined;
  // Why the call was stopped, once it was: a signal first asked for afterwards is born aborted.
  #stopped: Error | undefined = undefined;
  readonly #run: ContextOwner;

  constructor(run: ContextOwner) {
    this.#run = run;
  }

  /** Records what the call changed; a function of its own (made when first read), so it can be passed on alone. */
  get record(): (delta: Delta) => void {
    return (this.#record ??= (delta: Delta) => this.#run.recorded(delta));
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#stopped !== undefined) this.#controller.abort(this.#stopped);
    }
    return this.#controller.signal;
  }

  /** The shared lanes this call stands in, its callers' included, each lent to nested work. */
  get lent(): ReadonlyMap<string, Loan> {
    return this.#run.lanes.lend();
  }

  get ended(): boolean {
    return this.#run.ended;
  }

  get fence(): string | undefined {
    return this.#run.lanes.fence();
  }

  get fences(): Readonly<Record<string, string>> {
    return this.#run.lanes.fences();
  }

  /** Reports how far the body has got, as a `progress` activity; checked, and dropped once the call has ended. */
  progress(progress: number, total?: number, message?: string): void {
    if (typeof progress !== 'number' || !Number.isFinite(progress)) throw new TypeError(`progress(progress, total?, message?) expects progress to be a finite number, got ${String(progress)}`);
    if (total !== undefined && (typeof total !== 'number' || !Number.isFinite(total))) throw new TypeError(`progress(progress, total?, message?) expects total to be a finite number or undefined, got ${String(total)}`);
    if (message !== undefined && typeof message !== 'string') throw new TypeError(`progress(progress, total?, message?) expects message to be a string or undefined, got ${typeof message}`);
    this.#run.progressed(progress, total, message);
  }

  /** Reports what the call cost in all, for its tenant's cost budget; checked, and dropped once the call has ended. */
  reportCost(total: number): void {
    if (typeof total !== 'number' || !Number.isFinite(total) || total < 0) throw new TypeError(`reportCost(total) expects a finite number from 0 up, got ${String(total)}`);
    this.#run.costReported(total);
  }

  /** Aborts the body's signal (now, or when it is first asked for). */
  abort(reason: Error): void {
    if (this.#stopped !== undefined) return;
    this.#stopped = reason;
    this.#controller?.abort(reason);
  }
}

/** @internal One inert object of each class this module makes per call, for keepWarmShapes (lib/shapes.ts). */
export function keepShapes(keep: Keep): void {
  keep(() => new CallContext(undefined as never));
}
