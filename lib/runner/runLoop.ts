// The turn loop of one run: ask the provider, emit its response, run the turn's calls as one
// batch inside the runner's lanes, append the results as tool messages in call order, merge
// the calls' deltas, and go round again until the model answers without calls. AgentRunner
// checks a run's options and makes one RunLoop per subscription to it.
import { randomUUID } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { isLeft } from 'fp-ts/lib/Either.js';
import { from, isObservable, Observable, type Observer, type ObservableInput, type SchedulerLike, type Subject, type Subscribable, type Subscription, type Unsubscribable } from 'rxjs';
import { openBatch, mergeDeltas, assignDelta, isPromiseLike, reportUnhandled, type ActivitySink, type OpenBatch, type InvokeContext, type BatchCall, type CallActivity, type Outcome, type ResultOutcome, type StopReason } from '../batch/index.js';
import { describeFailures, describeValue, type ConcurrencyConfig, type DeadlineConfig } from '../config/index.js';
import { DeadlineExceededError, JsonFormError, ProviderError, RunError, UnknownToolError, toErrorInfo, type ErrorInfo } from '../errors.js';
import { jsonForm, type JsonValue } from '../json.js';
import type { LaneStore } from '../lanes/index.js';
import { decodeArguments, type AgentRef, type LoopMonitor, type NestedRunResult, type ResolvedDeclaration, type RunState, type ToolBody, type ToolContext, type ToolRegistry, type ToolSpec } from '../tools/index.js';
import { OnToolError, type Agent } from './Agent.js';
import type { RunnerActivity, RunOptions, RunParent, RunResult, RunStatus } from './AgentRunner.js';
import { toOutcomeEvent, type RunEvent, type ToolOutcomeEvent } from './events.js';
import { decodeModelResponse, type DecodedResponse, type Message, type ModelProvider, type ModelRequest, type ModelResponse, type ToolCall } from './model.js';
import { policySteps, type Policies, type PolicyTarget } from './policies.js';

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

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}

/** The state of a run that has none: one frozen object, shared. */
export const emptyState: RunState = Object.freeze({});

// A deeply frozen copy tools can read while other calls of the batch record deltas. The
// state is plain data (checked at the run's start and at every delta), so the copy is whole.
function snapshot(state: Readonly<Record<string, unknown>>): RunState {
  if (Object.keys(state).length === 0) return emptyState;
  return deepFreeze(structuredClone(state));
}

// Why `value` cannot be part of a run's state, or undefined when it can (plain data that
// structuredClone copies: no functions, no class instances with private state, no symbols).
export function notPlainData(value: unknown): string | undefined {
  try {
    structuredClone(value);
    return undefined;
  } catch (error) {
    return toErrorInfo(error).message;
  }
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

  nested(agent: AgentRef, input: string, context: InvokeContext, callId: string): Promise<NestedRunResult> {
    return this.loop.nested(agent, input, context, callId);
  }
}

// One call of a turn as the batch sees it. A class, so `invoke` is one method on the prototype
// rather than a closure per call.
class RunnerCall implements BatchCall {
  readonly parallelSafe: boolean | undefined;
  readonly idempotent: boolean | undefined;
  readonly needsApproval: boolean;
  constructor(
    readonly callId: string,
    readonly tool: string,
    /** The decoded arguments; for a call refused before decoding, what the model sent. */
    readonly args: unknown,
    readonly rejected: ErrorInfo | undefined,
    declaration: ResolvedDeclaration | undefined,
    private readonly body: ToolBody<unknown> | undefined,
    private readonly scope: TurnScope,
  ) {
    this.parallelSafe = declaration?.parallelSafe;
    this.idempotent = declaration?.idempotent;
    this.needsApproval = rejected === undefined && declaration?.needsApproval === true;
  }

