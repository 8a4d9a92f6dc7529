// The run: an Observable of turns. Each turn asks the model, emits its response, runs the
// turn's calls as one batch inside the runner's lanes (their outcomes go back as tool messages
// in call order), merges the calls' deltas, and goes on to the next turn, until the model
// answers without calls or the run stops. `run$()` is this Observable, and `run()` is it
// folded: one engine path. The run's stop is a composition of what can stop it (the caller's
// signal, runSeconds), replayed to every turn; a failure under FAIL_RUN is the batch's own.
// A streamed turn hands each call to its batch as soon as the stream completes it, and holds
// the outcomes until the response is complete, so its transcript is the whole turn's.
import { randomUUID } from 'node:crypto';
import { isLeft } from 'fp-ts/lib/Either.js';
import {
  catchError,
  concat,
  connectable,
  defer,
  EMPTY,
  finalize,
  ignoreElements,
  map,
  merge,
  Observable,
  of,
  ReplaySubject,
  Subject,
  take,
  takeUntil,
  tap,
  type Observer,
  type Subscriber,
  Subscription,
  type Unsubscribable,
} from 'rxjs';
import { assignDelta, cancelled, givenReason, mergeDeltas, runBatch, type BatchCall, type InvokeContext, type Outcome, type StopReason } from '../batch/index.js';
import { describeFailures } from '../config/index.js';
import { DeadlineExceededError, RunError, toErrorInfo, UnknownToolError } from '../errors.js';
import { scheduleAfter } from '../time.js';
import { decodeArguments, type AgentRef, type NestedRunResult, type RunState } from '../tools/index.js';
import { OnToolError, type Agent } from './Agent.js';
import { failed, statusOf, toOutcomeEvent, toResponseEvent, type RunEvent, type ToolOutcomeEvent } from './events.js';
import { answerOf, providerFailure, Request, type ReplyObserver } from './ask.js';
import { turnByTurn, type TurnSource } from './turnByTurn.js';
import type { Message, ModelRequest, ModelResponse, ToolCall } from './model.js';
import { isStreamPart, WrittenTurn } from './modelStream.js';
import { policySteps, type PolicyTarget } from './policies.js';
import { inJsonForm, neverStarted, refused, RunnerCall, shownArguments, toolMessage, TurnActivity, TurnScope, type NestedRuns } from './turnCalls.js';
import type { RunTrace } from './tracing.js';
import type { RunnerParts, RunPlan } from './parts.js';
import type { RunParent, RunStatus } from './types.js';

// randomUUID builds its text from cached pieces, a chain of about seventeen string nodes;
// reading one character flattens it into one string: about 0.4 KB less for as long as the
// run lives (and every idempotency key built from it is cheaper to read).
function flat(text: string): string {
  text.charCodeAt(0);
  return text;
}

function ending(reason: StopReason): RunEvent {
  return reason.kind === 'cancelled' ? { type: 'RUN_CANCELLED', reason: reason.why } : { type: 'RUN_FAILED', error: reason.error };
}


// The caller's signal as a stop: at once if it is aborted already.
function aborted(signal: AbortSignal): Observable<StopReason> {
  return new Observable<StopReason>((subscriber) => {
    const abort = (): void => {
      subscriber.next(cancelled(signal.reason));
      subscriber.complete();
    };
    if (signal.aborted) return abort();
    signal.addEventListener('abort', abort, { once: true });
    return () => signal.removeEventListener('abort', abort);
  });
}

// One whole answer of the model: decoded, or the run's failure.
/** What one run's turns share: its id, its conversation and state, its stop, whether it ended. */
class Run implements NestedRuns, TurnSource<RunEvent>, Unsubscribable {
  readonly runId = flat(randomUUID());
  readonly parent: RunParent | undefined;
  readonly failFast: boolean;
  // The run's state, deeply frozen (JSON-like data copied in), replaced as each batch's deltas
  // are merged: every batch hands this very object to its tools, with no copy.
  state: RunState;
  // The conversation so far, as the provider will see it next turn.
  readonly messages: Message[];
  // The first stop of the run (cancel, runSeconds); later ones change nothing.
  stopped: StopReason | undefined = undefined;
  // True once the run's final event went out; a run left by unsubscribing ends without one.
  ended = false;
  // The stop as every turn and batch hears it: replayed to whoever listens after it came.
  // Undefined for a run nothing outside can stop (no signal, no runSeconds).
  readonly stop$: Observable<StopReason> | undefined;
  // The stop's sources (the signal's listener, the runSeconds timer), ended with the run.
  readonly stopping: Subscription | undefined;

