// The turn loop of one run: ask the provider, emit its response, run the turn's calls as one
// batch inside the runner's lanes, append the results as tool messages in call order, merge
// the calls' deltas, and go round again until the model answers without calls. AgentRunner
// checks a run's options and makes one RunLoop per subscription to it.
import { randomUUID } from 'node:crypto';
import { isLeft } from 'fp-ts/lib/Either.js';
import { from, isObservable, Observable, type Observer, type ObservableInput, type SchedulerLike, type Subject, type Subscribable, Subscription, type Unsubscribable } from 'rxjs';
import { runBatch, mergeDeltas, assignDelta, cancelled, givenReason, isPromiseLike, reportUnhandled, type ActivitySink, type InvokeContext, type BatchCall, type CallActivity, type Delta, type Outcome, type ResultOutcome, type StopReason } from '../batch/index.js';
import { describeFailures, describeValue, type ConcurrencyConfig, type DeadlineConfig } from '../config/index.js';
import { ConfigError, DeadlineExceededError, JsonFormError, ProviderError, RunError, UnknownToolError, toErrorInfo, type ErrorInfo } from '../errors.js';
import { jsonForm, type JsonValue } from '../json.js';
import type { LaneStore, Loan } from '../lanes/index.js';
import { decodeArguments, frozenPlainCopy, frozenView, jsonLike, NotPlainDataError, ownCopy, type AgentRef, type LoopMonitor, type NestedRunResult, type ResolvedDeclaration, type RunState, type ToolBody, type ToolContext, type ToolRegistry, type ToolSpec } from '../tools/index.js';
import { OnToolError, type Agent } from './Agent.js';
import type { RunnerActivity, RunOptions, RunParent, RunResult, RunStatus } from './AgentRunner.js';
import { toOutcomeEvent, type RunEvent, type ToolOutcomeEvent } from './events.js';
import { decodeModelResponse, type DecodedResponse, type Message, type ModelProvider, type ModelRequest, type ModelResponse, type ToolCall } from './model.js';
import { policySteps, type Policies, type PolicyTarget } from './policies.js';
import { scheduleAfter } from '../time.js';

/**
 * A result outcome with its result in its JSON form, and the text the model reads for it in
 * `contents` (a string as itself, anything else as its JSON); a result without a JSON form is
 * the call's ToolResultError, naming where and why.
 */
function inJsonForm(outcome: ResultOutcome, contents: Array<string | undefined>): Outcome {
  const { index, callId, tool, dispatched, result, delta } = outcome;
  let form: JsonValue;
  try {
    form = jsonForm(result);
  } catch (error) {
    // The path from the result (`result.items.0: a circular reference`), shortened if very long.
    const where = error instanceof JsonFormError && error.path !== '' ? `result.${error.message}` : toErrorInfo(error).message;
    return { kind: 'error', index, callId, tool, dispatched, error: { name: 'ToolResultError', message: `the result of ${tool} cannot be sent to the model as JSON (${where})` } };
  }
  contents[index] = typeof form === 'string' ? form : JSON.stringify(form);
  // A string, a number or a boolean is its own form: the outcome goes on as it is.
  return form === result ? outcome : { kind: 'result', index, callId, tool, dispatched, result: form, delta };
}

/** What the model reads for an outcome: the result as JSON (a string as itself), or the failure. */
function toolMessage(outcome: Outcome, content: string | undefined): Message {
  switch (outcome.kind) {
    case 'result':
      return { role: 'tool', toolCallId: outcome.callId, content: content ?? '' };
    case 'error':
      return { role: 'tool', toolCallId: outcome.callId, content: `${outcome.error.name}: ${outcome.error.message}`, isError: true };
    case 'indeterminate':
      return { role: 'tool', toolCallId: outcome.callId, content: outcome.message, isError: true };
  }
}

// Freezes what Object.freeze can: a typed array with elements cannot be frozen, and is left as it is.
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value) && !ArrayBuffer.isView(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}

/** The state of a run that has none: one frozen object, shared. */
export const emptyState: RunState = Object.freeze({});

/**
 * A run's starting state as the run keeps it: a deeply frozen copy of JSON-like data, so the
 * caller's object is never read again and every turn can hand the same object to its tools.
 * Anything else is a ConfigError naming the path of the first value that is not.
 */
