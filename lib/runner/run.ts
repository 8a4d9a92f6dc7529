// The run: an Observable of turns. Each turn asks the model, emits its response, runs the
// turn's calls as one batch inside the runner's lanes (their outcomes go back as tool messages
// in call order), merges the calls' deltas, and goes on to the next turn, until the model
// answers without calls or the run stops. `runEvents` is this Observable (run$), and `run()` is
// it folded: one engine path. The run's stop is a composition of what can stop it (the caller's
// signal, runSeconds), replayed to every turn; a failure under FAIL_RUN is the batch's own.
// A turn is in turn/turn.ts, a streamed one in turn/streamedTurn.ts: this file is the run they
// share, and the one place its state changes (turn/turnRun.ts is what a turn sees of it).
import { randomUUID } from 'node:crypto';
import { connectable, merge, Observable, ReplaySubject, take, tap, type Subscriber, type Subscription, type Unsubscribable } from 'rxjs';
import { assignDelta, batchStop, cancelled, failsFast, givenReason, mergeDeltas, type ErrorOutcome, type InvokeContext, type Outcome, type StopReason } from '../batch/index.js';
import { DeadlineExceededError, toErrorInfo } from '../errors.js';
import type { Keep } from '../keep.js';
import type { AgentRef, NestedRunResult, RunState } from '../tools/index.js';
import { OnToolError, type Agent } from './Agent.js';
import { ending, failed, statusOf, toOutcomeEvent, toResponseEvent, type RunEvent, type ToolOutcomeEvent } from './events.js';
import { turnByTurn, type TurnSource } from './turn/turnByTurn.js';
import { RunJournaling } from './journal/journaling.js';
import { addedUsage, type Message, type ModelRequest, type ModelResponse, type RunInput, type ToolCall, type Usage } from './model/model.js';
import { neverStarted, TurnScope, type NestedRuns, type RunnerCall } from './turn/turnCalls.js';
import { toolMessage } from './state.js';
import { resumedTurn } from './turn/resumedTurn.js';
import { interrupted, type TurnWaits, type WaitingRun } from './turn/interrupts.js';
import { turn } from './turn/turn.js';
import { turnBatch } from './turn/turnBatch.js';
import type { TurnRun } from './turn/turnRun.js';
import type { BudgetSpec, OnGrant, Permit } from '../lanes/index.js';
import { keptForResume } from './resume/snapshotStore.js';
import { scheduleAfter } from '../time.js';
import type { AgentTools, OpenTrace, RunnerParts, RunPlan } from './parts.js';
import type { RunParent, RunStatus } from './types.js';

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
  const { history } = plan;
  // A resumed run goes on with the transcript it was left with: it starts no second time (nor in its journal).
  if (plan.resume === undefined) run.journal?.started(plan, plan.initial);
  if (plan.resume === undefined) subscriber.next(
    history.length === 0
      ? { type: 'RUN_STARTED', runId: run.runId, agent: plan.agent.name, tenant: plan.tenant, input: plan.input }
      : { type: 'RUN_STARTED', runId: run.runId, agent: plan.agent.name, tenant: plan.tenant, input: plan.input, history },
  );
  // A top-level run that ends waiting tells it once its one resume can find it (its snapshot kept, its journal written).
  const { snapshots, journal } = run.parts;
  const guarded = plan.nesting === undefined && (snapshots !== undefined || journal !== undefined);
  (guarded ? turnByTurn(run).pipe(keptForResume(snapshots, journal)) : turnByTurn(run)).subscribe(subscriber);
  // After the turns' own teardown, so a run left mid-turn has stopped its batch by then.
  subscriber.add(run);
}

// randomUUID builds its text from cached pieces, a chain of about seventeen string nodes;
// reading one character flattens it into one string: about 0.4 KB less for as long as the
// run lives (and every idempotency key built from it is cheaper to read).
function flat(text: string): string {
  text.charCodeAt(0);
  return text;
}