  constructor(
    readonly parts: RunnerParts,
    readonly plan: RunPlan,
    /** The run's spans, when the runner traces: its calls' bodies run inside their spans. */
    readonly trace: RunTrace | undefined,
  ) {
    this.parent = plan.nesting?.parent;
    this.failFast = plan.agent.onToolError === OnToolError.FAIL_RUN;
    this.state = plan.initial;
    this.messages = [{ role: 'user', content: plan.input }];
    const { runSeconds } = parts.deadline;
    const sources: Array<Observable<StopReason>> = [];
    if (plan.signal !== undefined) sources.push(aborted(plan.signal));
    if (runSeconds !== undefined) {
      // Through scheduleAfter: a runSeconds past 24.8 days would otherwise fire at once.
      sources.push(
        new Observable<StopReason>((subscriber) =>
          scheduleAfter(parts.scheduler, () => {
            const error = new DeadlineExceededError('runSeconds', runSeconds);
            subscriber.next({ kind: 'deadline', why: error.message, error: toErrorInfo(error) });
          }, runSeconds * 1000),
        ),
      );
    }
    // Without a source the run never stops from outside: no composition to make, nothing to race.
    if (sources.length === 0) {
      this.stop$ = undefined;
      this.stopping = undefined;
      return;
    }
    const stops = connectable(merge(...sources).pipe(take(1), tap((reason) => (this.stopped ??= reason))), {
      connector: () => new ReplaySubject<StopReason>(1),
      resetOnDisconnect: false,
    });
    this.stop$ = stops;
    this.stopping = stops.connect();
  }

  /** The run's final event, or undefined if it ended already: its state and messages handed over, watchers told. */
  end(event: RunEvent): RunEvent | undefined {
    if (this.ended) return undefined;
    this.ended = true;
    this.upcoming = undefined;
    this.plan.onFinish?.finish({ state: this.state, messages: [...this.messages] });
    this.activityEnded(event.type === 'RUN_COMPLETED' || event.type === 'RUN_FAILED' || event.type === 'RUN_CANCELLED' ? statusOf(event) : 'failed');
    return event;
  }

  // The turn to ask next, once the one before it is over; none once the run ended.
  private upcoming: number | undefined = 1;

  /** The next turn, as `turnByTurn` reads them: undefined once the run has ended. */
  nextTurn(): Observable<RunEvent> | undefined {
    const n = this.upcoming;
    this.upcoming = undefined;
    return n === undefined || this.ended ? undefined : turn(this, n);
  }

  /** Anything unforeseen thrown along the way ends the run with RUN_FAILED, never the process. */
  turnFailed(error: unknown): RunEvent | undefined {
    return this.end(failed(error));
  }

  /** The run's subscriber is gone (it ended, or left): the stop's sources end, and watchers of a run that was left see it end. */
  unsubscribe(): void {
    this.stopping?.unsubscribe();
    // Watchers of activity$ (a live view, a recorder) still see a run that was left end.
    if (!this.ended) this.activityEnded('cancelled');
  }

  /** The model's response, in the conversation and as its event. */
  responded(n: number, response: ModelResponse): RunEvent {
    const { text, toolCalls = [] } = response;
    this.messages.push({ role: 'assistant', content: text ?? '', ...(toolCalls.length > 0 ? { toolCalls } : {}) });
    return toResponseEvent(n, response);
  }

  /** A call's outcome, in the conversation (its result's JSON from `contents`) and as its event. */
  tookOutcome(n: number, outcome: Outcome, contents: ReadonlyArray<string | undefined>): ToolOutcomeEvent {
    this.messages.push(toolMessage(outcome, contents[outcome.index]));
    return toOutcomeEvent(n, outcome);
  }

