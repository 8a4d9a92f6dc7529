// AgentRunner: the turn loop. Each turn asks the provider for a response, runs its
// tool calls as one batch inside the runner's shared lanes, appends the results as
// tool messages in call order, merges the calls' deltas, and goes round again until
// the model answers without calls. Everything is an Observable: run$ is cold, and
// the transcript it emits does not depend on which call finished first.
import { randomUUID } from 'node:crypto';
import { getEventListeners } from 'node:events';
import { isLeft } from 'fp-ts/lib/Either.js';
import { asyncScheduler, defer, from, isObservable, Observable, Subject, type ObservableInput, type SchedulerLike, type Subscription, type Unsubscribable } from 'rxjs';
import { runBatch, mergeDeltas, assignDelta, isPromiseLike, type ActivitySink, type InvokeContext, type BatchCall, type CallActivity, type Outcome, type StopReason } from '../batch/index.js';
import { ConcurrencyConfig, DeadlineConfig, describeFailures, describeValue, refuseUnknownFields, type ConcurrencyOptions, type DeadlineOptions } from '../config/index.js';
import { ConfigError, DeadlineExceededError, ProviderError, RunError, UnknownToolError, toErrorInfo, type ErrorInfo } from '../errors.js';
import { LaneTable, type LaneStore } from '../lanes/index.js';
import { decodeArguments, LoopMonitor, ToolRegistry, type AgentRef, type NestedRunResult, type ResolvedDeclaration, type RunState, type ToolBody, type ToolContext } from '../tools/index.js';
import { Agent, OnToolError } from './Agent.js';
import { toOutcomeEvent, type RunEvent, type ToolOutcomeEvent } from './events.js';
import { decodeModelResponse, type DecodedResponse, type Message, type ModelProvider, type ModelRequest, type ModelResponse, type ToolCall } from './model.js';
import { policySteps, type Approve, type Guardrails, type Hooks, type PolicyTarget } from './policies.js';

export interface RunnerOptions {
  readonly provider: ModelProvider;
  readonly tools: ToolRegistry;
  /** The runner's lanes: the turn cap every agent starts from, and the shared tool and tenant lanes. A config or its options. */
  readonly concurrency?: ConcurrencyConfig | ConcurrencyOptions;
  /** Run-wide ceilings. A config or its options. */
  readonly deadline?: DeadlineConfig | DeadlineOptions;
  /** Asked, one call at a time in call order, for every call to a tool declared `needsApproval`. */
  readonly approve?: Approve;
  readonly guardrails?: Guardrails;
  readonly hooks?: Hooks;
  /** A tool body holding the event loop longer than this (ms) fails its own call. Default 200; `false` turns the monitor off. */
  readonly loopStallMs?: number | false;
  /** For time: timeouts, deadlines, activity stamps. Default `asyncScheduler` (virtual inside `TestScheduler.run`). */
  readonly scheduler?: SchedulerLike;
  /** The store of shared lanes. Default: an in-memory LaneTable of this runner's own. */
  readonly lanes?: LaneStore;
}

export interface RunOptions {
  /** Whose run this is; its calls stand in this tenant's lane. Default `'default'`. */
  readonly tenant?: string;
  /** Aborting cancels the run: stopped calls are classified, then RUN_CANCELLED. */
  readonly signal?: AbortSignal;
  /** The run's starting state; tools read a snapshot and record deltas. */
  readonly state?: Readonly<Record<string, unknown>>;
  /** Model turns allowed before the run fails. Default 20. */
  readonly maxTurns?: number;
}

export type RunStatus = 'completed' | 'failed' | 'cancelled';

export interface RunResult {
  readonly status: RunStatus;
  readonly output?: unknown;
  readonly error?: ErrorInfo;
  readonly events: readonly RunEvent[];
  readonly state: RunState;
  readonly messages: readonly Message[];
}

/** Where a nested run sits: the run and call that started it. */
export interface RunParent {
  readonly runId: string;
  readonly callId: string;
}

/** Live scheduling events of every run on the runner (not part of any transcript). */
export type RunnerActivity =
  | { readonly type: 'run-started'; readonly runId: string; readonly agent: string; readonly tenant: string; readonly parent?: RunParent; readonly at: number }
  | { readonly type: 'run-ended'; readonly runId: string; readonly status: RunStatus; readonly parent?: RunParent; readonly at: number }
  | (CallActivity & { readonly runId: string; readonly turn: number; readonly parent?: RunParent });