export function startingState(state: Readonly<Record<string, unknown>>): RunState {
  if (Object.keys(state).length === 0) return emptyState;
  try {
    return frozenPlainCopy(state, 'state') as RunState;
  } catch (error) {
    if (error instanceof NotPlainDataError) throw new ConfigError(error.path, `state must hold JSON-like data (${jsonLike}): ${error.message}`);
    throw new ConfigError('state', `state cannot be read (${toErrorInfo(error).message})`);
  }
}

// A delta as the run keeps it: a deeply frozen copy, so neither the state nor a cassette
// changes when the body goes on changing its own object. JSON-like data only, as the state.
function recordable(delta: Delta): Delta {
  try {
    return frozenPlainCopy(delta, 'delta') as Delta;
  } catch (error) {
    if (error instanceof NotPlainDataError) throw new TypeError(`record(delta) takes JSON-like data (${jsonLike}): ${error.message}`);
    throw error;
  }
}

// The arguments as the policies see them: what the model sent, decoded on their own and
// frozen, so a policy can neither change what the body gets nor see what the body did to its
// copy. A call refused before decoding shows what the model sent (a copy, if it was an object).
function shownArguments(declaration: ResolvedDeclaration | undefined, sent: ToolCall['arguments'], rejected: boolean): unknown {
  if (rejected || declaration === undefined) {
    try {
      // The copy shares nothing with the reply, so all of it can be frozen.
      return typeof sent === 'string' ? sent : deepFreeze(ownCopy(sent));
    } catch {
      // Arguments that cannot even be copied (their refusal says why) are shown as absent.
      return undefined;
    }
  }
  const decoded = decodeArguments(declaration, sent);
  return isLeft(decoded) ? undefined : frozenView(decoded.right);
}

// A tool body's context. `signal` is an own, enumerable getter (so `{ ...ctx }` keeps it),
// defined with one shared descriptor: a getter written in an object literal is a new function
// per object, hence a hidden class per object, kept in old space until a full collection.
class ToolCallContext implements ToolContext {
  declare readonly signal: AbortSignal;
  readonly idempotencyKey: string;
  readonly #invocation: InvokeContext;

  static readonly #signal: PropertyDescriptor = {
    enumerable: true,
    get(this: ToolCallContext) {
      return this.#invocation.signal;
    },
  };

  constructor(
    readonly callId: string,
    readonly tool: string,
    readonly tenant: string,
    readonly runId: string,
    readonly state: RunState,
    invocation: InvokeContext,
    readonly record: (delta: Readonly<Record<string, unknown>>) => void,
    readonly runAgent: (agent: AgentRef, input: string) => Promise<NestedRunResult>,
  ) {
    this.idempotencyKey = `${runId}:${callId}`;
    this.#invocation = invocation;
    Object.defineProperty(this, 'signal', ToolCallContext.#signal);
  }
}

// What a turn's calls share: their run, their tenant, the state they read, and how a body
// starts a sub-agent. One per turn, handed to each of its calls.
class TurnScope {
  constructor(
    private readonly loop: RunLoop,
    readonly runId: string,
    readonly tenant: string,
    readonly view: RunState,
  ) {}

  nested(agent: AgentRef, input: string, context: InvokeContext, call: RunnerCall): Promise<NestedRunResult> {
    return this.loop.nested(agent, input, context, call);
  }
}

// One call of a turn as the batch sees it. A class, so `invoke` is one method on the prototype
// rather than a closure per call.
class RunnerCall implements BatchCall {
  readonly parallelSafe: boolean | undefined;
  readonly idempotent: boolean | undefined;
  readonly needsApproval: boolean;
  /** Set once the batch has taken the call's outcome (in call order): its body's runAgent then starts nothing. */
  over = false;
  constructor(
    readonly callId: string,
    readonly tool: string,
    /** The body's own decoded arguments; for a call refused before decoding, what the model sent. */
    readonly args: unknown,
    readonly rejected: ErrorInfo | undefined,
    declaration: ResolvedDeclaration | undefined,
    private readonly body: ToolBody<unknown> | undefined,
    private readonly scope: TurnScope,
    /** The arguments as the policies see them (frozen, apart from the body's); undefined when no policy will. */
    readonly shown: unknown,
  ) {
    this.parallelSafe = declaration?.parallelSafe;
    this.idempotent = declaration?.idempotent;
    this.needsApproval = rejected === undefined && declaration?.needsApproval === true;
  }