  /**
   * Turn `n`'s batch is over: its deltas merged, then the run stops or fails (its final event
   * returned), or goes on to the next turn (undefined). `failure` is a broken stream's.
   */
  after(n: number, outcomes: readonly Outcome[], failure?: RunEvent): RunEvent | undefined {
    // The state is replaced only when some call recorded something.
    if (outcomes.some((o) => o.kind === 'result' && o.delta !== undefined)) {
      // The deltas are frozen copies already: freezing the top keeps the whole state read-only.
      this.state = Object.freeze(assignDelta({ ...this.state }, mergeDeltas(outcomes)));
    }
    // A cancel is a cancel, even of a turn whose stream broke; otherwise the stream's failure is the run's.
    if (failure !== undefined && this.stopped === undefined) return this.end(failure);
    const stoppedBy = outcomes.find((o) => o.kind !== 'result' && o.stopped !== undefined);
    const reason = this.stopped ?? (stoppedBy && stoppedBy.kind !== 'result' ? stoppedBy.stopped : undefined);
    if (reason !== undefined) return this.end(ending(reason));
    const failedCall = this.failFast ? outcomes.find((o) => o.kind === 'error') : undefined;
    if (failedCall !== undefined && failedCall.kind === 'error') return this.end({ type: 'RUN_FAILED', error: failedCall.error });
    if (!this.ended) this.upcoming = n + 1;
    return undefined;
  }

  // Tells watchers of activity$ the run ended; the event is made only if someone watches.
  activityEnded(status: RunStatus): void {
    const { activity, scheduler } = this.parts;
    if (activity.observed) activity.next({ type: 'run-ended', runId: this.runId, status, ...(this.parent ? { parent: this.parent } : {}), at: scheduler.now() });
  }

  /**
   * A tool body's `runAgent`: a sub-agent in this run's tenant, under the calling body's signal
   * and lanes. A call that was stopped, or whose outcome the batch has already taken, starts
   * nothing: its lanes and its signal no longer stand for a running body, so the sub-run
   * resolves cancelled at once, as it would have had the stop come a moment after it started.
   */
  nested(agent: AgentRef, input: string, context: InvokeContext, call: RunnerCall): Promise<NestedRunResult> {
    const { callId, tool } = call;
    const { signal } = context;
    if (signal.aborted) {
      const why = givenReason(signal.reason);
      return Promise.resolve(neverStarted(`call ${callId} (${tool}) was stopped${why === undefined ? '' : ` (${why})`}`));
    }
    if (call.over || context.ended) return Promise.resolve(neverStarted(`call ${callId} (${tool}) is over; a body starts nested runs only while its call runs`));
    return this.parts.collect(agent as Agent, input, { tenant: this.plan.tenant, signal }, { lent: context.lent, parent: { runId: this.runId, callId } });
  }

  finalAnswer(text: string | undefined): RunEvent {
    const { agent } = this.plan;
    if (agent.output === undefined) return { type: 'RUN_COMPLETED', output: text ?? '' };
    let parsed: unknown;
    try {
      parsed = JSON.parse(text ?? '');
    } catch (error) {
      return failed(new RunError(`the final answer of ${agent.name} is not JSON (${(error as Error).message}); its output codec needs JSON`));
    }
    const decoded = agent.output.decode(parsed);
    if (isLeft(decoded)) return failed(new RunError(`the final answer of ${agent.name} does not decode: ${describeFailures(decoded.left, 'output')}`));
    return { type: 'RUN_COMPLETED', output: decoded.right };
  }

  /** What a turn's calls share: the run, its tenant, and the state they read. One per turn. */
  scope(): TurnScope {
    return new TurnScope(this, this.runId, this.plan.tenant, this.state);
  }