/** What one run's turns share: its id, its conversation and state, its stop, whether it ended. */
export class Run implements TurnRun, NestedRuns, TurnSource<RunEvent>, Unsubscribable {
  readonly runId: string;
  // Where the run is journaled, if its runner has a journal (a nested run never is: it is part of its caller's call).
  readonly journal: RunJournaling | undefined;
  readonly parent: RunParent | undefined;
  readonly failFast: boolean;
  // The run's state, deeply frozen (JSON-like data copied in), replaced as each batch's deltas
  // are merged: every batch hands this very object to its tools, with no copy.
  private state: RunState;
  // The conversation so far, as the provider will see it next turn.
  private readonly messages: Message[];
  // The tokens of the runs nested in this one that reported usage, their own nested runs included.
  private nestedUsage: Usage | undefined = undefined;
  // The tokens of the run's own turns so far (a snapshot keeps them).
  private usage: Usage | undefined = undefined;
  // The calls of the turn now running that wait for a person, when one may (interrupts.ts).
  private waits: TurnWaits | undefined = undefined;
  // The conversation as the model was last sent it (a turn's request): what that turn's bodies read.
  private asked: readonly Message[] = [];
  // The first stop of the run (cancel, runSeconds); later ones change nothing.
  private stop: StopReason | undefined = undefined;
  // True once the run's final event went out; a run left by unsubscribing ends without one.
  private ended = false;
  // The stop as every turn and batch hears it: replayed to whoever listens after it came.
  // Undefined for a run nothing outside can stop (no signal, no runSeconds).
  readonly stop$: Observable<StopReason> | undefined;
  // The stop's sources (the signal's listener, the runSeconds timer), ended with the run.
  private readonly stopping: Subscription | undefined;
  // The tools the agent may call, as of the registry's last change this run has seen.
  private tools: AgentTools;
  // The tenant's token budget, if the runner declared one, and the current turn's place in it (below).
  private readonly tokenBudget: BudgetSpec | undefined;
  private turnBudget: Permit | undefined = undefined;

  constructor(
    readonly parts: RunnerParts,
    readonly plan: RunPlan,
    /** The run's spans, when the runner traces: its calls' bodies run inside their spans. */
    readonly trace: OpenTrace | undefined,
  ) {
    const { history, resume } = plan;
    this.runId = resume?.runId ?? flat(randomUUID());
    this.parent = plan.nesting?.parent;
    this.journal = parts.journal === undefined || plan.nesting !== undefined ? undefined : new RunJournaling(parts.journal, this.runId);
    this.tools = plan.tools;
    this.tokenBudget = tokenBudgetOf(parts);
    this.failFast = plan.agent.onToolError === OnToolError.FAIL_RUN;
    this.state = plan.initial;
    // The conversation given, then the message this run answers (a resumed run's, as it was left).
    if (resume !== undefined) {
      this.messages = [...resume.messages];
      this.nestedUsage = resume.nestedUsage;
      this.usage = resume.usage;
      this.upcoming = resume.turn;
    } else this.messages = history.length === 0 ? [{ role: 'user', content: plan.input }] : [...history, { role: 'user', content: plan.input }];
    const sources = stopSources(parts, plan);
    // Without a source the run never stops from outside: no composition to make, nothing to race.
    if (sources.length === 0) {
      this.stop$ = undefined;
      this.stopping = undefined;
      return;
    }
    const stops = connectable(merge(...sources).pipe(take(1), tap((reason) => (this.stop ??= reason))), {
      connector: () => new ReplaySubject<StopReason>(1),
      resetOnDisconnect: false,
    });
    this.stop$ = stops;
    this.stopping = stops.connect();
  }

  /** The run's first stop, once it came (cancel, runSeconds). */
  get stopped(): StopReason | undefined {
    return this.stop;
  }