  invoke(context: InvokeContext): unknown {
    const { callId, tool, scope } = this;
    // The signal and the lent lanes are read only if the body asks: most never do.
    const ctx = new ToolCallContext(
      callId,
      tool,
      scope.tenant,
      scope.runId,
      scope.view,
      context,
      (delta) => context.record(recordable(delta)),
      (sub: AgentRef, subInput: string) => scope.nested(sub, subInput, context, this),
    );
    return this.body!(this.args, ctx);
  }
}

// One turn's call activity as the runner's activity$ carries it: with the run and turn.
class TurnActivity implements ActivitySink {
  constructor(
    private readonly activity: Subject<RunnerActivity>,
    private readonly runId: string,
    private readonly turn: number,
    private readonly parent: RunParent | undefined,
  ) {}

  get observed(): boolean {
    return this.activity.observed;
  }

  next(activity: CallActivity): void {
    if (!this.activity.observed) return;
    const { runId, turn, parent } = this;
    this.activity.next(Object.assign({}, activity, parent === undefined ? { runId, turn } : { runId, turn, parent }));
  }
}

/** What a run needs of its runner: made once per runner and shared by its runs. */
export interface RunnerParts {
  readonly provider: ModelProvider;
  readonly tools: ToolRegistry;
  /** The runner's shared lanes and the config they are sized by. */
  readonly shared: { readonly lanes: LaneStore; readonly concurrency: ConcurrencyConfig };
  readonly deadline: DeadlineConfig;
  readonly monitor: LoopMonitor | undefined;
  readonly scheduler: SchedulerLike;
  readonly activity: Subject<RunnerActivity>;
  readonly policies: Policies;
  /** True when any policy (approval, a guardrail, a hook) is set: calls are then shown to them. */
  readonly policed: boolean;
  /** Runs a sub-agent to its end, for a tool body's `runAgent`. */
  readonly collect: (agent: Agent, input: string, options: RunOptions, nesting: Nesting) => Promise<RunResult>;
}

/** Where a nested run sits in its caller: the lanes the caller lends it, and the run and call that started it. */
export interface Nesting {
  readonly lent: ReadonlyMap<string, Loan>;
  readonly parent: RunParent;
}

/** One run, its options checked by the runner. */
export interface RunPlan {
  readonly agent: Agent;
  readonly input: string;
  readonly tenant: string;
  readonly signal: AbortSignal | undefined;
  readonly initial: Readonly<Record<string, unknown>>;
  readonly maxTurns: number;
  readonly allowed: readonly string[];
  /** The same, as a set. */
  readonly allowedSet: ReadonlySet<string>;
  /** What the provider is shown of those tools. */
  readonly specs: readonly ToolSpec[];
  /** The runner's lanes narrowed by the agent's: the turn's own bounds. */
  readonly turnConcurrency: ConcurrencyConfig;
  readonly nesting: Nesting | undefined;
  readonly onFinish: RunFinish | undefined;
}

/**
 * Where a run's events go: the subscriber of `run$()`, or `run()`'s own collector, which keeps
 * a Subscriber's contract the run relies on (nothing after the completion, `closed` once it is
 * over, its teardown run after the completion was heard).
 */
export interface RunSink {
  readonly closed: boolean;
  next(event: RunEvent): void;
  complete(): void;
  /** The run's teardown, run once the sink is done with (completed, or unsubscribed). */
  add(teardown: () => void): void;
}

/** Told the run's final state and messages as it ends (for `run()`, which resolves with them). */
export interface RunFinish {
  finish(final: { state: RunState; messages: readonly Message[] }): void;
}

// randomUUID builds its text from cached pieces, a chain of about seventeen string nodes;
// reading one character flattens it into one string: about 0.4 KB less for as long as the
// run lives (and every idempotency key built from it is cheaper to read).
function flat(text: string): string {
  text.charCodeAt(0);
  return text;
}