  // One call of the turn as the batch runs it, decoded against its tool or refused. `seen`
  // holds the ids of the turn's calls before it; `problem` says what was wrong with a malformed one.
  callOf(toolCall: ToolCall, position: number, problem: string | undefined, seen: Set<string>, scope: TurnScope): RunnerCall {
    const { allowed, allowedSet } = this.plan;
    const { tools, policed } = this.parts;
    const { id: callId, name } = toolCall;
    if (problem !== undefined) {
      return refused(toolCall, scope, policed, { name: 'MalformedToolCallError', message: `the model's call #${position + 1} is malformed and was not dispatched: ${problem}` });
    }
    if (seen.has(callId)) {
      return refused(toolCall, scope, policed, { name: 'DuplicateCallIdError', message: `call id ${callId} appears twice in one response; this call was not dispatched` });
    }
    seen.add(callId);
    const registered = allowedSet.has(name) ? tools.get(name) : undefined;
    if (registered === undefined) return refused(toolCall, scope, policed, toErrorInfo(new UnknownToolError(name, allowed)));
    const { declaration, body } = registered;
    const decoded = decodeArguments(declaration, toolCall.arguments);
    if (isLeft(decoded)) return refused(toolCall, scope, policed, toErrorInfo(decoded.left), declaration);
    // Decoded a second time for the policies, only when one will see the call.
    const shown = policed || declaration.needsApproval ? shownArguments(declaration, toolCall.arguments, false) : undefined;
    return new RunnerCall(callId, name, decoded.right, undefined, declaration, body, scope, shown);
  }

  // The turn's calls as the batch runs them, each decoded against its tool or refused.
  callsOf(toolCalls: readonly ToolCall[], malformed: ReadonlyMap<number, string>, scope: TurnScope): RunnerCall[] {
    const seen = new Set<string>();
    return toolCalls.map((toolCall, position) => this.callOf(toolCall, position, malformed.get(position), seen, scope));
  }

  // True when some tool the agent may call needs approval: a streamed turn's gate must be in
  // place before its calls are known. Worked out once per run, by its first streamed turn.
  private approvals: boolean | undefined = undefined;
  mayNeedApproval(): boolean {
    const { tools } = this.parts;
    return (this.approvals ??= this.plan.allowed.some((name) => tools.get(name)?.declaration.needsApproval === true));
  }

  /**
   * One turn's calls as a batch: an array (a turn given whole), or an Observable of calls (a
   * streamed turn, each call given as soon as it is complete). `contents` receives each result's
   * JSON as it settles. `stop$` is the run's stop, or what a streamed turn adds to it.
   */
  batchOf(turn: number, given: readonly RunnerCall[] | Observable<RunnerCall>, contents: Array<string | undefined>, stop$: Observable<StopReason> | undefined = this.stop$): Observable<Outcome> {
    const { parts, plan, runId } = this;
    const { tenant } = plan;
    const whole = Array.isArray(given);
    // Policies see each call as { runId, callId, tool, args, tenant }: made only when there are policies to see them.
    const approvals = whole ? (given as readonly RunnerCall[]).some((call) => call.needsApproval) : this.mayNeedApproval();
    const policed = parts.policed || approvals;
    const targetOf = (call: RunnerCall): PolicyTarget => ({ call: { runId, callId: call.callId, tool: call.tool, args: call.shown, tenant }, needsApproval: call.needsApproval });
    const targets: PolicyTarget[] = policed && whole ? (given as readonly RunnerCall[]).map(targetOf) : [];
    // A streamed turn's targets are added as its calls come, before the batch sees each.
    const calls = policed && !whole ? (given as Observable<RunnerCall>).pipe(tap((call) => targets.push(targetOf(call)))) : given;
    const { gate, settle: policySettle } = policed
      ? policySteps(parts.policies, targets, (outcome: Outcome): ToolOutcomeEvent => toOutcomeEvent(turn, outcome), approvals)
      : { gate: undefined, settle: undefined };
    // Each result goes on in its one JSON form (lib/json.ts), made here in the settle step: the
    // policies, the transcript, the model's message and everything built from them see the same
    // value, and a result that has no JSON form fails its own call.
    const settle = (outcome: Outcome, call: BatchCall): Outcome | Promise<Outcome> => {
      // From here the call is over as far as its body is concerned: a late runAgent starts nothing.
      (call as RunnerCall).over = true;
      if (outcome.kind === 'result') outcome = inJsonForm(outcome, contents);
      return policySettle === undefined ? outcome : policySettle(outcome);
    };
    // One shape for every turn's options (a field it does not use is undefined): no object spread per turn.
    return runBatch(calls, {
      concurrency: plan.turnConcurrency,
      shared: parts.shared,
      tenant,
      lent: plan.nesting?.lent,
      deadline: parts.deadline,
      failFast: this.failFast,
      gate,
      settle,
      stop$,
      scheduler: parts.scheduler,
      monitor: parts.monitor,
      onActivity: new TurnActivity(parts.activity, runId, turn, this.parent),
    });
  }