  invoke(context: InvokeContext): unknown {
    const { callId, tool, scope } = this;
    // The signal and the held lanes are read only if the body asks: most never do.
    const ctx = new ToolCallContext(
      callId,
      tool,
      scope.tenant,
      scope.runId,
      scope.view,
      context,
      (delta) => {
        const unclonable = notPlainData(delta);
        if (unclonable !== undefined) throw new TypeError(`record(delta) takes plain data that structuredClone can copy (${unclonable})`);
        context.record(delta);
      },
      (sub: AgentRef, subInput: string) => scope.nested(sub, subInput, context, callId),
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
  /** The signals handed to the provider. */
  readonly requests: RequestSignals;
  /** Runs a sub-agent to its end, for a tool body's `runAgent`. */
  readonly collect: (agent: Agent, input: string, options: RunOptions, nesting: Nesting) => Promise<RunResult>;
}

/** Where a nested run sits in its caller: the lanes the caller holds, and the run and call that started it. */
export interface Nesting {
  readonly held: ReadonlySet<string>;
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
  // The run's state, replaced (never mutated) as each batch's deltas are merged.
  private state: Readonly<Record<string, unknown>>;
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
    this.state = Object.keys(plan.initial).length === 0 ? emptyState : assignDelta({}, snapshot(plan.initial));
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
      this.timer = parts.scheduler.schedule(() => {
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

  /** The run's signal aborted: the run is cancelled. */
  handleEvent(): void {
    this.stop({ kind: 'cancelled', why: 'the run was cancelled' });
  }

  /** A tool body's `runAgent`: a sub-agent in this run's tenant, under the calling body's signal and lanes. */
  nested(agent: AgentRef, input: string, context: InvokeContext, callId: string): Promise<NestedRunResult> {
    return this.parts.collect(agent as Agent, input, { tenant: this.plan.tenant, signal: context.signal }, { held: context.held, parent: { runId: this.runId, callId } });
  }

  private teardown(): void {
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
    this.plan.onFinish?.finish({ state: Object.freeze({ ...this.state }), messages: [...this.messages] });
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
    const requests = parts.requests.take();
    const asking = new ModelTurn(this, turn, requests, parts.requests);
    this.waiting = true;
    this.current = asking;
    let produced: Promise<ModelResponse> | Observable<ModelResponse> | unknown;
    try {
      produced = parts.provider.respond(request, requests.signal);
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
    const batch = this.batchOf(turn, toolCalls, reply.malformed, new BatchTurn(this, turn));
    // The batch is `current` before it starts: a consumer that leaves on one of its events
    // (take, first) tears the batch down at once, before another call starts.
    this.current = batch;
    batch.begin();
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
        this.state = assignDelta({ ...this.state }, mergeDeltas(outcomes));
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
  private batchOf(turn: number, toolCalls: readonly ToolCall[], malformed: ReadonlyMap<number, string>, observer: BatchTurn): OpenBatch {
    const { contents } = observer;
    const { parts, plan, runId } = this;
    const { tenant } = plan;
    const calls = this.callsOf(toolCalls, malformed, new TurnScope(this, runId, tenant, snapshot(this.state)));
    // Policies see each call as { runId, callId, tool, args, tenant }: made only when there are policies to see them.
    const policed = parts.policed || calls.some((call) => call.needsApproval);
    const targets: PolicyTarget[] = policed
      ? calls.map((call) => ({ call: { runId, callId: call.callId, tool: call.tool, args: call.args, tenant }, needsApproval: call.needsApproval }))
      : [];
    const { gate, settle: policySettle } = policed
      ? policySteps(parts.policies, targets, (outcome: Outcome): ToolOutcomeEvent => toOutcomeEvent(turn, outcome))
      : { gate: undefined, settle: undefined };
    // Each result goes on in its one JSON form (lib/json.ts), made here in the settle step: the
    // policies, the transcript, the model's message and everything built from them see the same
    // value, and a result that has no JSON form fails its own call.
    const settle = (outcome: Outcome): Outcome | Promise<Outcome> => {
      if (outcome.kind === 'result') outcome = inJsonForm(outcome, contents);
      return policySettle === undefined ? outcome : policySettle(outcome);
    };

    return openBatch(calls, {
      concurrency: plan.turnConcurrency,
      shared: parts.shared,
      tenant,
      ...(plan.nesting ? { held: plan.nesting.held } : {}),
      deadline: parts.deadline,
      failFast: this.failFast,
      ...(gate ? { gate } : {}),
      settle,
      stop$: this.stopSource(),
      scheduler: parts.scheduler,
      ...(parts.monitor ? { monitor: parts.monitor } : {}),
      onActivity: new TurnActivity(parts.activity, runId, turn, this.parent),
    }, observer);
  }

  // The turn's calls as the batch runs them, each decoded against its tool or refused. Apart
  // from batchOf, so that what only this needs (the ids seen, the malformed calls) is not kept
  // alive by the settle step for as long as the batch runs.
  private callsOf(toolCalls: readonly ToolCall[], malformed: ReadonlyMap<number, string>, scope: TurnScope): RunnerCall[] {
    const { allowed, allowedSet } = this.plan;
    const { tools } = this.parts;
    const seen = new Set<string>();
    return toolCalls.map((toolCall, position): RunnerCall => {
      const { id: callId, name } = toolCall;
      const problem = malformed.get(position);
      if (problem !== undefined) {
        return refused(toolCall, scope, { name: 'MalformedToolCallError', message: `the model's call #${position + 1} is malformed and was not dispatched: ${problem}` });
      }
      if (seen.has(callId)) {
        return refused(toolCall, scope, { name: 'DuplicateCallIdError', message: `call id ${callId} appears twice in one response; this call was not dispatched` });
      }
      seen.add(callId);
      const registered = allowedSet.has(name) ? tools.get(name) : undefined;
      if (registered === undefined) return refused(toolCall, scope, toErrorInfo(new UnknownToolError(name, allowed)));
      const { declaration, body } = registered;
      const decoded = decodeArguments(declaration, toolCall.arguments);
      if (isLeft(decoded)) return refused(toolCall, scope, toErrorInfo(decoded.left), declaration);
      return new RunnerCall(callId, name, decoded.right, undefined, declaration, body, scope);
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
function refused(toolCall: ToolCall, scope: TurnScope, rejected: ErrorInfo, declaration?: ResolvedDeclaration): RunnerCall {
  return new RunnerCall(toolCall.id, toolCall.name, toolCall.arguments, rejected, declaration, undefined, scope);
}

function ending(reason: StopReason): RunEvent {
  return reason.kind === 'cancelled' ? { type: 'RUN_CANCELLED', reason: reason.why } : { type: 'RUN_FAILED', error: reason.error };
}

function failed(error: Error): RunEvent {
  return { type: 'RUN_FAILED', error: toErrorInfo(error) };
}

/**
 * The AbortControllers a runner hands its provider, one per request in flight. Making one costs
 * more than the rest of a turn's bookkeeping, and its signal holds about 0.9 KB (Node gives each
 * a hidden class of its own), so a request that has answered gives its controller back, and the
 * next request of any run on the runner takes it, unless it was aborted or a listener was left
 * on its signal: a provider that never removes its listeners cannot pile them up (Node warns
 * past ten). A run waiting in a lane, or on its own tools, holds none.
 */
export class RequestSignals {
  // At most one, kept between requests; more in flight at once each have their own.
  private spare: AbortController | undefined = undefined;

  take(): AbortController {
    const { spare } = this;
    this.spare = undefined;
    // Checked again: a provider may have added a listener after its request answered.
    return spare !== undefined && unused(spare) ? spare : new AbortController();
  }

  giveBack(controller: AbortController): void {
    // One with a listener still on it is let go with its request: kept, it would keep alive
    // whatever that listener holds until the runner's next request.
    if (this.spare === undefined && unused(controller)) this.spare = controller;
  }
}

// Neither aborted nor listened to: fit to hand to another request.
function unused(controller: AbortController): boolean {
  return !controller.signal.aborted && getEventListeners(controller.signal, 'abort').length === 0;
}

/** One request to the provider: the reply's observer, and what the run unsubscribes to abandon it. */
class ModelTurn implements Unsubscribable {
  // Set once the provider answered (or failed): later answers are ignored, and the teardown does not abort.
  private done = false;
  private reply: Subscription | undefined = undefined;

  constructor(
    private readonly loop: RunLoop,
    readonly turn: number,
    private readonly controller: AbortController,
    private readonly signals: RequestSignals,
  ) {}

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
    // Answered: the signal never aborts for this request now, and may serve the next one.
    this.signals.giveBack(this.controller);
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