/**
 * One subscription to a run: ask the provider, emit its response, run the batch, merge the
 * deltas, and round again, until the model answers or the run stops. A record with methods
 * rather than a score of closures per run: a service with thousands of runs waiting on their
 * models holds one of these for each.
 */
export class RunLoop {
  private readonly runId = flat(randomUUID());
  private readonly parent: RunParent | undefined;
  private readonly failFast: boolean;
  // The run's state, deeply frozen (JSON-like data copied in), replaced as each batch's deltas
  // are merged: every batch hands this very object to its tools, with no copy.
  private state: RunState;
  // The conversation so far, as the provider will see it next turn.
  private readonly messages: Message[];
  // The first stop of the run (cancel, runSeconds); later ones change nothing.
  private stopReason: StopReason | undefined = undefined;
  // Who hears of a stop: the batch in flight, through its stop$ (made with the first batch).
  private listeners: StopListener[] | undefined = undefined;
  // What batches subscribe to for the run's stop (made with the first batch): the run itself,
  // through listen(), rather than an Observable and its subscriber per batch.
  private stops: Subscribable<StopReason> | undefined = undefined;
  // True while the provider is asked: a stop then ends the run at once (the teardown aborts the request).
  private waiting = false;
  // True once the run's final event went out; a run left by unsubscribing ends without one.
  private ended = false;
  // Whatever is in flight: a model request or a batch.
  private current: Unsubscribable | undefined = undefined;
  // The runSeconds timer.
  private timer: Subscription | undefined = undefined;

  constructor(
    private readonly parts: RunnerParts,
    private readonly plan: RunPlan,
    private readonly subscriber: RunSink,
  ) {
    this.parent = plan.nesting?.parent;
    this.failFast = plan.agent.onToolError === OnToolError.FAIL_RUN;
    this.state = plan.initial;
    this.messages = [{ role: 'user', content: plan.input }];
  }

  /** Starts the run: its teardown first, so a consumer that leaves during the run's synchronous part (a scripted model, bodies that answer at once) ends it there. */
  begin(): void {
    const { subscriber, plan, parts } = this;
    if (parts.activity.observed) {
      parts.activity.next({ type: 'run-started', runId: this.runId, agent: plan.agent.name, tenant: plan.tenant, ...(this.parent ? { parent: this.parent } : {}), at: parts.scheduler.now() });
    }
    const runSeconds = parts.deadline.runSeconds;
    if (runSeconds !== undefined) {
      // Through scheduleAfter: a runSeconds past 24.8 days would otherwise fire at once.
      this.timer = scheduleAfter(parts.scheduler, () => {
        const error = new DeadlineExceededError('runSeconds', runSeconds);
        this.stop({ kind: 'deadline', why: error.message, error: toErrorInfo(error) });
      }, runSeconds * 1000);
    }
    subscriber.add(() => this.teardown());
    const { signal } = plan;
    if (signal !== undefined) {
      if (signal.aborted) this.handleEvent();
      else signal.addEventListener('abort', this, { once: true });
    }
    subscriber.next({ type: 'RUN_STARTED', runId: this.runId, agent: plan.agent.name, tenant: plan.tenant, input: plan.input });
    if (subscriber.closed) return;
    try {
      this.ask(1);
    } catch (error) {
      this.fail(error);
    }
  }