  // Tells watchers of activity$ a piece of the model's text as it is written; made only if someone watches.
  activityText(turn: number, delta: string): void {
    const { activity, scheduler } = this.parts;
    if (activity.observed) activity.next({ type: 'text-delta', runId: this.runId, turn, delta, ...(this.parent ? { parent: this.parent } : {}), at: scheduler.now() });
  }
}

/**
 * Turn `n` of a run, as an Observable of its events: the model asked (unless the run stopped or
 * ran out of turns; a stop while it is asked ends the run at once, the request aborted), then
 * MODEL_RESPONSE, then the outcomes of its calls' batch in call order, or the run's final
 * event. What comes next (another turn, or nothing) is left on the run for `turnByTurn`.
 */
function turn(run: Run, n: number): Observable<RunEvent> {
  return new Observable<RunEvent>((subscriber) => new Turn(run, n, subscriber).start());
}

const noContents: Array<string | undefined> = [];
const noOutcomes: Outcome[] = [];

// One turn as it runs: the request, then its batch (or a streamed turn's reading). A record per
// turn that is their observer, with no operator chain of its own: it hears the provider's
// answer, and it is its batch's subscriber itself (a Subscription that is an Observer, taken by
// RxJS as it takes an operator's), so a turn left while its batch is being subscribed (its
// calls answering synchronously) ends that batch at once. Anything unforeseen thrown in its
// callbacks fails the turn, and the run with RUN_FAILED (turnByTurn's `failed`).
class Turn extends Subscription implements ReplyObserver, Observer<Outcome> {
  // The request in flight, until answered or left.
  private asked: Unsubscribable | undefined = undefined;
  // The run's stop, heard while the model is asked.
  private stopping: Unsubscribable | undefined = undefined;
  // A streamed turn's later parts, and who reads them.
  private rest: Subscriber<unknown> | undefined = undefined;
  private streaming = false;
  // True once the answer came (the batch, or the stream, took over) or the request was left.
  private answered = false;
  // Each result's JSON, by call index, as the settle step made it; the outcomes so far (they
  // come in call order). Sized when the calls are known.
  private contents: Array<string | undefined> = noContents;
  private outcomes: Outcome[] = noOutcomes;
  private taken = 0;

  constructor(
    private readonly run: Run,
    private readonly n: number,
    private readonly subscriber: Subscriber<RunEvent>,
  ) {
    super();
  }

  start(): void {
    const { run, n, subscriber } = this;
    const { plan } = run;
    if (n > plan.maxTurns) return this.end(failed(new RunError(`${plan.agent.name} reached maxTurns (${plan.maxTurns}) without a final answer`)));
    // A run stopped before this turn does not take even a synchronous reply.
    if (run.stopped !== undefined) return this.end(ending(run.stopped));
    subscriber.add(this);
    const request: ModelRequest = { agent: plan.agent.name, model: plan.agent.model, instructions: plan.agent.instructions, messages: [...run.messages], tools: plan.specs };
    // A run nothing outside can stop hears nothing while it asks.
    if (run.stop$ !== undefined) this.stopping = run.stop$.subscribe((reason) => this.stopped(reason));
    // Known before it is sent: a stop while the provider is still being asked leaves it then.
    const asked = (this.asked = new Request(this));
    asked.send(run.parts, request);
  }

  // The run stopped while the model was asked: the request is left (aborted) and the run ends.
  private stopped(reason: StopReason): void {
    if (this.answered) return;
    this.leave();
    this.end(ending(reason));
  }

