// AgentRunner: runs agents. Each turn asks the provider for a response, runs its tool
// calls as one batch inside the runner's shared lanes, appends the results as tool
// messages in call order, merges the calls' deltas, and goes round again until the
// model answers without calls (the run itself, an Observable of turns, is in run.ts). Everything is an
// Observable: run$ is cold, and the transcript it emits does not depend on which call
// finished first.
import { asyncScheduler, concatMap, defer, from, merge, Subject, type Observable, type SchedulerLike } from 'rxjs';
import { ConcurrencyConfig, DeadlineConfig, describeValue, refuseNonConfig, refuseUnknownFields, type ConcurrencyOptions, type DeadlineOptions } from '../config/index.js';
import { ConfigError } from '../errors.js';
import { LaneTable, type LaneStore } from '../lanes/index.js';
import { LoopMonitor, ToolRegistry } from '../tools/index.js';
import { Agent } from './Agent.js';
import type { RunEvent } from './events.js';
import type { ModelProvider, RunInput } from './model/model.js';
import { checkedInput } from './model/conversation.js';
import type { Approve, Guardrails, Hooks } from './turn/policies.js';
import { Collector } from './collector.js';
import { resumeOptions, resumePointFor } from './resume/resume.js';
import { resumedCalls, type ResumePoint } from './resume/resumePoint.js';
import type { Approvals, RunSnapshot } from './resume/snapshotFormat.js';
import { runEvents } from './run.js';
import { Tracing } from './trace/tracing.js';
import { emptyState, startingState } from './state.js';
import type { RecoverableRun, RunJournal } from './journal/runJournal.js';
import { checkedJournal, recoverableRuns, recoverRun, type RecoverOptions } from './journal/recover.js';
import { checkedSnapshotStore, takenForResume, type SnapshotStore } from './resume/snapshotStore.js';
import type { AgentTools, Nesting, RunFinish, RunnerParts, RunPlan } from './parts.js';
import type { ResumeOptions, RunnerActivity, RunOptions, RunResult } from './types.js';

export type { CompletedRunResult, EndedRunResult, InterruptedRunResult, ResumeOptions, RunnerActivity, RunOptions, RunParent, RunResult, RunResultFields, RunStatus } from './types.js';

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
  /**
   * An OpenTelemetry tracer (`trace.getTracer(...)`): each run then emits GenAI spans, an
   * `invoke_agent` span per run, a `chat` span per model turn and an `execute_tool` span per call
   * (docs/tracing.md). Without one, nothing is traced and nothing is paid for tracing.
   */
  readonly tracer?: TracerLike;
  /**
   * Where runs are journaled for recovery after a crash (docs/resuming.md): each turn's model
   * answer, each call's dispatch before its body starts, each outcome as it settles, the run's
   * end. `InMemoryRunJournal` for tests, `PostgresRunJournal` for a service.
   */
  readonly journal?: RunJournal;
  /**
   * Where a run that ends waiting for a person leaves its snapshot, so that `resume` runs it once:
   * a second resume of the same snapshot is refused (docs/resuming.md). A journal guards resumes
   * too; a runner with neither resumes a snapshot as often as it is given it.
   */
  readonly snapshots?: SnapshotStore;
}

/**
 * An OpenTelemetry `Tracer` (from `@opentelemetry/api`), as the runner's options name it: written
 * out here so that the library's declarations never import the optional peer (an app without
 * it still compiles them, `skipLibCheck` off). Any real Tracer is one.
 */
export interface TracerLike {
  startSpan(name: string, options?: object, context?: object): object;
}

const runnerFields = ['provider', 'tools', 'concurrency', 'deadline', 'approve', 'guardrails', 'hooks', 'loopStallMs', 'scheduler', 'lanes', 'tracer', 'journal', 'snapshots'];
const runFields = ['tenant', 'signal', 'state', 'maxTurns'];

function checkFunction(value: unknown, field: string): void {
  if (value !== undefined && typeof value !== 'function') {
    throw new ConfigError(field, `${field} must be a function, got ${describeValue(value)}`);
  }
}

// A perTool or perToolSeconds key that names no tool is a typo that would leave the real tool
// unbounded and without its ceiling: refused, naming the key and the tools it could have meant.
function refuseUnknownToolKeys(config: ConcurrencyConfig, known: ReadonlySet<string>, names: readonly string[], whose: string, among: string, hint = ''): void {
  for (const field of ['perTool', 'perToolSeconds', 'perToolRate', 'perToolAdaptive'] as const) {
    for (const key of Object.keys(config[field])) {
      if (known.has(key)) continue;
      const list = names.length === 0 ? '(none)' : names.join(', ');
      throw new ConfigError(`concurrency.${field}.${key}`, `${whose}concurrency.${field} names ${JSON.stringify(key)}, ${among}: ${list}${hint}`);
    }
  }
}