  /** The run's signal aborted: the run is cancelled, with the reason the caller gave, if any. */
  handleEvent(): void {
    this.stop(cancelled(this.plan.signal?.reason));
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

  private teardown(): void {
    // A batch still being subscribed (its calls answering synchronously) hears the run was left
    // through its stop, since its subscription is not yet there to end: it dispatches nothing more.
    if (!this.ended) this.stop({ kind: 'cancelled', why: 'the run was left before it ended (unsubscribed)' });
    this.current?.unsubscribe();
    this.timer?.unsubscribe();
    this.plan.signal?.removeEventListener('abort', this);
    // Watchers of activity$ (a live view, a recorder) still see the run end.
    if (!this.ended) this.runEnded('cancelled');
  }

  private stop(reason: StopReason): void {
    if (this.stopReason !== undefined) return;
    this.stopReason = reason;
    if (this.listeners !== undefined) {
      for (const listener of this.listeners.slice()) {
        // As an RxJS subscriber would: a listener that throws is reported, and the others still hear.
        try {
          listener.observer.next?.(reason);
        } catch (error) {
          reportUnhandled(error);
        }
      }
    }
    if (this.waiting) this.end(ending(reason));
  }

  // Tells watchers of activity$ the run ended; the event is made only if someone watches.
  private runEnded(status: RunStatus): void {
    const { activity, scheduler } = this.parts;
    if (activity.observed) activity.next({ type: 'run-ended', runId: this.runId, status, ...(this.parent ? { parent: this.parent } : {}), at: scheduler.now() });
  }

  private end(event: RunEvent): void {
    const { subscriber } = this;
    if (this.ended || subscriber.closed) return;
    this.ended = true;
    this.waiting = false;
    this.plan.onFinish?.finish({ state: this.state, messages: [...this.messages] });
    const status: RunStatus = event.type === 'RUN_COMPLETED' ? 'completed' : event.type === 'RUN_FAILED' ? 'failed' : 'cancelled';
    this.runEnded(status);
    subscriber.next(event);
    // Whatever was still going (a model request a stop interrupted) ends before the run does.
    this.current?.unsubscribe();
    this.current = undefined;
    subscriber.complete();
  }

  // Anything unforeseen thrown along the way ends the run, never the process.
  private fail(error: unknown): void {
    this.end({ type: 'RUN_FAILED', error: toErrorInfo(error) });
  }

  private finalAnswer(text: string | undefined): RunEvent {
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

  private ask(turn: number): void {
    if (this.subscriber.closed) return;
    const { plan, parts } = this;
    if (turn > plan.maxTurns) return this.end(failed(new RunError(`${plan.agent.name} reached maxTurns (${plan.maxTurns}) without a final answer`)));
    // A run stopped before this turn does not take even a synchronous reply.
    if (this.stopReason !== undefined) return this.end(ending(this.stopReason));
    const request: ModelRequest = { agent: plan.agent.name, model: plan.agent.model, instructions: plan.agent.instructions, messages: [...this.messages], tools: plan.specs };
    // Each request its own controller: a provider that keeps a signal sees only this request's abort.
    const asking = new ModelTurn(this, turn);
    this.waiting = true;
    this.current = asking;
    let produced: Promise<ModelResponse> | Observable<ModelResponse> | unknown;
    try {
      produced = parts.provider.respond(request, asking.signal);
    } catch (error) {
      return asking.error(error);
    }
    // A Promise or an Observable, as the contract says; anything else RxJS can read (an
    // async iterable, say) is taken as it always was, and the rest is the provider's failure.
    let reply$: Observable<unknown> | undefined;
    if (isObservable(produced)) reply$ = produced;
    else if (!isPromiseLike(produced)) {
      try {
        reply$ = from(produced as ObservableInput<unknown>);
      } catch {
        return asking.error(new TypeError(`respond must return a Promise or an Observable of the reply (wrap a ready one in Promise.resolve or of), got ${describeValue(produced)}`));
      }
    }
    if (reply$ !== undefined) asking.listen(reply$);
    else {
      (produced as PromiseLike<unknown>).then(
        (raw) => asking.next(raw),
        (error: unknown) => asking.error(error),
      );
    }
  }

  /** @internal The provider answered `asking` (or failed, or completed without a reply). */
  answered(asking: ModelTurn, outcome: { raw: unknown } | { error: unknown } | undefined): void {
    this.waiting = false;
    if (this.current === asking) this.current = undefined;
    const { turn } = asking;
    try {
      if (outcome === undefined) return this.end(failed(new ProviderError(turn, 'the provider completed without a response')));
      if ('error' in outcome) {
        // The provider's facts (an HTTP status, its code, the attempts made) go with the failure.
        const info = toErrorInfo(outcome.error);
        return this.end(failed(new ProviderError(turn, info.message, info)));
      }
      let decoded: ReturnType<typeof decodeModelResponse>;
      try {
        decoded = decodeModelResponse(outcome.raw);
      } catch (error) {
        // A reply that throws when read (a getter, a proxy) is the provider's failure too.
        return this.end(failed(new ProviderError(turn, toErrorInfo(error).message)));
      }
      if (isLeft(decoded)) return this.end(failed(new ProviderError(turn, `the reply does not decode: ${decoded.left}`)));
      this.respond(turn, decoded.right);
    } catch (error) {
      this.fail(error);
    }
  }

  private respond(turn: number, reply: DecodedResponse): void {
    const { subscriber } = this;
    const { text, toolCalls = [] } = reply.response;
    this.messages.push({ role: 'assistant', content: text ?? '', ...(toolCalls.length > 0 ? { toolCalls } : {}) });
    subscriber.next({ type: 'MODEL_RESPONSE', turn, ...(text !== undefined ? { text } : {}), toolCalls });
    if (subscriber.closed) return;
    if (toolCalls.length === 0) return this.end(this.finalAnswer(text));
    const observer = new BatchTurn(this, turn);
    const batch$ = this.batchOf(turn, toolCalls, reply.malformed, observer.contents);
    // The batch is `current` before it starts: a consumer that leaves on one of its events
    // (take, first) tears the batch down at once, before another call starts.
    const batch = new Subscription();
    this.current = batch;
    batch.add(batch$.subscribe(observer));
  }

  /** @internal One outcome of the batch of turn `turn`, in call order. */
  outcome(turn: number, outcome: Outcome, content: string | undefined): void {
    this.messages.push(toolMessage(outcome, content));
    this.subscriber.next(toOutcomeEvent(turn, outcome));
  }

  /** @internal The batch failed as a whole (never a call's failure: those are outcomes). */
  batchFailed(error: unknown): void {
    this.current = undefined;
    this.fail(error);
  }

  /** @internal The batch is over: its deltas merged, then the run stops, fails or asks again. */
  settled(turn: number, outcomes: readonly Outcome[]): void {
    this.current = undefined;
    try {
      if (this.subscriber.closed) return;
      // The state is replaced only when some call recorded something.
      if (outcomes.some((o) => o.kind === 'result' && o.delta !== undefined)) {
        // The deltas are frozen copies already: freezing the top keeps the whole state read-only.
        this.state = Object.freeze(assignDelta({ ...this.state }, mergeDeltas(outcomes)));
      }
      const stoppedBy = outcomes.find((o) => o.kind !== 'result' && o.stopped !== undefined);
      const reason = this.stopReason ?? (stoppedBy && stoppedBy.kind !== 'result' ? stoppedBy.stopped : undefined);
      if (reason !== undefined) return this.end(ending(reason));
      const failure = this.failFast ? outcomes.find((o) => o.kind === 'error') : undefined;
      if (failure !== undefined && failure.kind === 'error') return this.end({ type: 'RUN_FAILED', error: failure.error });
      this.ask(turn + 1);
    } catch (error) {
      this.fail(error);
    }
  }

  // One turn's calls as a batch. `contents` receives each result's JSON as it settles.
  private batchOf(turn: number, toolCalls: readonly ToolCall[], malformed: ReadonlyMap<number, string>, contents: Array<string | undefined>): Observable<Outcome> {
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
      stop$: this.stopSource(),
      scheduler: parts.scheduler,
      ...(parts.monitor ? { monitor: parts.monitor } : {}),
      onActivity: new TurnActivity(parts.activity, runId, turn, this.parent),
    });
  }