  reply(value: unknown): void {
    if (this.streaming) {
      this.rest?.next(value);
      return;
    }
    // A turn left (its run's subscriber gone) takes no answer.
    if (this.closed) return;
    const { run, n, subscriber } = this;
    try {
      if (isStreamPart(value)) {
        this.streaming = true;
        this.heard();
        // The stream's events go to the turn's subscriber as they are; the request stays open
        // for the parts after this one until the stream is no longer read.
        streamed(run, n, value, new Observable<unknown>((rest) => this.restOf(rest))).subscribe(subscriber);
        return;
      }
      this.heard();
      const answer = answerOf(n, value);
      if ('failure' in answer) return this.end(answer.failure);
      const { response, malformed } = answer.reply;
      subscriber.next(run.responded(n, response));
      const { toolCalls = [] } = response;
      if (toolCalls.length === 0) return this.end(run.finalAnswer(response.text));
      if (this.closed) return;
      this.contents = new Array<string | undefined>(toolCalls.length);
      this.outcomes = new Array<Outcome>(toolCalls.length);
      run.batchOf(n, run.callsOf(toolCalls, malformed, run.scope()), this.contents).subscribe(this);
    } catch (error) {
      subscriber.error(error);
    }
  }

  replyFailed(error: unknown): void {
    if (this.streaming) {
      this.rest?.error(error);
      return;
    }
    if (this.closed) return;
    this.heard();
    this.end(providerFailure(this.n, error));
  }

  replyEnded(): void {
    if (this.streaming) {
      this.rest?.complete();
      return;
    }
    if (this.closed) return;
    this.heard();
    this.end(providerFailure(this.n, undefined));
  }

