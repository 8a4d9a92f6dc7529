// The run: an Observable of turns. Each turn asks the model, emits its response, runs the
// turn's calls as one batch inside the runner's lanes (their outcomes go back as tool messages
// in call order), merges the calls' deltas, and goes on to the next turn, until the model
// answers without calls or the run stops. `run$()` is this Observable, and `run()` is it
// folded: one engine path. The run's stop is a composition of what can stop it (the caller's
// signal, runSeconds), replayed to every turn; a failure under FAIL_RUN is the batch's own.
import { randomUUID } from 'node:crypto';
import { isLeft } from 'fp-ts/lib/Either.js';
import {
  catchError,
  concat,
  concatMap,
  connectable,
  defer,
  EMPTY,
  finalize,
  from,
  isObservable,
  map,
  merge,
  NEVER,
  Observable,
  of,
  race,
  ReplaySubject,
  take,
  tap,
  type ObservableInput,
  type Subscription,
} from 'rxjs';
import { assignDelta, cancelled, givenReason, isPromiseLike, mergeDeltas, runBatch, type BatchCall, type InvokeContext, type Outcome, type StopReason } from '../batch/index.js';
import { describeFailures, describeValue } from '../config/index.js';
import { DeadlineExceededError, ProviderError, RunError, toErrorInfo, UnknownToolError } from '../errors.js';
import { scheduleAfter } from '../time.js';
import { decodeArguments, type AgentRef, type NestedRunResult, type RunState } from '../tools/index.js';
import { OnToolError, type Agent } from './Agent.js';
import { toOutcomeEvent, type RunEvent, type ToolOutcomeEvent } from './events.js';
import { decodeModelResponse, type DecodedResponse, type Message, type ModelRequest, type ToolCall } from './model.js';
import { policySteps, type PolicyTarget } from './policies.js';
import { inJsonForm, neverStarted, refused, RunnerCall, shownArguments, toolMessage, TurnActivity, TurnScope, type NestedRuns } from './turnCalls.js';
import type { RunTrace } from './tracing.js';
import type { RunnerParts, RunParent, RunPlan, RunStatus } from './types.js';

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

function failed(error: Error): RunEvent {
  return { type: 'RUN_FAILED', error: toErrorInfo(error) };
}