  // The turn's calls as the batch runs them, each decoded against its tool or refused. Apart
  // from batchOf, so that what only this needs (the ids seen, the malformed calls) is not kept
  // alive by the settle step for as long as the batch runs.
  private callsOf(toolCalls: readonly ToolCall[], malformed: ReadonlyMap<number, string>, scope: TurnScope): RunnerCall[] {
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

  // Made apart from batchOf, so that the function it holds for the rest of the run keeps
  // nothing of the first batch alive.
  private stopSource(): Subscribable<StopReason> {
    return (this.stops ??= { subscribe: (observer) => this.listen(observer) });
  }

  /** @internal The stop as a batch sees it: told at once of one that has already happened. */
  listen(observer: Partial<Observer<StopReason>>): Unsubscribable {
    const listener = new StopListener(this, observer);
    if (this.stopReason !== undefined) observer.next?.(this.stopReason);
    // One batch at a time listens: a list made to its length is a fraction of a set's size.
    else if (this.listeners === undefined) this.listeners = [listener];
    else this.listeners.push(listener);
    return listener;
  }

  /** @internal A batch no longer listens. */
  unlisten(listener: StopListener): void {
    const { listeners } = this;
    const at = listeners === undefined ? -1 : listeners.indexOf(listener);
    if (at === -1) return;
    if (listeners!.length === 1) this.listeners = undefined;
    else listeners!.splice(at, 1);
  }
}

/** One batch listening for its run's stop; unsubscribing stops listening. */
class StopListener implements Unsubscribable {
  constructor(
    private readonly loop: RunLoop,
    readonly observer: Partial<Observer<StopReason>>,
  ) {}