function checkObject(value: unknown, field: string): void {
  if (value !== undefined && (value === null || typeof value !== 'object')) {
    throw new ConfigError(field, `${field} must be an object, got ${describeValue(value)}`);
  }
}

// An agent's tools on one runner, as of a registry's `version`. A tool the registry took out (an
// MCP server stopped listing it) is not missing: calls to it fail alone, saying it was removed.
function toolsAmong(tools: ToolRegistry, allowed: readonly string[]): AgentTools {
  return {
    version: tools.version,
    allowed,
    allowedSet: new Set(allowed),
    specs: Object.freeze(tools.specs(allowed)),
    missing: allowed.filter((name) => !tools.has(name) && tools.removedWhy(name) === undefined),
  };
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
  /** Where runs are journaled, if anywhere. */
  readonly journal: RunJournal | undefined;
  /** Where waiting runs' snapshots are kept for their one resume, if anywhere. */
  readonly snapshots: SnapshotStore | undefined;
  private readonly scheduler: SchedulerLike;
  private readonly activity = new Subject<RunnerActivity>();
  // What each run needs of this runner, made once.
  private readonly parts: RunnerParts;
  /**
   * Live scheduling events of every run on this runner: runs starting and ending, calls queued
   * (on which lane), started, settled; and what its lane store says of itself (a fleet store that
   * lost its Redis).
   */
  readonly activity$: Observable<RunnerActivity>;

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
    refuseNonConfig(concurrency, 'concurrency', 'ConcurrencyConfig');
    refuseNonConfig(deadline, 'deadline', 'DeadlineConfig');
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
    // Checked against the tools registered now: a tool registered later cannot be named here.
    const names = tools.names;
    refuseUnknownToolKeys(this.concurrency, new Set(names), names, '', 'which is not a registered tool; registered tools', ' (register the tools before making the runner)');
    const journal = (this.journal = checkedJournal(options.journal));
    const snapshots = (this.snapshots = checkedSnapshotStore(options.snapshots));
    this.loopStallMs = loopStallMs;
    this.monitor = loopStallMs === false ? undefined : new LoopMonitor(loopStallMs);
    this.scheduler = options.scheduler ?? asyncScheduler;
    // Its budgets and adaptive lanes read the runner's clock (virtual time inside TestScheduler.run).
    const { scheduler } = this;
    this.lanes = options.lanes ?? new LaneTable({ now: () => scheduler.now() });
    // A store's news of itself reaches whoever watches activity$, for as long as they watch: the
    // runner holds no subscription of its own to a store that may outlive it.
    const { notices$, pauses$, limits$ } = this.lanes;
    const news = [notices$, pauses$, limits$].filter((news$) => news$ !== undefined);
    this.activity$ = news.length === 0 ? this.activity.asObservable() : merge(this.activity, ...news);
    this.parts = {
      provider: this.provider,
      tools: this.tools,
      shared: { lanes: this.lanes, concurrency: this.concurrency },
      deadline: this.deadline,
      monitor: this.monitor,
      scheduler: this.scheduler,
      activity: this.activity,
      policies: { approve, guardrails, hooks },
      policed: approve !== undefined || guardrails?.input !== undefined || guardrails?.output !== undefined || hooks?.onToolStart !== undefined || hooks?.onToolEnd !== undefined,
      nested: {
        runNested: (agent, input, runOptions, nesting, resumes) =>
          resumes === undefined ? this.collect(agent, input, runOptions, nesting) : this.collect(agent, '', runOptions, nesting, this.resumed(agent, resumes.snapshot, resumes.approvals, runOptions)),
      },
      toolsOf: (agent) => this.toolsOf(agent),
      journal,
      snapshots,
      tracing: options.tracer === undefined ? undefined : new Tracing(options.tracer as ConstructorParameters<typeof Tracing>[0], this.scheduler, this.activity, this.tools),
    };
  }

  /**
   * The run as a cold Observable of its transcript: RUN_STARTED, then per turn MODEL_RESPONSE and
   * one TOOL_RESULT / TOOL_ERROR / TOOL_INDETERMINATE per call in call order, then RUN_COMPLETED,
   * RUN_FAILED or RUN_CANCELLED. Unsubscribing stops the run (permits back, bodies aborted).
   * `input` is the user's text, or a conversation ending with the user's message (its earlier
   * turns are sent to the model as given). Bad options or input throw a ConfigError at once.
   */
  run$<O>(agent: Agent<O>, input: RunInput, options: RunOptions = {}): Observable<RunEvent<O>> {
    // The engine runs any agent; RUN_COMPLETED carries what the agent's output codec decoded, an O.
    return this.start(agent, input, options, undefined, undefined) as Observable<RunEvent<O>>;
  }

  // The tools an agent may call here and what the provider is shown of them, worked out once for
  // the agents that list none (they may call every tool) and once per agent that lists its own,
  // for as long as the registry does not change (its version; a run rereads them each turn).
  private everyTool: AgentTools | undefined = undefined;
  private readonly agentTools = new WeakMap<Agent, AgentTools>();
  private toolsOf(agent: Agent): AgentTools {
    const { tools } = this;
    if (agent.tools === undefined) {
      if (this.everyTool?.version !== tools.version) this.everyTool = toolsAmong(tools, Object.freeze(tools.names));
      return this.everyTool;
    }
    let known = this.agentTools.get(agent);
    if (known === undefined || known.version !== tools.version) {
      known = toolsAmong(tools, agent.tools);
      this.agentTools.set(agent, known);
    }
    return known;
  }

  // The runner's lanes narrowed by the agent's, made once per agent (a config is immutable).
  // The agent's own keys are checked against the tools it may call here the first time; a
  // key that passed stays good, since an agent's tools only grow with the registry.
  private readonly narrowed = new WeakMap<Agent, ConcurrencyConfig>();
  private turnConcurrency(agent: Agent, allowed: readonly string[], allowedSet: ReadonlySet<string>): ConcurrencyConfig {
    // An agent that narrows nothing runs under the runner's own config.
    if (agent.concurrency === undefined) return this.concurrency;
    let config = this.narrowed.get(agent);
    if (config === undefined) {
      refuseUnknownToolKeys(agent.concurrency, allowedSet, allowed, `agent ${agent.name}'s `, 'which is not a tool the agent may call; its tools');
      config = this.concurrency.narrowedTo(agent.concurrency);
      this.narrowed.set(agent, config);
    }
    return config;
  }

  /**
   * Runs to the end; resolves for every ending (`result.status` says which), never rejects for a
   * failed run. Completed, `result.output` is the answer of the `Agent<O>`, typed `O`;
   * `result.messages` is the whole conversation, to append the user's next message to.
   */
  run<O>(agent: Agent<O>, input: RunInput, options: RunOptions = {}): Promise<RunResult<O>> {
    // Always a Promise, even for a call without its runner (`const { run } = runner`).
    try {
      return this.collect(agent, input, options, undefined) as Promise<RunResult<O>>;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  // run() is run$ folded: the same Observable, its events collected into the RunResult (after
  // the transcript a resumed run goes on from).
  private collect(agent: Agent, input: RunInput, options: RunOptions, nesting: Nesting | undefined, resume?: ResumePoint): Promise<RunResult> {
    return new Promise<RunResult>((resolve, reject) => {
      const collector = new Collector(resolve, reject, resume?.events ?? [], resume?.usage);
      runEvents(this.parts, this.plan(agent, input, options, nesting, collector, resume)).subscribe(collector);
    });
  }

  /**
   * @internal A run going on from `point` (resumePoint.ts): its turn's batch as it was left
   * (calls with an outcome never run again), then its next turns. No RUN_STARTED: it goes on
   * from the transcript it was left with. Snapshots and run journals resume through it.
   */
  runFrom$(agent: Agent, point: ResumePoint, options: RunOptions = {}): Observable<RunEvent> {
    return runEvents(this.parts, this.plan(agent, '', options, undefined, undefined, point));
  }

  /**
   * Goes on with a run that waited for a person (docs/resuming.md), in this process or any other
   * with the same agent and tools: `snapshot` is its `result.snapshot`, `options.approvals` the
   * answers to every call of its `pending`. Approved calls run inside their lanes; a refused one
   * ends as its TOOL_ERROR with the reason given; calls that had settled are never run again;
   * then the run goes on to its next turns (and may wait again). The events are those after the
   * snapshot: the interrupted run's, without RUN_INTERRUPTED, followed by these, are the
   * transcript of the run had it been approved in process. A snapshot taken with another agent,
   * other tools, for another tenant, changed since, or of a newer format is refused with a
   * ConfigError naming the field, as are answers to calls that do not wait.
   */
  resume$<O>(agent: Agent<O>, snapshot: RunSnapshot, options: ResumeOptions): Observable<RunEvent<O>> {
    const { approvals, runOptions } = resumeOptions(options);
    const run$ = this.runFrom$(agent, this.resumed(agent, snapshot, approvals, runOptions), runOptions) as Observable<RunEvent<O>>;
    const { journal, snapshots } = this;
    if (journal === undefined && snapshots === undefined) return run$;
    // Each subscription is a resume: it takes the snapshot first, and the second is refused.
    return defer(() => from(takenForResume(snapshot, journal, snapshots))).pipe(concatMap(() => run$));
  }

  /** resume$ folded: resolves for every ending, as run() does; `usage` counts the run's turns before it waited too. A refused resume rejects. */
  resume<O>(agent: Agent<O>, snapshot: RunSnapshot, options: ResumeOptions): Promise<RunResult<O>> {
    try {
      const { approvals, runOptions } = resumeOptions(options);
      const point = this.resumed(agent, snapshot, approvals, runOptions);
      const { journal, snapshots } = this;
      if (journal === undefined && snapshots === undefined) return this.collect(agent, '', runOptions, undefined, point) as Promise<RunResult<O>>;
      // Checked before the snapshot is taken: a refused resume takes nothing.
      this.checkRun(agent, '', runOptions, point);
      return takenForResume(snapshot, journal, snapshots).then(() => this.collect(agent, '', runOptions, undefined, point) as Promise<RunResult<O>>);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  // A snapshot checked against this runner, the agent and the run's options, as its resume point.
  private resumed(agent: Agent, snapshot: unknown, approvals: Approvals, options: RunOptions): ResumePoint {
    return resumePointFor(agent, this.tools, snapshot, approvals, options);
  }

  /** @internal runFrom$ folded: resolves with the whole transcript, `point.events` first. */
  runFrom(agent: Agent, point: ResumePoint, options: RunOptions = {}): Promise<RunResult> {
    try {
      return this.collect(agent, '', options, undefined, point);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** @internal Checks a run's agent, input and options (and resume point) as starting it would, with a ConfigError; starts nothing. */
  checkRun(agent: Agent, input: RunInput, options: RunOptions, point?: ResumePoint): void {
    this.plan(agent, input, options, undefined, undefined, point);
  }

  /**
   * Takes over run `runId` from the runner's journal, its process having stopped (docs/resuming.md),
   * and carries it on to its end: turns journaled are not asked again, settled calls not run again,
   * calls in flight at the crash classified, calls never dispatched run. Rejects with a
   * JournalError for a run another live process owns, that ended, or that is unknown.
   */
  recover<O>(agent: Agent<O>, runId: string, options: RecoverOptions = {}): Promise<RunResult<O>> {
    return recoverRun(this, agent, runId, options) as Promise<RunResult<O>>;
  }

  /** The runs of the runner's journal whose owner is gone (its lease lapsed) and that have not ended. */
  recoverable(): Promise<readonly RecoverableRun[]> {
    return recoverableRuns(this);
  }

  private start(
    agent: Agent,
    input: RunInput,
    options: RunOptions,
    nesting: Nesting | undefined,
    onFinish: RunFinish | undefined,
  ): Observable<RunEvent> {
    // Cold: each subscription is a run of its own.
    return runEvents(this.parts, this.plan(agent, input, options, nesting, onFinish));
  }

  // A run's options checked (a ConfigError for the first that is wrong), and what it needs worked out.
  private plan(agent: Agent, input: RunInput, options: RunOptions, nesting: Nesting | undefined, onFinish: RunFinish | undefined, resume?: ResumePoint): RunPlan {
    if (!(agent instanceof Agent)) throw new ConfigError('agent', `agent must be an Agent, got ${describeValue(agent)}`);
    // Checked and copied now, once: a caller changing its array afterwards changes no run. A
    // resumed run's conversation is its point's.
    const { text, history } = resume === undefined ? checkedInput(input) : { text: '', history: [] };
    if (options === null || typeof options !== 'object') throw new ConfigError('options', `run options must be an object, got ${describeValue(options)}`);
    refuseUnknownFields(options, runFields, 'run options');
    const { tenant = 'default', signal, state = emptyState, maxTurns = 20 } = options;
    if (typeof tenant !== 'string' || tenant === '') throw new ConfigError('tenant', `tenant must be a non-empty string, got ${describeValue(tenant)}`);
    if (signal !== undefined && !(signal instanceof AbortSignal)) throw new ConfigError('signal', `signal must be an AbortSignal, got ${describeValue(signal)}`);
    if (state === null || typeof state !== 'object' || Array.isArray(state)) throw new ConfigError('state', `state must be an object, got ${describeValue(state)}`);
    // Copied now, once (a resumed run's, its point's): what was checked is what every subscription to the run starts from, deeply frozen.
    const initial = startingState(resume?.state ?? state);
    if (!Number.isInteger(maxTurns) || maxTurns < 1) throw new ConfigError('maxTurns', `maxTurns must be a positive integer, got ${describeValue(maxTurns)}`);
    const agentTools = this.toolsOf(agent);
    const { allowed, allowedSet, missing } = agentTools;
    if (missing.length > 0) {
      throw new ConfigError('tools', `agent ${agent.name} lists tools the registry does not have: ${missing.join(', ')}`);
    }
    if (resume !== undefined) resumedCalls(resume);
    return { agent, input: text, history, tenant, signal, initial, maxTurns, tools: agentTools, turnConcurrency: this.turnConcurrency(agent, allowed, allowedSet), nesting, onFinish, resume };
  }
}