  /** The run's final event, or undefined if it ended already: its state and messages handed over, watchers told. */
  end(event: RunEvent): RunEvent | undefined {
    if (this.ended) return undefined;
    this.ended = true;
    this.upcoming = undefined;
    this.journal?.ended(event);
    this.plan.onFinish?.finish({ state: this.state, messages: [...this.messages], nestedUsage: this.nestedUsage });
    this.activityEnded(event.type === 'RUN_COMPLETED' || event.type === 'RUN_FAILED' || event.type === 'RUN_CANCELLED' || event.type === 'RUN_INTERRUPTED' ? statusOf(event) : 'failed');
    return event;
  }

  // The turn to ask next, once the one before it is over; none once the run ended.
  private upcoming: number | undefined = 1;
  // True once a resumed run's first turn (its batch as it was left) was taken.
  private resumed = false;

  /** The next turn, as `turnByTurn` reads them: undefined once the run has ended. */
  nextTurn(): Observable<RunEvent> | undefined {
    const n = this.upcoming;
    this.upcoming = undefined;
    if (n === undefined || this.ended) return undefined;
    // A resumed run's first turn is its batch, from where it was left: the model is not asked again.
    const { resume } = this.plan;
    return resume !== undefined && n === resume.turn && !this.resumed ? ((this.resumed = true), resumedTurn(this, resume)) : turn(this, n);
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
    const { text, toolCalls = [], usage } = response;
    // The turn's tokens are spent from its tenant's budget (the turn running when it ran out may overspend it).
    if (usage !== undefined) this.turnBudget?.charge?.(tokensOf(usage));
    this.messages.push({ role: 'assistant', content: text ?? '', ...(toolCalls.length > 0 ? { toolCalls } : {}) });
    if (response.usage !== undefined) this.usage = addedUsage(this.usage, response.usage);
    this.journal?.responded(n, response);
    return toResponseEvent(n, response);
  }

  /**
   * A call's outcome, in the conversation (its result's JSON from `contents`) and as its event;
   * none yet from the turn's first waiting call on: kept back until the batch is over (`after`).
   */
  tookOutcome(n: number, outcome: Outcome, contents: ReadonlyArray<string | undefined>): ToolOutcomeEvent | undefined {
    const { waits } = this;
    if (waits !== undefined && outcome.index >= waits.first) {
      waits.later.push(outcome);
      return undefined;
    }
    return this.told(n, outcome, contents[outcome.index]);
  }

  // A call's outcome told: its tool message into the conversation, and its event to emit.
  private told(n: number, outcome: Outcome, content: string | undefined): ToolOutcomeEvent {
    this.messages.push(toolMessage(outcome, content));
    return toOutcomeEvent(n, outcome);
  }

  /**
   * Turn `n`'s batch is over: a call waits for a person and nothing stopped the batch, and the
   * run ends interrupted (RUN_INTERRUPTED, with its snapshot); or its deltas are merged, the
   * outcomes it kept back told, then the run stops or fails (its final event), or goes on to the next
   * turn. The events to emit are returned. `failure` is a broken stream's.
   */
  after(n: number, outcomes: readonly Outcome[], failure?: RunEvent): readonly RunEvent[] {
    const { waits } = this;
    this.waits = undefined;
    if (waits?.waiting === true && failure === undefined && this.stopped === undefined) {
      const own = outcomes.filter((o) => waits.waits[o.index] === undefined);
      if (this.endedBy(own) === undefined) return this.ending(interrupted(this.waiting(), n, outcomes, waits));
    }
    const keptBack: RunEvent[] = [];
    for (const outcome of waits?.later ?? []) keptBack.push(this.told(n, outcome, waits!.contents[outcome.index]));
    const last = this.afterBatch(n, outcomes, failure);
    return last === undefined ? keptBack : [...keptBack, last];
  }

  // What the snapshot of the run, as it waits for a person, keeps of it.
  private waiting(): WaitingRun {
    const { plan } = this;
    return { runId: this.runId, agent: plan.agent, tools: this.parts.tools, tenant: plan.tenant, messages: this.messages, state: this.state, usage: this.usage, nestedUsage: this.nestedUsage };
  }

  // The run's final event, if it has not ended already, as the events to emit.
  private ending(event: RunEvent): readonly RunEvent[] {
    const last = this.end(event);
    return last === undefined ? [] : [last];
  }