  unsubscribe(): void {
    this.loop.unlisten(this);
  }
}

// A call refused before it could run: it keeps what the model sent, and goes through the batch as a failure.
function refused(toolCall: ToolCall, scope: TurnScope, policed: boolean, rejected: ErrorInfo, declaration?: ResolvedDeclaration): RunnerCall {
  const shown = policed ? shownArguments(declaration, toolCall.arguments, true) : undefined;
  return new RunnerCall(toolCall.id, toolCall.name, toolCall.arguments, rejected, declaration, undefined, scope, shown);
}

function ending(reason: StopReason): RunEvent {
  return reason.kind === 'cancelled' ? { type: 'RUN_CANCELLED', reason: reason.why } : { type: 'RUN_FAILED', error: reason.error };
}

// What runAgent resolves with when its call can no longer start a sub-run: cancelled, with
// nothing run. The shape of every nested run's result, so a body reads it as it reads any other.
function neverStarted(why: string): RunResult {
  return { status: 'cancelled', error: { name: 'RunCancelled', message: `never started: ${why}` }, events: [], state: emptyState, messages: [] };
}

function failed(error: Error): RunEvent {
  return { type: 'RUN_FAILED', error: toErrorInfo(error) };
}

/**
 * One request to the provider: the reply's observer, and what the run unsubscribes to abandon
 * it. Its AbortController is its own, never handed to another request: its signal aborts only
 * if its run stops while the request waits, and never after the request answered.
 */
class ModelTurn implements Unsubscribable {
  // Set once the provider answered (or failed): later answers are ignored, and the teardown does not abort.
  private done = false;
  private reply: Subscription | undefined = undefined;
  private readonly controller = new AbortController();

  constructor(
    private readonly loop: RunLoop,
    readonly turn: number,
  ) {}

  /** The signal the provider is handed for this request. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  listen(reply$: Observable<unknown>): void {
    // Closures rather than this record as the observer: under RxJS's deprecated
    // useDeprecatedNextContext, an observer's methods run on a copy of it, not on it.
    const subscription = reply$.subscribe({ next: (raw) => this.next(raw), error: (error: unknown) => this.error(error), complete: () => this.complete() });
    if (this.done) subscription.unsubscribe();
    else this.reply = subscription;
  }

  next(raw: unknown): void {
    this.answer({ raw });
  }

  error(error: unknown): void {
    this.answer({ error });
  }

  complete(): void {
    this.answer(undefined);
  }

  unsubscribe(): void {
    this.reply?.unsubscribe();
    if (!this.done) {
      this.done = true;
      this.controller.abort(new Error('the run stopped'));
    }
  }

  private answer(outcome: { raw: unknown } | { error: unknown } | undefined): void {
    if (this.done) return;
    this.done = true;
    this.reply?.unsubscribe();
    this.loop.answered(this, outcome);
  }
}

/** The run's observer of one batch: outcomes into the transcript, then the turn's end. */
class BatchTurn implements Observer<Outcome> {
  readonly outcomes: Outcome[] = [];
  // Each result's JSON, by call index, as the settle step made it.
  readonly contents: Array<string | undefined> = [];

  constructor(
    private readonly loop: RunLoop,
    private readonly turn: number,
  ) {}

  next(outcome: Outcome): void {
    this.outcomes.push(outcome);
    this.loop.outcome(this.turn, outcome, this.contents[outcome.index]);
  }

  error(error: unknown): void {
    this.loop.batchFailed(error);
  }

  complete(): void {
    this.loop.settled(this.turn, this.outcomes);
  }
}
