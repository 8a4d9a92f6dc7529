// What one call's body does: started once every lane granted it a permit, then its answer taken
// (a value, a Promise, an Observable's first value), its failure, its stall, or its halt when the
// call ends first. One state in place of a set of flags. Written by the fan-out (inLanes) that
// starts it and by the body's own answer; the other stages only read it.
import { isObservable, type Observer, type Unsubscribable } from 'rxjs';
import type { EventLoopStalledError } from '../errors.js';
import type { LoopMonitor, Watch } from '../tools/index.js';
import type { StallListener } from '../tools/loopMonitor.js';
import { takeAnswer, unsubscribeQuietly, type AnswerObserver } from './answer.js';
import { CallContext } from './callContext.js';
import type { CallRecord } from './records.js';

/**
 * What a call's body is doing.
 * - `idle`: not started (the call waits for its lanes, or never gets them).
 * - `invoking`: its synchronous part runs, or its answer is being read; the call is open.
 * - `awaiting`: it answered with a Promise (or a thenable) not yet settled; the call is open.
 * - `subscribed`: it answered with an Observable whose first value has not come; the call is open.
 * - `ending`: the call ended while its synchronous part ran: its permits wait for its answer.
 * - `overrun`: the call ended while its Promise still runs: a lane counts it until it settles.
 * - `over`: nothing of it runs: it answered or failed, was unsubscribed, or will never start.
 */
export type BodyState = 'idle' | 'invoking' | 'awaiting' | 'subscribed' | 'ending' | 'overrun' | 'over';

// An Observable answer, read without throwing (a hostile value is not one).
function isObservableSafely(value: unknown): boolean {
  try {
    return isObservable(value);
  } catch {
    return false;
  }
}


/**
 * A call's body, from its start to its end. It hears its own answer: it is the answer's observer
 * (a Promise's, or as the RxJS observer of an Observable's first value) and the loop monitor's
 * stall listener, so following a body makes no closure and no observer object of its own.
 */
export class CallBody implements AnswerObserver<unknown>, StallListener, Observer<unknown> {
  /** What the body is doing. */
  state: BodyState = 'idle';
  // What the body was handed (its AbortController, if it asked for its signal), until the call ends.
  private context: CallContext | undefined = undefined;
  // An Observable answer's subscription, while its first value is awaited.
  private subscription: Unsubscribable | undefined = undefined;
  // The loop monitor's watch over the body.
  private watch: Watch | undefined = undefined;

  constructor(readonly record: CallRecord) {}

  /** True once the call ended for the body (it has its outcome, or was torn down): later answers change nothing. */
  get ended(): boolean {
    const { state } = this;
    return state === 'ending' || state === 'overrun' || state === 'over';
  }

  // The body, given what it is handed: a function of the body, so the monitor runs it without a closure.
  private static invoke(body: CallBody): unknown {
    return body.record.call.invoke?.(body.context!);
  }

  /** Invokes the body (under `monitor`, if one watches) and follows its answer. */
  start(monitor: LoopMonitor | undefined): void {
    const { record } = this;
    const context = (this.context = new CallContext(record));
    let produced: unknown;
    // While the synchronous part runs, whatever ends the call (a stall, a stop the body set off
    // itself) leaves the permits where they are: only the answer says whether the body still
    // runs (a Promise keeps them until it settles) or is over.
    this.state = 'invoking';
    try {
      if (monitor === undefined) produced = record.call.invoke?.(context);
      else {
        // Known before the body runs, so a synchronous stall's failure (halt) ends the watch too.
        this.watch = monitor.open(record.call.tool, this);
        produced = monitor.run(this.watch, CallBody.invoke, this);
      }
    } catch (error) {
      this.failed(error);
      // Left now, if the call's end waited for the body to return.
      record.leaveLanes();
      return;
    }
    let running: Unsubscribable | undefined;
    if (!isObservableSafely(produced)) takeAnswer(produced, this);
    // A call that ended while its body ran is not subscribed to its Observable at all.
    else if (this.now() === 'ending') this.state = 'over';
    else {
      try {
        running = (produced as { subscribe(observer: Observer<unknown>): Unsubscribable }).subscribe(this);
      } catch (error) {
        this.failed(error);
      }
    }
    if (this.now() === 'invoking') {
      // No answer yet: the Observable's first value is awaited.
      this.subscription = running;
      this.state = 'subscribed';
      return;
    }
    // Answered while being subscribed, or ended meanwhile: nothing more is wanted of it.
    if (running !== undefined) unsubscribeQuietly(running);
    if (this.now() === 'ending') this.state = 'over';
    // Whether the call's end waited for the answer or not, its permits' fate is known now (leaving twice does nothing).
    if (this.now() !== 'awaiting') record.leaveLanes();
  }