  private afterBatch(n: number, outcomes: readonly Outcome[], failure: RunEvent | undefined): RunEvent | undefined {
    // The state is replaced only when some call recorded something.
    if (outcomes.some((o) => o.kind === 'result' && o.delta !== undefined)) {
      // The deltas are frozen copies already: freezing the top keeps the whole state read-only.
      this.state = Object.freeze(assignDelta({ ...this.state }, mergeDeltas(outcomes)));
    }
    // A cancel is a cancel, even of a turn whose stream broke; otherwise the stream's failure is the run's.
    if (failure !== undefined && this.stopped === undefined) return this.end(failure);
    const last = this.stopped !== undefined ? ending(this.stopped) : this.endedBy(outcomes);
    if (last !== undefined) return this.end(last);
    if (!this.ended) this.upcoming = n + 1;
    return undefined;
  }

  // The final event a batch's outcomes end the run with, if any: the batch's stop, or FAIL_RUN by
  // its one rule (a failure of a call's own that stopped nothing left: it was the last to go).
  private endedBy(outcomes: readonly Outcome[]): RunEvent | undefined {
    const reason = batchStop(outcomes);
    if (reason !== undefined) return ending(reason);
    const failedCall = outcomes.find((o): o is ErrorOutcome => failsFast(this.failFast, o));
    return failedCall === undefined ? undefined : { type: 'RUN_FAILED', error: failedCall.error };
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
  nested(agent: AgentRef, input: RunInput, context: InvokeContext, call: RunnerCall): Promise<NestedRunResult> {
    const { callId, tool } = call;
    const { signal } = context;
    if (signal.aborted) {
      const why = givenReason(signal.reason);
      return Promise.resolve(neverStarted(`call ${callId} (${tool}) was stopped${why === undefined ? '' : ` (${why})`}`));
    }
    if (call.over || context.ended) return Promise.resolve(neverStarted(`call ${callId} (${tool}) is over; a body starts nested runs only while its call runs`));
    const nesting = { lent: context.lent, parent: { runId: this.runId, callId } };
    // A call run again on resume goes on with the nested run that waited, once.
    const { resumes } = call;
    call.resumes = undefined;
    const nested = this.parts.nested.runNested(agent as Agent, input, { tenant: this.plan.tenant, signal }, nesting, resumes);
    return nested.then((result) => {
      // A nested run that waits for a person: so does its caller's call, and the caller's run.
      if (result.status === 'interrupted' && !this.ended) this.waits?.nestedWaits(call, result.snapshot);
      const { totalUsage } = result;
      // Counted as it resolves, before the body that asked for it goes on.
      if (totalUsage !== undefined && !this.ended) this.nestedUsage = addedUsage(this.nestedUsage, totalUsage);
      return result;
    });
  }

  /** The turn's place in its tenant's token budget, if the runner declared one: charged the turn's tokens once the model reports them. */
  budgetFor(turn: OnGrant): Permit | undefined {
    const { tokenBudget } = this;
    if (tokenBudget === undefined) return undefined;
    return (this.turnBudget = askTokenBudget(this.parts, tokenBudget, this.plan.tenant, turn));
  }

  /** The next turn's request: the conversation so far and the tools now; the conversation is what the turn's bodies read. */
  request(): ModelRequest {
    const { agent } = this.plan;
    const request: ModelRequest = { agent: agent.name, model: agent.model, instructions: agent.instructions, messages: [...this.messages], tools: this.toolsNow().specs };
    this.asked = request.messages;
    return request;
  }

  /** What a turn's calls share: the run, its tenant, the state and the conversation they read (`asked`: a resumed turn's). One per turn. */
  scope(asked: readonly Message[] = this.asked): TurnScope {
    return new TurnScope(this, this.runId, this.plan.tenant, this.state, asked);
  }

  /** The tools the agent may call as of the turn's request (toolsNow), as its calls are decoded against them. */
  get agentTools(): AgentTools {
    return this.tools;
  }

  /**
   * The tools the agent may call now and what the model is shown of them: the plan's, until the
   * registry changes (an MCP server's list changed), then reread. A turn asks before its request.
   */
  toolsNow(): AgentTools {
    if (this.tools.version !== this.parts.tools.version) this.tools = this.parts.toolsOf(this.plan.agent);
    return this.tools;
  }

  /**
   * One turn's calls as a batch: an array (a turn given whole), or an Observable of calls (a
   * streamed turn, each call given as soon as it is complete). `contents` receives each result's
   * JSON as it settles. `stop$` is the run's stop, or what a streamed turn adds to it.
   */
  batchOf(turn: number, given: readonly RunnerCall[] | Observable<RunnerCall>, contents: Array<string | undefined>, stop$: Observable<StopReason> | undefined = this.stop$): Observable<Outcome> {
    const { outcomes$, waits } = turnBatch(this, turn, given, contents, stop$);
    this.waits = waits;
    return outcomes$;
  }

  // Tells watchers of activity$ a piece of the model's text as it is written; made only if someone watches.
  activityText(turn: number, delta: string): void {
    const { activity, scheduler } = this.parts;
    if (activity.observed) activity.next({ type: 'text-delta', runId: this.runId, turn, delta, ...(this.parent ? { parent: this.parent } : {}), at: scheduler.now() });
  }

  // Tells watchers of activity$ a call of a streamed turn as soon as the model has written it whole.
  activityCall(turn: number, index: number, call: ToolCall): void {
    const { activity, scheduler } = this.parts;
    if (!activity.observed) return;
    const { id: callId, name: tool, arguments: input } = call;
    activity.next({ type: 'tool-call', runId: this.runId, turn, index, callId, tool, input, ...(this.parent ? { parent: this.parent } : {}), at: scheduler.now() });
  }
}

// ---- What can stop a run from outside: the caller's signal and the runner's runSeconds, each an
// Observable of the stop it gives; the run merges them into its one stop. ----

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

/** The sources of a run's stop: its signal, its runSeconds; none for a run nothing outside can stop. */
function stopSources(parts: RunnerParts, plan: RunPlan): Array<Observable<StopReason>> {
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
  return sources;
}

// ---- A turn's place in its tenant's token budget (docs/concurrency.md, budget lanes): before the
// model is asked, the budget must cover the turn's reservation (`turnTokens`), or, without one,
// have something left (a turn's tokens are not known in advance); once the provider reports its
// usage, the turn is charged its tokens in place of the reservation. A turn the budget cannot
// cover is not started: the run ends RUN_FAILED with the BudgetExceededError. ----

/** The runner's token budget per tenant, if it declared one (a budget is the runner's: it spans every agent). */
function tokenBudgetOf(parts: RunnerParts): BudgetSpec | undefined {
  const budget = parts.shared.concurrency.perTenantBudget;
  if (budget?.tokens === undefined || parts.shared.lanes.enterBudget === undefined) return undefined;
  return { measure: 'tokens', limit: budget.tokens, perSeconds: budget.perSeconds };
}

/**
 * Asks `tenant`'s token budget for a turn: the permit, granted at once or later (`turn` is told),
 * or refused (`turn.lost` is told a BudgetExceededError).
 */
function askTokenBudget(parts: RunnerParts, spec: BudgetSpec, tenant: string, turn: OnGrant): Permit {
  const reserved = parts.shared.concurrency.perTenantBudget?.turnTokens ?? 0;
  return parts.shared.lanes.enterBudget!(`budget:tokens:${tenant}`, spec, reserved, turn, tenant);
}

/** A turn's tokens, as its provider reported them. */
function tokensOf(usage: Usage): number {
  return usage.inputTokens + usage.outputTokens;
}

/** @internal One inert object of each class this module makes per run, for keepWarmShapes (lib/shapes.ts). */
export function keepShapes(keep: Keep): void {
  keep(() => new Run({ deadline: {}, shared: { concurrency: {}, lanes: {} } } as never, { agent: {}, history: [], input: '', initial: {} } as never, undefined));
}