  // The answer came: the stop now reaches the batch, which classifies its calls. A whole
  // answer's request is over, and let go (its AbortSignal is some 500 bytes).
  private heard(): void {
    this.answered = true;
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
  next(outcome: Outcome): void {
    if (this.closed) return;
    try {
      this.outcomes[this.taken++] = outcome;
      this.subscriber.next(this.run.tookOutcome(this.n, outcome, this.contents));
    } catch (error) {
      this.error(error);
    }
  }

  error(error: unknown): void {
    if (this.closed) return;
    this.unsubscribe();
    this.subscriber.error(error);
  }

  // The batch is over (its teardown runs first): the run ends, or goes on to its next turn.
  complete(): void {
    if (this.closed) return;
    this.unsubscribe();
    try {
      // Every call has its outcome by now (the reorder errs otherwise); the array is cut to those
      // that came all the same, so a hole can never reach the run.
      const { outcomes, taken } = this;
      const last = this.run.after(this.n, taken === outcomes.length ? outcomes : outcomes.slice(0, taken));
      if (last !== undefined) this.subscriber.next(last);
      this.subscriber.complete();
    } catch (error) {
      this.subscriber.error(error);
    }
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
    super.unsubscribe();
  }
}

/**
 * A streamed turn. Its batch starts at once and takes each call as soon as the stream completes
 * it, so the call is gated and dispatched inside its lanes while the model writes the next one.
 * The transcript is the whole turn's: MODEL_RESPONSE (every call) once the stream has ended,
 * then the outcomes in call order, those that settled before it held until then. The model's
 * text goes to activity$ as it is written.
 *
 * A stop (the run's, or the batch's own: FAIL_RUN, toolCallSeconds) ends the reading, the
 * request aborted: the response is what had come, and the batch classifies its calls. A stream
 * that fails, or sends a part that does not decode, stops the batch likewise, and the run then
 * fails with it. A turn cut short before any call came has no MODEL_RESPONSE, as a turn stopped
 * while it was asked has none.
 */
function streamed(run: Run, n: number, first: unknown, rest$: Observable<unknown>): Observable<RunEvent> {
  return defer(() => {
    const writing = new WrittenTurn();
    const scope = run.scope();
    // The turn's call ids so far, for duplicates.
    const seen = new Set<string>();
    // The calls, to the batch, one by one.
    const calls = new Subject<RunnerCall>();
    // The stream's failure, as a stop of the batch.
    const broken = new Subject<StopReason>();
    let failure: RunEvent | undefined;
    // Fires when the batch ends: before the stream does, only a stop ends it.
    const batchEnded = new Subject<void>();
    const contents: Array<string | undefined> = [];
    // The batch runs from now on; its outcomes are kept until the response is out.
    const batch = connectable(run.batchOf(n, calls, contents, run.stop$ === undefined ? broken : merge(run.stop$, broken)).pipe(finalize(() => batchEnded.next())), {
      connector: () => new ReplaySubject<Outcome>(),
      resetOnDisconnect: false,
    });
    const reading$ = concat(of(first), rest$).pipe(
      takeUntil(batchEnded),
      tap((part) => {
        const call = writing.read(part);
        if (call !== undefined) {
          const position = writing.calls - 1;
          calls.next(run.callOf(call, position, writing.problemAt(position), seen, scope));
        } else if ((part as { type: string }).type === 'text-delta') run.activityText(n, (part as { delta: string }).delta);
      }),
      catchError((error: unknown) => {
        failure = providerFailure(n, error);
        const { message } = toErrorInfo(error);
        broken.next({ kind: 'cancelled', why: `the model's reply failed mid-stream (${message})` });
        return EMPTY;
      }),
      tap({ complete: () => calls.complete() }),
      ignoreElements(),
    );
    const connection = batch.connect();
    return concat(
      reading$,
      defer(() => {
        const { response } = writing.response();
        // Cut short before any call came: the run ends as a turn stopped while asked does.
        if (response.toolCalls === undefined && (failure !== undefined || run.stopped !== undefined)) return finishing(run, failure ?? ending(run.stopped!));
        return respond(run, n, response, contents, batch, failure);
      }),
    ).pipe(finalize(() => connection.unsubscribe()));
  });
}

// A streamed turn's response, then the final answer, or the outcomes in call order from
// `outcomes$` (its batch, whose settle step fills `contents` with each result's JSON) and what
// comes after them. `failure` is the run's ending once they are out (a broken stream).
function respond(run: Run, n: number, response: ModelResponse, contents: Array<string | undefined>, outcomes$: Observable<Outcome>, failure: RunEvent | undefined): Observable<RunEvent> {
  const event = run.responded(n, response);
  if ((response.toolCalls ?? []).length === 0) return concat(of(event), finishing(run, run.finalAnswer(response.text)));
  const outcomes: Outcome[] = [];
  return concat(
    of(event),
    outcomes$.pipe(
      map((outcome) => {
        outcomes.push(outcome);
        return run.tookOutcome(n, outcome, contents);
      }),
    ),
    defer(() => {
      const last = run.after(n, outcomes, failure);
      return last === undefined ? EMPTY : of(last);
    }),
  );
}

// The run's final event, if it has not ended already.
function finishing(run: Run, event: RunEvent): Observable<RunEvent> {
  return defer(() => {
    const last = run.end(event);
    return last === undefined ? EMPTY : of(last);
  });
}

/**
 * One run as a cold Observable of its transcript: RUN_STARTED, then per turn MODEL_RESPONSE
 * and one TOOL_RESULT / TOOL_ERROR / TOOL_INDETERMINATE per call in call order, then the final
 * event. Unsubscribing ends the run where it stands (the request aborted, the batch's calls
 * stopped, permits back). Anything unforeseen thrown along the way ends the run with RUN_FAILED,
 * never the process.
 */
export function runEvents(parts: RunnerParts, plan: RunPlan): Observable<RunEvent> {
  return new Observable<RunEvent>((subscriber) => {
    const { activity, scheduler, tracing } = parts;
    // Traced, the run is made with the trace's parts (its provider's answers traced) and followed by it.
    const trace = tracing?.open(parts, plan);
    const run = new Run(trace === undefined ? parts : trace.parts, plan, trace);
    trace?.begin(run.runId);
    if (activity.observed) {
      activity.next({ type: 'run-started', runId: run.runId, agent: plan.agent.name, tenant: plan.tenant, ...(run.parent ? { parent: run.parent } : {}), at: scheduler.now() });
    }
    if (trace === undefined) return play(run, subscriber);
    return trace.follow(new Observable<RunEvent>((followed) => play(run, followed))).subscribe(subscriber);
  });
}

// The run's transcript to `subscriber`: RUN_STARTED, then its turns one after another. Whatever
// ends it (its final event, a failure, the subscriber leaving), its stop's sources end with it.
function play(run: Run, subscriber: Subscriber<RunEvent>): void {
  const { plan } = run;
  subscriber.next({ type: 'RUN_STARTED', runId: run.runId, agent: plan.agent.name, tenant: plan.tenant, input: plan.input });
  turnByTurn(run).subscribe(subscriber);
  // After the turns' own teardown, so a run left mid-turn has stopped its batch by then.
  subscriber.add(run);
}