interface Nesting {
  readonly held: ReadonlySet<string>;
  readonly parent: RunParent;
}

const runnerFields = ['provider', 'tools', 'concurrency', 'deadline', 'approve', 'guardrails', 'hooks', 'loopStallMs', 'scheduler', 'lanes'];
const runFields = ['tenant', 'signal', 'state', 'maxTurns'];

function checkFunction(value: unknown, field: string): void {
  if (value !== undefined && typeof value !== 'function') {
    throw new ConfigError(field, `${field} must be a function, got ${describeValue(value)}`);
  }
}

function checkObject(value: unknown, field: string): void {
  if (value !== undefined && (value === null || typeof value !== 'object')) {
    throw new ConfigError(field, `${field} must be an object, got ${describeValue(value)}`);
  }
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

/** The JSON text a result goes back to the model as; throws for what JSON cannot hold. */
function serialise(result: unknown): string {
  if (typeof result === 'string') return result;
  // JSON would silently turn these into nothing; the model should not read "null" for a function.
  if (typeof result === 'function' || typeof result === 'symbol') throw new TypeError(`a ${typeof result} is not JSON`);
  let text: string | undefined;
  try {
    // Without a replacer first: a replacer makes JSON.stringify call back for every value.
    text = JSON.stringify(result);
  } catch {
    // A BigInt anywhere goes as its digits; anything else that throws (a cycle) throws again.
    text = JSON.stringify(result, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value));
  }
  // `undefined` (a body that returned nothing) goes back as null.
  return text ?? 'null';
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}

const emptyState: RunState = Object.freeze({});

// A deeply frozen copy tools can read while other calls of the batch record deltas. The
// state is plain data (checked at the run's start and at every delta), so the copy is whole.
function snapshot(state: Readonly<Record<string, unknown>>): RunState {
  if (Object.keys(state).length === 0) return emptyState;
  return deepFreeze(structuredClone(state));
}

