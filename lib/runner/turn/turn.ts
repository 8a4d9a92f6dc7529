// One turn of a run: the model asked (a stop while it waits ends the run, the request aborted),
// MODEL_RESPONSE, then the turn's calls as one batch whose outcomes go out in call order, or
// the run's final event. A turn is one record (`Turn`): the observer of its request and its
// batch's subscriber. A streamed turn is handed to `streamed` (streamedTurn.ts) once its first
// part comes.
import { Observable, type Subscriber, type Unsubscribable } from 'rxjs';
import type { Outcome, StopReason } from '../../batch/index.js';
import { DirectSubscriber } from '../../directSubscriber.js';
import type { Keep } from '../../keep.js';
import { RunError } from '../../errors.js';
import { finalAnswer, providerFailure, responseOf, Request, type ResponseObserver } from '../model/ask.js';
import { ending, failed, type RunEvent } from '../events.js';
import type { Permit } from '../../lanes/index.js';
import type { TurnRun } from './turnRun.js';
import { streamed } from './streamedTurn.js';
import { callsOf } from './turnCalls.js';

/**
 * Turn `n` of a run, as an Observable of its events: the model asked (unless the run stopped or
 * ran out of turns; a stop while it is asked ends the run at once, the request aborted), then
 * MODEL_RESPONSE, then the outcomes of its calls' batch in call order, or the run's final
 * event. What comes next (another turn, or nothing) is left on the run for `turnByTurn`.
 */
export function turn(run: TurnRun, n: number): Observable<RunEvent> {
  return new Observable<RunEvent>((subscriber) => new Turn(run, n, subscriber).start());
}

const noContents: Array<string | undefined> = [];
const noOutcomes: Outcome[] = [];

// One turn as it runs: the request, then its batch (or a streamed turn's reading). A record per
// turn that is their observer, with no operator chain of its own: it hears the provider's
// response, and it is its batch's subscriber itself (a `DirectSubscriber`), so a turn left while
// its batch is being subscribed (its calls answering synchronously) ends that batch at once. Anything unforeseen thrown in its
// callbacks fails the turn, and the run with RUN_FAILED (turnByTurn's `failed`).
class Turn extends DirectSubscriber<Outcome> implements ResponseObserver {
  // The request in flight, until it has its response or is left.
  private asked: Unsubscribable | undefined = undefined;
  // The run's stop, heard while the model is asked.
  private stopping: Unsubscribable | undefined = undefined;
  // A streamed turn's later parts, and who reads them.
  private rest: Subscriber<unknown> | undefined = undefined;
  private streaming = false;
  // True once the response came (the batch, or the stream, took over) or the request was left.
  private responseCame = false;
  // Each result's JSON, by call index, as the settle step made it; the outcomes so far (they
  // come in call order). Sized when the calls are known.
  private contents: Array<string | undefined> = noContents;
  private outcomes: Outcome[] = noOutcomes;
  private taken = 0;
  // The turn's place in its tenant's token budget, if the runner has one; true while it waits for the budget to answer.
  private budget: Permit | undefined = undefined;
  private budgetWaits = false;

  constructor(
    private readonly run: TurnRun,
    private readonly n: number,
    private readonly subscriber: Subscriber<RunEvent>,
  ) {
    super();
  }

  start(): void {
    const { run, n, subscriber } = this;
    const { plan } = run;
    if (n > plan.maxTurns) return this.end(failed(new RunError(`${plan.agent.name} reached maxTurns (${plan.maxTurns}) without a final answer`)));
    // A run stopped before this turn does not take even a synchronous response.
    if (run.stopped !== undefined) return this.end(ending(run.stopped));
    subscriber.add(this);
    // A run nothing outside can stop hears nothing while it asks.
    if (run.stop$ !== undefined) this.stopping = run.stop$.subscribe((reason) => this.stopped(reason));
    // A tenant's token budget is asked first: the model is asked once it has something left.
    const permit = (this.budget = run.budgetFor(this));
    if (permit !== undefined) {
      if (this.closed) return;
      if (!permit.holding) {
        this.budgetWaits = true;
        return;
      }
    }
    this.ask();
  }

  private ask(): void {
    const { run } = this;
    const request = run.request();
    // Known before it is sent: a stop while the provider is still being asked leaves it then.
    const asked = (this.asked = new Request(this));
    asked.send(run.parts.provider, request);
  }

  /** @internal The tenant's token budget, which had to be asked of a store shared by a fleet, covers this turn. */
  granted(): void {
    if (!this.budgetWaits || this.closed || this.responseCame) return;
    this.budgetWaits = false;
    this.ask();
  }

  /** @internal The tenant's token budget cannot cover this turn (a BudgetExceededError), or could not be asked: the run fails. */
  lost(error: Error): void {
    if (this.closed || this.responseCame) return;
    this.end(failed(error));
  }

  // The run stopped while the model was asked: the request is left (aborted) and the run ends.
  private stopped(reason: StopReason): void {
    if (this.responseCame) return;
    this.leave();
    this.end(ending(reason));
  }