function statusOf(event: RunEvent): RunStatus {
  return event.type === 'RUN_COMPLETED' ? 'completed' : event.type === 'RUN_FAILED' ? 'failed' : 'cancelled';
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

// One answer of the model: decoded, or the run's failure. What the provider returned may be a
// Promise, an Observable (its first value), or anything RxJS can read; each request has its own
// AbortController, aborted only if the run stops while the request waits.
type Answer = { readonly reply: DecodedResponse } | { readonly failure: RunEvent };

function answerOf(turn: number, outcome: { raw: unknown } | { error: unknown } | undefined): Answer {
  if (outcome === undefined) return { failure: failed(new ProviderError(turn, 'the provider completed without a response')) };
  if ('error' in outcome) {
    // The provider's facts (an HTTP status, its code, the attempts made) go with the failure.
    const info = toErrorInfo(outcome.error);
    return { failure: failed(new ProviderError(turn, info.message, info)) };
  }
  let decoded: ReturnType<typeof decodeModelResponse>;
  try {
    decoded = decodeModelResponse(outcome.raw);
  } catch (error) {
    // A reply that throws when read (a getter, a proxy) is the provider's failure too.
    return { failure: failed(new ProviderError(turn, toErrorInfo(error).message)) };
  }
  if (isLeft(decoded)) return { failure: failed(new ProviderError(turn, `the reply does not decode: ${decoded.left}`)) };
  return { reply: decoded.right };
}

function ask(parts: RunnerParts, request: ModelRequest, turn: number): Observable<Answer> {
  return new Observable<Answer>((subscriber) => {
    // Each request its own controller: a provider that keeps a signal sees only this request's abort.
    const controller = new AbortController();
    // Set once the provider answered (or failed): later answers are ignored, and the teardown does not abort.
    let done = false;
    let reply: Subscription | undefined;
    const answer = (outcome: { raw: unknown } | { error: unknown } | undefined): void => {
      if (done) return;
      done = true;
      reply?.unsubscribe();
      subscriber.next(answerOf(turn, outcome));
      subscriber.complete();
    };
    subscriber.add(() => {
      reply?.unsubscribe();
      if (!done) {
        done = true;
        controller.abort(new Error('the run stopped'));
      }
    });
    let produced: unknown;
    try {
      produced = parts.provider.respond(request, controller.signal);
    } catch (error) {
      return answer({ error });
    }
    // A Promise or an Observable, as the contract says; anything else RxJS can read (an
    // async iterable, say) is taken as it always was, and the rest is the provider's failure.
    let reply$: Observable<unknown> | undefined;
    if (isObservable(produced)) reply$ = produced;
    else if (!isPromiseLike(produced)) {
      try {
        reply$ = from(produced as ObservableInput<unknown>);
      } catch {
        return answer({ error: new TypeError(`respond must return a Promise or an Observable of the reply (wrap a ready one in Promise.resolve or of), got ${describeValue(produced)}`) });
      }
    }
    if (reply$ === undefined) {
      (produced as PromiseLike<unknown>).then(
        (raw) => answer({ raw }),
        (error: unknown) => answer({ error }),
      );
      return;
    }
    const subscription = reply$.subscribe({ next: (raw) => answer({ raw }), error: (error: unknown) => answer({ error }), complete: () => answer(undefined) });
    if (done) subscription.unsubscribe();
    else reply = subscription;
  });
}

/** What one run's turns share: its id, its conversation and state, its stop, whether it ended. */
class Run implements NestedRuns {
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
  readonly stop$: Observable<StopReason>;
  // The stop's sources (the signal's listener, the runSeconds timer), ended with the run.
  readonly stopping: Subscription;

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
    // Without a source it never stops (and never completes: a turn races it against its model).
    const stops = connectable(sources.length === 0 ? NEVER : merge(...sources).pipe(take(1), tap((reason) => (this.stopped ??= reason))), {
      connector: () => new ReplaySubject<StopReason>(1),
      resetOnDisconnect: false,
    });
    this.stop$ = stops;
    this.stopping = stops.connect();
  }

  /** The run's final event: its state and messages handed over, watchers told, then the event. */
  finish(event: RunEvent): Observable<RunEvent> {
    return defer(() => {
      if (this.ended) return EMPTY;
      this.ended = true;
      this.plan.onFinish?.finish({ state: this.state, messages: [...this.messages] });
      this.activityEnded(statusOf(event));
      return of(event);
    });
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

  // The turn's calls as the batch runs them, each decoded against its tool or refused.
  callsOf(toolCalls: readonly ToolCall[], malformed: ReadonlyMap<number, string>, scope: TurnScope): RunnerCall[] {
    const { allowed, allowedSet } = this.plan;
    const { tools, policed } = this.parts;
    const seen = new Set<string>();
    return toolCalls.map((toolCall, position): RunnerCall => {
      const { id: callId, name } = toolCall;
      const problem = malformed.get(position);
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
    });
  }

  // One turn's calls as a batch. `contents` receives each result's JSON as it settles.
  batchOf(turn: number, toolCalls: readonly ToolCall[], malformed: ReadonlyMap<number, string>, contents: Array<string | undefined>): Observable<Outcome> {
    const { parts, plan, runId } = this;
    const { tenant } = plan;
    const calls = this.callsOf(toolCalls, malformed, new TurnScope(this, runId, tenant, this.state));
    // Policies see each call as { runId, callId, tool, args, tenant }: made only when there are policies to see them.
    const policed = parts.policed || calls.some((call) => call.needsApproval);
    const targets: PolicyTarget[] = policed
      ? calls.map((call) => ({ call: { runId, callId: call.callId, tool: call.tool, args: call.shown, tenant }, needsApproval: call.needsApproval }))
      : [];
    const { gate, settle: policySettle } = policed
      ? policySteps(parts.policies, targets, (outcome: Outcome): ToolOutcomeEvent => toOutcomeEvent(turn, outcome))
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
    return runBatch(calls, {
      concurrency: plan.turnConcurrency,
      shared: parts.shared,
      tenant,
      ...(plan.nesting ? { lent: plan.nesting.lent } : {}),
      deadline: parts.deadline,
      failFast: this.failFast,
      ...(gate ? { gate } : {}),
      settle,
      stop$: this.stop$,
      scheduler: parts.scheduler,
      ...(parts.monitor ? { monitor: parts.monitor } : {}),
      onActivity: new TurnActivity(parts.activity, runId, turn, this.parent),
    });
  }
}

// Turn `turn`: ask the model, unless the run stopped or ran out of turns; a stop while it is
// asked ends the run at once (the request aborted).
function turn(run: Run, n: number): Observable<RunEvent> {
  return defer(() => {
    const { plan } = run;
    if (n > plan.maxTurns) return run.finish(failed(new RunError(`${plan.agent.name} reached maxTurns (${plan.maxTurns}) without a final answer`)));
    // A run stopped before this turn does not take even a synchronous reply.
    if (run.stopped !== undefined) return run.finish(ending(run.stopped));
    const request: ModelRequest = { agent: plan.agent.name, model: plan.agent.model, instructions: plan.agent.instructions, messages: [...run.messages], tools: plan.specs };
    return race(run.stop$.pipe(map((stop): Answer | StopReason => stop)), ask(run.parts, request, n)).pipe(
      take(1),
      concatMap((answer) => {
        if (!('reply' in answer) && !('failure' in answer)) return run.finish(ending(answer));
        if ('failure' in answer) return run.finish(answer.failure);
        return respond(run, n, answer.reply);
      }),
    );
  });
}

// The model's response, then the final answer or the turn's batch.
function respond(run: Run, n: number, reply: DecodedResponse): Observable<RunEvent> {
  const { text, toolCalls = [] } = reply.response;
  run.messages.push({ role: 'assistant', content: text ?? '', ...(toolCalls.length > 0 ? { toolCalls } : {}) });
  const response: RunEvent = { type: 'MODEL_RESPONSE', turn: n, ...(text !== undefined ? { text } : {}), toolCalls };
  if (toolCalls.length === 0) return concat(of(response), defer(() => run.finish(run.finalAnswer(text))));
  return concat(
    of(response),
    defer(() => {
      const outcomes: Outcome[] = [];
      // Each result's JSON, by call index, as the settle step made it.
      const contents: Array<string | undefined> = [];
      return concat(
        run.batchOf(n, toolCalls, reply.malformed, contents).pipe(
          map((outcome) => {
            outcomes.push(outcome);
            run.messages.push(toolMessage(outcome, contents[outcome.index]));
            return toOutcomeEvent(n, outcome);
          }),
        ),
        defer(() => after(run, n, outcomes)),
      );
    }),
  );
}

// The batch is over: its deltas merged, then the run stops, fails or asks again.
function after(run: Run, n: number, outcomes: readonly Outcome[]): Observable<RunEvent> {
  // The state is replaced only when some call recorded something.
  if (outcomes.some((o) => o.kind === 'result' && o.delta !== undefined)) {
    // The deltas are frozen copies already: freezing the top keeps the whole state read-only.
    run.state = Object.freeze(assignDelta({ ...run.state }, mergeDeltas(outcomes)));
  }
  const stoppedBy = outcomes.find((o) => o.kind !== 'result' && o.stopped !== undefined);
  const reason = run.stopped ?? (stoppedBy && stoppedBy.kind !== 'result' ? stoppedBy.stopped : undefined);
  if (reason !== undefined) return run.finish(ending(reason));
  const failure = run.failFast ? outcomes.find((o) => o.kind === 'error') : undefined;
  if (failure !== undefined && failure.kind === 'error') return run.finish({ type: 'RUN_FAILED', error: failure.error });
  return turn(run, n + 1);
}

/**
 * One run as a cold Observable of its transcript: RUN_STARTED, then per turn MODEL_RESPONSE
 * and one TOOL_RESULT / TOOL_ERROR / TOOL_INDETERMINATE per call in call order, then the final
 * event. Unsubscribing ends the run where it stands (the request aborted, the batch's calls
 * stopped, permits back). Anything unforeseen thrown along the way ends the run with RUN_FAILED,
 * never the process.
 */
export function runEvents(parts: RunnerParts, plan: RunPlan): Observable<RunEvent> {
  return defer(() => {
    const { activity, scheduler, tracing } = parts;
    // Traced, the run is made with the trace's parts (its provider's answers traced) and followed by it.
    const trace = tracing?.open(parts, plan);
    const run = new Run(trace === undefined ? parts : trace.parts, plan, trace);
    trace?.begin(run.runId);
    if (activity.observed) {
      activity.next({ type: 'run-started', runId: run.runId, agent: plan.agent.name, tenant: plan.tenant, ...(run.parent ? { parent: run.parent } : {}), at: scheduler.now() });
    }
    const started: RunEvent = { type: 'RUN_STARTED', runId: run.runId, agent: plan.agent.name, tenant: plan.tenant, input: plan.input };
    const run$ = concat(of(started), turn(run, 1)).pipe(
      catchError((error: unknown) => run.finish({ type: 'RUN_FAILED', error: toErrorInfo(error) })),
      finalize(() => {
        run.stopping.unsubscribe();
        // Watchers of activity$ (a live view, a recorder) still see a run that was left end.
        if (!run.ended) run.activityEnded('cancelled');
      }),
    );
    return trace === undefined ? run$ : trace.follow(run$);
  });
}