// Why `value` cannot be part of a run's state, or undefined when it can (plain data that
// structuredClone copies: no functions, no class instances with private state, no symbols).
function notPlainData(value: unknown): string | undefined {
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

// What a turn's calls share: their run, their tenant, the state they read, and how a body starts a sub-agent.
interface CallScope {
  readonly runId: string;
  readonly tenant: string;
  readonly view: RunState;
  readonly nested: (agent: AgentRef, input: string, context: InvokeContext, callId: string) => Promise<NestedRunResult>;
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
    private readonly scope: CallScope,
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

/**
 * Runs agents: model turn, then the turn's tool calls as one batch inside the declared lanes,
 * results back to the model in call order, until the model answers.
 *
 * ## Example
 * ```ts
 * const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ maxConcurrentTools: 8 }) });
 * const result = await runner.run(agent, 'Compare these four hotels', { tenant: 'acme' });
 * result.status; // 'completed'
 * ```
 */
export class AgentRunner {
  readonly provider: ModelProvider;
  readonly tools: ToolRegistry;
  readonly concurrency: ConcurrencyConfig;
  readonly deadline: DeadlineConfig;
  /** The loop monitor's limit in ms, or false when it is off. */
  readonly loopStallMs: number | false;
  private readonly monitor: LoopMonitor | undefined;
  /** The shared lanes (per tool, per tenant, identical arguments) of every run on this runner. */
  readonly lanes: LaneStore;
  private readonly approve: Approve | undefined;
  private readonly guardrails: Guardrails | undefined;
  private readonly hooks: Hooks | undefined;
  // True when any policy (approval, a guardrail, a hook) is set: calls are then shown to them.
  private readonly policed: boolean;
  private readonly scheduler: SchedulerLike;
  private readonly activity = new Subject<RunnerActivity>();
  /** Live scheduling events of every run on this runner: runs starting and ending, calls queued (on which lane), started, settled. */
  readonly activity$: Observable<RunnerActivity> = this.activity.asObservable();

  constructor(options: RunnerOptions) {
    if (options === null || typeof options !== 'object') {
      throw new ConfigError('AgentRunner', `AgentRunner options must be an object, got ${describeValue(options)}`);
    }
    refuseUnknownFields(options, runnerFields, 'AgentRunner');
    const { provider, tools, concurrency, deadline, approve, guardrails, hooks, loopStallMs = 200 } = options;
    if (provider === null || typeof provider !== 'object' || typeof provider.respond !== 'function') {
      throw new ConfigError('provider', `provider must have a respond(request, signal) method, got ${describeValue(provider)}`);
    }
    if (!(tools instanceof ToolRegistry)) throw new ConfigError('tools', `tools must be a ToolRegistry, got ${describeValue(tools)}`);
    if (concurrency !== undefined && (concurrency === null || typeof concurrency !== 'object')) {
      throw new ConfigError('concurrency', `concurrency must be a ConcurrencyConfig or its options, got ${describeValue(concurrency)}`);
    }
    if (deadline !== undefined && (deadline === null || typeof deadline !== 'object')) {
      throw new ConfigError('deadline', `deadline must be a DeadlineConfig or its options, got ${describeValue(deadline)}`);
    }
    checkFunction(approve, 'approve');
    checkObject(guardrails, 'guardrails');
    checkObject(hooks, 'hooks');
    checkFunction(guardrails?.input, 'guardrails.input');
    checkFunction(guardrails?.output, 'guardrails.output');
    checkFunction(hooks?.onToolStart, 'hooks.onToolStart');
    checkFunction(hooks?.onToolEnd, 'hooks.onToolEnd');
    if (loopStallMs !== false && (typeof loopStallMs !== 'number' || !(loopStallMs > 0) || !Number.isFinite(loopStallMs))) {
      throw new ConfigError('loopStallMs', `loopStallMs must be a positive number of milliseconds or false, got ${describeValue(loopStallMs)}`);
    }
    this.provider = provider;
    this.tools = tools;
    // Plain options are checked by the config classes themselves, with their messages.
    this.concurrency = concurrency instanceof ConcurrencyConfig ? concurrency : new ConcurrencyConfig(concurrency);
    this.deadline = deadline instanceof DeadlineConfig ? deadline : new DeadlineConfig(deadline);
    this.approve = approve;
    this.guardrails = guardrails;
    this.hooks = hooks;
    this.policed = approve !== undefined || guardrails?.input !== undefined || guardrails?.output !== undefined || hooks?.onToolStart !== undefined || hooks?.onToolEnd !== undefined;
    this.loopStallMs = loopStallMs;
    this.monitor = loopStallMs === false ? undefined : new LoopMonitor(loopStallMs);
    this.scheduler = options.scheduler ?? asyncScheduler;
    this.lanes = options.lanes ?? new LaneTable();
  }

  /**
   * The run as a cold Observable of its transcript: RUN_STARTED, then per turn MODEL_RESPONSE and
   * one TOOL_RESULT / TOOL_ERROR / TOOL_INDETERMINATE per call in call order, then RUN_COMPLETED,
   * RUN_FAILED or RUN_CANCELLED. Unsubscribing stops the run (permits back, bodies aborted).
   * Bad options throw a ConfigError at once.
   */
  run$(agent: Agent, input: string, options: RunOptions = {}): Observable<RunEvent> {
    return this.start(agent, input, options, undefined, undefined);
  }

  // The runner's lanes narrowed by the agent's, made once per agent (a config is immutable).
  private readonly narrowed = new WeakMap<Agent, ConcurrencyConfig>();
  private turnConcurrency(agent: Agent): ConcurrencyConfig {
    let config = this.narrowed.get(agent);
    if (config === undefined) {
      config = this.concurrency.narrowedTo(agent.concurrency);
      this.narrowed.set(agent, config);
    }
    return config;
  }

  /** Runs to the end; resolves for every ending (`result.status` says which), never rejects for a failed run. */
  async run(agent: Agent, input: string, options: RunOptions = {}): Promise<RunResult> {
    return this.collect(agent, input, options, undefined);
  }

  private collect(agent: Agent, input: string, options: RunOptions, nesting: Nesting | undefined): Promise<RunResult> {
    return new Promise<RunResult>((resolve) => {
      const events: RunEvent[] = [];
      let state: RunState = {};
      let messages: readonly Message[] = [];
      const finish = (final: { state: RunState; messages: readonly Message[] }) => {
        state = final.state;
        messages = final.messages;
      };
      this.start(agent, input, options, nesting, finish).subscribe({
        next: (event) => events.push(event),
        complete: () => {
          const last = events[events.length - 1];
          const base = { events, state, messages };
          if (last?.type === 'RUN_COMPLETED') resolve({ status: 'completed', output: last.output, ...base });
          else if (last?.type === 'RUN_CANCELLED') resolve({ status: 'cancelled', error: { name: 'RunCancelled', message: last.reason }, ...base });
          else resolve({ status: 'failed', error: last?.type === 'RUN_FAILED' ? last.error : { name: 'RunError', message: 'the run ended without a final event' }, ...base });
        },
      });
    });
  }

  private start(
    agent: Agent,
    input: string,
    options: RunOptions,
    nesting: Nesting | undefined,
    onFinish: ((final: { state: RunState; messages: readonly Message[] }) => void) | undefined,
  ): Observable<RunEvent> {
    if (!(agent instanceof Agent)) throw new ConfigError('agent', `agent must be an Agent, got ${describeValue(agent)}`);
    if (typeof input !== 'string') throw new ConfigError('input', `input must be a string, got ${describeValue(input)}`);
    if (options === null || typeof options !== 'object') throw new ConfigError('options', `run options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, runFields, 'run options');
    const { tenant = 'default', signal, state = {}, maxTurns = 20 } = options;
    if (typeof tenant !== 'string' || tenant === '') throw new ConfigError('tenant', `tenant must be a non-empty string, got ${describeValue(tenant)}`);
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw new ConfigError('signal', `signal must be an AbortSignal, got ${describeValue(signal)}`);
    if (state === null || typeof state !== 'object' || Array.isArray(state)) throw new ConfigError('state', `state must be an object, got ${describeValue(state)}`);
    const unclonable = Object.keys(state).length === 0 ? undefined : notPlainData(state);
    if (unclonable !== undefined) throw new ConfigError('state', `state must be plain data that structuredClone can copy (${unclonable})`);
    if (!Number.isInteger(maxTurns) || maxTurns < 1) throw new ConfigError('maxTurns', `maxTurns must be a positive integer, got ${describeValue(maxTurns)}`);
    const allowed = agent.tools ?? this.tools.names;
    const missing = allowed.filter((name) => !this.tools.has(name));
    if (missing.length > 0) {
      throw new ConfigError('tools', `agent ${agent.name} lists tools the registry does not have: ${missing.join(', ')}`);
    }
    return defer(() => this.loop({ agent, input, tenant, signal, initial: state, maxTurns, allowed, nesting, onFinish }));
  }

  private loop(run: {
    agent: Agent;
    input: string;
    tenant: string;
    signal: AbortSignal | undefined;
    initial: Readonly<Record<string, unknown>>;
    maxTurns: number;
    allowed: readonly string[];
    nesting: Nesting | undefined;
    onFinish: ((final: { state: RunState; messages: readonly Message[] }) => void) | undefined;
  }): Observable<RunEvent> {
    const { agent, input, tenant, signal, maxTurns, allowed, nesting } = run;
    const runId = randomUUID();
    const parent = nesting?.parent;
    const scheduler = this.scheduler;
    const turnConcurrency = this.turnConcurrency(agent);
    const specs = this.tools.specs(allowed);
    const allowedSet = new Set(allowed);
    const failFast = agent.onToolError === OnToolError.FAIL_RUN;
    // The run's state, replaced (never mutated) as each batch's deltas are merged.
    let state: Record<string, unknown> = assignDelta({}, snapshot(run.initial));
    // The conversation so far, as the provider will see it next turn.
    const messages: Message[] = [{ role: 'user', content: input }];
    // The first stop of the run (cancel, runSeconds); later ones change nothing.
    let stopReason: StopReason | undefined;
    // Who hears of a stop: the batch in flight (through stopped$), and the run while it waits for the provider.
    const listeners = new Set<(reason: StopReason) => void>();
    let onStop: ((reason: StopReason) => void) | undefined;
    const stop = (reason: StopReason): void => {
      if (stopReason !== undefined) return;
      stopReason = reason;
      for (const listener of [...listeners]) listener(reason);
      onStop?.(reason);
    };
    // The stop as a batch sees it: at once if it has already happened.
    const stopped$ = new Observable<StopReason>((subscriber) => {
      if (stopReason !== undefined) {
        subscriber.next(stopReason);
        return undefined;
      }
      const listener = (reason: StopReason): void => subscriber.next(reason);
      listeners.add(listener);
      return () => listeners.delete(listener);
    });
    const activityObserved = (): boolean => this.activity.observed;
    const emitActivity = (activity: RunnerActivity): void => {
      if (this.activity.observed) this.activity.next(activity);
    };

    const ending = (reason: StopReason): RunEvent =>
      reason.kind === 'cancelled' ? { type: 'RUN_CANCELLED', reason: reason.why } : { type: 'RUN_FAILED', error: reason.error };
    const failed = (error: Error): RunEvent => ({ type: 'RUN_FAILED', error: toErrorInfo(error) });

    const finalAnswer = (text: string | undefined): RunEvent => {
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
    };

    // What a turn's calls share: who runs them, and the state they read.
    const scopeOf = (view: RunState): CallScope => ({
      runId,
      tenant,
      view,
      nested: (sub, subInput, context, callId) =>
        this.collect(sub as Agent, subInput, { tenant, signal: context.signal }, { held: context.held, parent: { runId, callId } }),
    });

    // One turn's calls as a batch. `contents` receives each result's JSON as it settles.
    const batchOf = (turn: number, toolCalls: readonly ToolCall[], malformed: ReadonlyMap<number, string>, contents: Array<string | undefined>): Observable<Outcome> => {
      const scope = scopeOf(snapshot(state));
      const seen = new Set<string>();
      let approvals = false;
      const calls = toolCalls.map((toolCall, position): RunnerCall => {
        const { id: callId, name } = toolCall;
        const refuse = (rejected: ErrorInfo, declaration?: ResolvedDeclaration) =>
          new RunnerCall(callId, name, toolCall.arguments, rejected, declaration, undefined, scope);
        const problem = malformed.get(position);
        if (problem !== undefined) {
          return refuse({ name: 'MalformedToolCallError', message: `the model's call #${position + 1} is malformed and was not dispatched: ${problem}` });
        }
        if (seen.has(callId)) {
          return refuse({ name: 'DuplicateCallIdError', message: `call id ${callId} appears twice in one response; this call was not dispatched` });
        }
        seen.add(callId);
        const registered = allowedSet.has(name) ? this.tools.get(name) : undefined;
        if (registered === undefined) return refuse(toErrorInfo(new UnknownToolError(name, allowed)));
        const { declaration, body } = registered;
        const decoded = decodeArguments(declaration, toolCall.arguments);
        if (isLeft(decoded)) return refuse(toErrorInfo(decoded.left), declaration);
        approvals ||= declaration.needsApproval;
        return new RunnerCall(callId, name, decoded.right, undefined, declaration, body, scope);
      });

      // Policies see each call as { runId, callId, tool, args, tenant }: made only when there are policies to see them.
      const policed = this.policed || approvals;
      const targets: PolicyTarget[] = policed
        ? calls.map((call) => ({ call: { runId, callId: call.callId, tool: call.tool, args: call.args, tenant }, needsApproval: call.needsApproval }))
        : [];
      const toEvent = (outcome: Outcome): ToolOutcomeEvent => toOutcomeEvent(turn, outcome);
      const { gate, settle: policySettle } = policed
        ? policySteps({ approve: this.approve, guardrails: this.guardrails, hooks: this.hooks }, targets, toEvent)
        : { gate: undefined, settle: undefined };
      // The JSON each result goes back as, made in the settle step so a result JSON cannot hold fails its own call.
      const settle = (outcome: Outcome): Outcome | Promise<Outcome> => {
        if (outcome.kind === 'result') {
          try {
            contents[outcome.index] = serialise(outcome.result);
          } catch (error) {
            const { index, callId, tool, dispatched } = outcome;
            outcome = {
              kind: 'error',
              index,
              callId,
              tool,
              dispatched,
              error: { name: 'ToolResultError', message: `the result of ${tool} cannot be sent to the model as JSON (${toErrorInfo(error).message})` },
            };
          }
        }
        return policySettle === undefined ? outcome : policySettle(outcome);
      };

      return runBatch(calls, {
        concurrency: turnConcurrency,
        shared: { lanes: this.lanes, concurrency: this.concurrency },
        tenant,
        ...(nesting ? { held: nesting.held } : {}),
        deadline: this.deadline,
        failFast,
        ...(gate ? { gate } : {}),
        settle,
        stop$: stopped$,
        scheduler,
        ...(this.monitor ? { monitor: this.monitor } : {}),
        onActivity: new TurnActivity(this.activity, runId, turn, parent),
      });
    };

    // The run, driven by hand rather than by an operator chain per turn: ask the provider,
    // emit its response, run the batch, merge the deltas, and round again. Each step hands
    // over to the next by a callback; `current` is whatever is in flight (a request or a batch).
    return new Observable<RunEvent>((subscriber) => {
      // True once the run's final event went out; a run left by unsubscribing ends without one.
      let ended = false;
      let current: Unsubscribable | undefined;
      // The signal handed to the provider, shared by the run's requests while none leaves a listener on it.
      let requests: AbortController | undefined;

      const end = (event: RunEvent): void => {
        if (ended || subscriber.closed) return;
        ended = true;
        run.onFinish?.({ state: Object.freeze({ ...state }), messages: [...messages] });
        const status: RunStatus = event.type === 'RUN_COMPLETED' ? 'completed' : event.type === 'RUN_FAILED' ? 'failed' : 'cancelled';
        if (activityObserved()) emitActivity({ type: 'run-ended', runId, status, ...(parent ? { parent } : {}), at: scheduler.now() });
        subscriber.next(event);
        // Whatever was still going (a model request a stop interrupted) ends before the run does.
        current?.unsubscribe();
        current = undefined;
        subscriber.complete();
      };
      // Anything unforeseen thrown along the way ends the run, never the process.
      const guarded = (step: () => void): void => {
        try {
          step();
        } catch (error) {
          end({ type: 'RUN_FAILED', error: toErrorInfo(error) });
        }
      };

      const ask = (turn: number): void => {
        if (subscriber.closed) return;
        if (turn > maxTurns) return end(failed(new RunError(`${agent.name} reached maxTurns (${maxTurns}) without a final answer`)));
        // A run stopped before this turn does not take even a synchronous reply.
        if (stopReason !== undefined) return end(ending(stopReason));
        const request: ModelRequest = { agent: agent.name, model: agent.model, instructions: agent.instructions, messages: [...messages], tools: specs };
        // Making an AbortController costs more than the rest of a turn's bookkeeping, so the run
        // keeps one for its requests, and makes a new one only if the last request left a
        // listener on its signal: a provider that never removes its listeners cannot pile them
        // up over turns (Node warns past ten).
        if (requests === undefined || requests.signal.aborted || getEventListeners(requests.signal, 'abort').length > 0) requests = new AbortController();
        const controller = requests;
        // Set once the provider answered (or failed): later answers are ignored, and the teardown does not abort.
        let answered = false;
        let reply: Subscription | undefined;
        // A stop while the provider is asked ends the run at once (the teardown aborts the request).
        onStop = (reason) => end(ending(reason));
        const answer = (outcome: { raw: unknown } | { error: unknown } | undefined): void => {
          if (answered) return;
          answered = true;
          onStop = undefined;
          reply?.unsubscribe();
          current = undefined;
          guarded(() => {
            if (outcome === undefined) return end(failed(new ProviderError(turn, 'the provider completed without a response')));
            if ('error' in outcome) return end(failed(new ProviderError(turn, toErrorInfo(outcome.error).message)));
            let decoded: ReturnType<typeof decodeModelResponse>;
            try {
              decoded = decodeModelResponse(outcome.raw);
            } catch (error) {
              // A reply that throws when read (a getter, a proxy) is the provider's failure too.
              return end(failed(new ProviderError(turn, toErrorInfo(error).message)));
            }
            if (isLeft(decoded)) return end(failed(new ProviderError(turn, `the reply does not decode: ${decoded.left}`)));
            respond(turn, decoded.right);
          });
        };
        current = {
          unsubscribe: () => {
            reply?.unsubscribe();
            if (!answered) {
              answered = true;
              controller.abort(new Error('the run stopped'));
            }
          },
        };
        let produced: Promise<ModelResponse> | Observable<ModelResponse> | unknown;
        try {
          produced = this.provider.respond(request, controller.signal);
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
        if (reply$ !== undefined) {
          const subscription = reply$.subscribe({
            next: (raw) => answer({ raw }),
            error: (error: unknown) => answer({ error }),
            complete: () => answer(undefined),
          });
          if (answered) subscription.unsubscribe();
          else reply = subscription;
        } else {
          (produced as PromiseLike<unknown>).then(
            (raw) => answer({ raw }),
            (error: unknown) => answer({ error }),
          );
        }
      };

      const respond = (turn: number, reply: DecodedResponse): void => {
        const { text, toolCalls = [] } = reply.response;
        messages.push({ role: 'assistant', content: text ?? '', ...(toolCalls.length > 0 ? { toolCalls } : {}) });
        subscriber.next({ type: 'MODEL_RESPONSE', turn, ...(text !== undefined ? { text } : {}), toolCalls });
        if (subscriber.closed) return;
        if (toolCalls.length === 0) return end(finalAnswer(text));
        const outcomes: Outcome[] = [];
        const contents: Array<string | undefined> = [];
        const batch$ = batchOf(turn, toolCalls, reply.malformed, contents);
        // The batch's subscriber is `current` before the batch starts: a consumer that leaves on
        // one of its events (take, first) tears the batch down at once, before another call starts.
        new Observable<Outcome>((inner) => {
          current = inner;
          return batch$.subscribe(inner);
        }).subscribe({
          next: (outcome) => {
            outcomes.push(outcome);
            messages.push(toolMessage(outcome, contents[outcome.index]));
            subscriber.next(toOutcomeEvent(turn, outcome));
          },
          error: (error: unknown) => {
            current = undefined;
            end({ type: 'RUN_FAILED', error: toErrorInfo(error) });
          },
          complete: () => {
            current = undefined;
            guarded(() => settled(turn, outcomes));
          },
        });
      };

      // The batch is over: its deltas merged, then the run stops, fails or asks again.
      const settled = (turn: number, outcomes: readonly Outcome[]): void => {
        if (subscriber.closed) return;
        state = assignDelta({ ...state }, mergeDeltas(outcomes));
        const stoppedBy = outcomes.find((o) => o.kind !== 'result' && o.stopped !== undefined);
        const reason = stopReason ?? (stoppedBy && stoppedBy.kind !== 'result' ? stoppedBy.stopped : undefined);
        if (reason !== undefined) return end(ending(reason));
        const failure = failFast ? outcomes.find((o) => o.kind === 'error') : undefined;
        if (failure !== undefined && failure.kind === 'error') return end({ type: 'RUN_FAILED', error: failure.error });
        ask(turn + 1);
      };

      if (activityObserved()) emitActivity({ type: 'run-started', runId, agent: agent.name, tenant, ...(parent ? { parent } : {}), at: scheduler.now() });
      const onAbort = () => stop({ kind: 'cancelled', why: 'the run was cancelled' });
      const runSeconds = this.deadline.runSeconds;
      const timer =
        runSeconds === undefined
          ? undefined
          : scheduler.schedule(() => {
              const error = new DeadlineExceededError('runSeconds', runSeconds);
              stop({ kind: 'deadline', why: error.message, error: toErrorInfo(error) });
            }, runSeconds * 1000);
      // Registered before anything runs, not returned at the end: a consumer that leaves during
      // the run's synchronous part (a scripted model, bodies that answer at once) ends it there.
      subscriber.add(() => {
        current?.unsubscribe();
        timer?.unsubscribe();
        signal?.removeEventListener('abort', onAbort);
        // Watchers of activity$ (a live view, a recorder) still see the run end.
        if (!ended && activityObserved()) emitActivity({ type: 'run-ended', runId, status: 'cancelled', ...(parent ? { parent } : {}), at: scheduler.now() });
      });
      if (signal !== undefined) {
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      }
      subscriber.next({ type: 'RUN_STARTED', runId, agent: agent.name, tenant, input });
      if (!subscriber.closed) guarded(() => ask(1));
    });
  }
}