  // The state as it is now: the calls above may have changed it (an answer, a stall, a stop).
  private now(): BodyState {
    return this.state;
  }

  /** RxJS observer of an Observable answer: its first value is the result. */
  next(value: unknown): void {
    this.answered(value);
  }

  /** RxJS observer of an Observable answer: its error is the call's failure. */
  error(error: unknown): void {
    this.failed(error);
  }

  /** RxJS observer of an Observable answer: completed without a value, the result is undefined. */
  complete(): void {
    this.answered(undefined);
  }

  /** The body's answer: its first value (or a plain one, or its Promise's) is the result. */
  answered(result: unknown): void {
    if (this.settle()) this.record.succeed(result);
  }

  /**
   * The body failed: it threw, rejected or errored (or its answer could not be read). One that
   * says "slow down" after its synchronous part returned may start once more (retryRateLimited).
   */
  failed(error: unknown): void {
    const later = this.state === 'awaiting' || this.state === 'subscribed';
    if (!this.settle()) return;
    if (!later || !this.record.takeAgain(error)) this.record.fail(error);
  }

  /** An Observable answer that completed without a value. */
  unanswered(): void {
    this.answered(undefined);
  }

  /** The body answered with a Promise: until it settles it runs, and counts in its lanes even if its call ends first. */
  waiting(): void {
    if (this.state === 'invoking') this.state = 'awaiting';
    else if (this.state === 'ending') this.state = 'overrun';
  }

  /** The loop monitor saw the body hold the event loop past loopStallMs: the call fails. */
  loopStalled(error: EventLoopStalledError): void {
    if (!this.ended) this.record.fail(error);
  }

  // The body settled: true when its call is still open and takes the answer. An overrun ends,
  // its permits going back.
  private settle(): boolean {
    const { state, subscription } = this;
    switch (state) {
      case 'invoking':
      case 'awaiting':
      case 'subscribed':
        this.state = 'over';
        this.subscription = undefined;
        if (subscription !== undefined) unsubscribeQuietly(subscription);
        return true;
      case 'overrun':
        this.state = 'over';
        this.record.lanes.bodySettled();
        return false;
      case 'ending':
        this.state = 'over';
        return false;
      default:
        return false;
    }
  }

  /**
   * The call ended (it has its outcome, or was torn down): the body's signal aborted with
   * `reason` if one is given, its watch ended, an Observable unsubscribed. A Promise still
   * running goes on as an overrun; a body still in its synchronous part is `ending`.
   */
  halt(reason: Error | undefined): void {
    const { state, subscription, watch, context } = this;
    this.context = this.subscription = this.watch = undefined;
    if (state === 'idle' || state === 'subscribed') this.state = 'over';
    else if (state === 'invoking') this.state = 'ending';
    else if (state === 'awaiting') this.state = 'overrun';
    watch?.release();
    if (subscription !== undefined) unsubscribeQuietly(subscription);
    if (reason !== undefined) context?.abort(reason);
  }

  /**
   * The body said "slow down" and its call enters its lanes again: its watch ended and what it
   * was handed dropped, it waits to start once more, as if never started.
   */
  again(): void {
    this.halt(undefined);
    this.state = 'idle';
  }

  /** Aborts the body's signal while the call is open (it was cut off: a lost lane, its ceiling). */
  abort(reason: Error): void {
    this.context?.abort(reason);
  }
}