  // A streamed turn: its first part hands the turn to `streamed`, the later ones go to its reader.
  streamPart(part: unknown): void {
    if (this.streaming) {
      this.rest?.next(part);
      return;
    }
    // A turn left (its run's subscriber gone) takes no response.
    if (this.closed) return;
    const { run, n, subscriber } = this;
    try {
      this.streaming = true;
      this.heard();
      // The stream's events go to the turn's subscriber as they are; the request stays open
      // for the parts after this one until the stream is no longer read.
      streamed(run, n, part, new Observable<unknown>((rest) => this.restOf(rest))).subscribe(subscriber);
    } catch (error) {
      subscriber.error(error);
    }
  }

  responded(value: unknown): void {
    if (this.streaming) {
      this.rest?.next(value);
      return;
    }
    // A turn left (its run's subscriber gone) takes no response.
    if (this.closed) return;
    const { run, n, subscriber } = this;
    try {
      this.heard();
      const decoded = responseOf(n, value);
      if ('failure' in decoded) return this.end(decoded.failure);
      const { response, malformed } = decoded.response;
      subscriber.next(run.responded(n, response));
      const { toolCalls = [] } = response;
      if (toolCalls.length === 0) return this.final(finalAnswer(run.plan.agent, response.text));
      if (this.closed) return;
      this.contents = new Array<string | undefined>(toolCalls.length);
      this.outcomes = new Array<Outcome>(toolCalls.length);
      run.batchOf(n, callsOf(run, toolCalls, malformed, run.scope()), this.contents).subscribe(this);
    } catch (error) {
      subscriber.error(error);
    }
  }

  responseFailed(error: unknown): void {
    if (this.streaming) {
      this.rest?.error(error);
      return;
    }
    if (this.closed) return;
    this.heard();
    this.end(providerFailure(this.n, error));
  }

  responseEnded(): void {
    if (this.streaming) {
      this.rest?.complete();
      return;
    }
    if (this.closed) return;
    this.heard();
    this.end(providerFailure(this.n, undefined));
  }

  // The response came: the stop now reaches the batch, which classifies its calls. A whole
  // response's request is over, and let go (its AbortSignal is some 500 bytes).
  private heard(): void {
    this.responseCame = true;
    if (!this.streaming) this.asked = undefined;
    this.stopping?.unsubscribe();
    this.stopping = undefined;
  }

  // A streamed turn reads the parts after its first: the request stays open until it leaves.
  private restOf(reader: Subscriber<unknown>): () => void {
    this.rest = reader;
    return () => {
      this.rest = undefined;
      this.leave();
    };
  }

  // The batch's outcomes, in call order, each into the conversation and out as its event.
  override next(outcome: Outcome): void {
    if (this.closed) return;
    try {
      this.outcomes[this.taken++] = outcome;
      const event = this.run.tookOutcome(this.n, outcome, this.contents);
      if (event !== undefined) this.subscriber.next(event);
    } catch (error) {
      this.error(error);
    }
  }

  override error(error: unknown): void {
    if (this.closed) return;
    this.unsubscribe();
    this.subscriber.error(error);
  }

  // The batch is over (its teardown runs first): the run ends, or goes on to its next turn.
  override complete(): void {
    if (this.closed) return;
    this.unsubscribe();
    try {
      // Every call has its outcome by now (the reorder errs otherwise); the array is cut to those
      // that came all the same, so a hole can never reach the run.
      const { outcomes, taken } = this;
      const last = this.run.after(this.n, taken === outcomes.length ? outcomes : outcomes.slice(0, taken));
      for (const event of last) this.subscriber.next(event);
      this.subscriber.complete();
    } catch (error) {
      this.subscriber.error(error);
    }
  }

  // The final answer as the run's final event: at once, or once an output schema that checks
  // asynchronously has given its verdict (a turn left meanwhile ends nothing, as below).
  private final(event: RunEvent | Promise<RunEvent>): void {
    if (!(event instanceof Promise)) return this.end(event);
    void event.then((final) => {
      try {
        this.end(final);
      } catch (error) {
        this.subscriber.error(error);
      }
    });
  }

  // The run's final event, if it has not ended already, and the turn is over. A turn left
  // meanwhile (its subscriber gone while it emitted MODEL_RESPONSE, say) ends nothing: the run
  // was left, and its own teardown says so.
  private end(event: RunEvent): void {
    if (this.closed) return;
    const last = this.run.end(event);
    if (last !== undefined) this.subscriber.next(last);
    this.subscriber.complete();
  }

  // Leaves the request, if it is still in flight (it is then aborted).
  private leave(): void {
    const { asked } = this;
    this.asked = undefined;
    asked?.unsubscribe();
  }

  override unsubscribe(): void {
    if (this.closed) return;
    this.stopping?.unsubscribe();
    this.stopping = undefined;
    this.leave();
    // A turn's budget holds nothing that must be given back; leaving tells a fleet store not to wait for it.
    this.budget?.leave();
    super.unsubscribe();
  }
}

/** @internal One inert object of each class this module makes per turn, for keepWarmShapes (lib/shapes.ts). */
export function keepShapes(keep: Keep): void {
  keep(() => new Turn(undefined as never, 0, undefined as never));
}
