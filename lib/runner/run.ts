// The run: an Observable of turns. Each turn asks the model, emits its response, runs the
// turn's calls as one batch inside the runner's lanes (their outcomes go back as tool messages
// in call order), merges the calls' deltas, and goes on to the next turn, until the model
// answers without calls or the run stops. `run$()` is this Observable, and `run()` is it
// folded: one engine path. The run's stop is a composition of what can stop it (the caller's
// signal, runSeconds), replayed to every turn; a failure under FAIL_RUN is the batch's own.
// A turn is in turn/turn.ts, a streamed one in turn/streamedTurn.ts: this file is the run they
// share, and the one place its state changes (turn/turnRun.ts is what a turn sees of it).
import { randomUUID } from 'node:crypto';
import { connectable, merge, Observable, ReplaySubject, take, tap, type Subscription, type Unsubscribable } from 'rxjs';
import { assignDelta, batchStop, failsFast, givenReason, mergeDeltas, type ErrorOutcome, type InvokeContext, type Outcome, type StopReason } from '../batch/index.js';
import type { Keep } from '../keep.js';
import type { AgentRef, NestedRunResult, RunState } from '../tools/index.js';
import { OnToolError, type Agent } from './Agent.js';
import { ending, failed, statusOf, toOutcomeEvent, toResponseEvent, type RunEvent, type ToolOutcomeEvent } from './events.js';
import type { TurnSource } from './turn/turnByTurn.js';
import { RunJournaling } from './journal/journaling.js';
import { addedUsage, type Message, type ModelRequest, type ModelResponse, type RunInput, type ToolCall, type Usage } from './model/model.js';
import { neverStarted, TurnScope, type NestedRuns, type RunnerCall } from './turn/turnCalls.js';
import { toolMessage } from './state.js';
import { resumedTurn } from './turn/resumedTurn.js';
import { stopSources } from './turn/runStops.js';
import { interrupted, type TurnWaits, type WaitingRun } from './turn/interrupts.js';
import { turn } from './turn/turn.js';
import { turnBatch } from './turn/turnBatch.js';
import { askTokenBudget, tokenBudgetOf, tokensOf } from './turn/turnBudget.js';
import type { TurnRun } from './turn/turnRun.js';
import type { BudgetSpec, OnGrant, Permit } from '../lanes/index.js';
import type { AgentTools, OpenTrace, RunnerParts, RunPlan } from './parts.js';
import type { RunParent, RunStatus } from './types.js';

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
  // The tenant's token budget, if the runner declared one, and the current turn's place in it (turnBudget.ts).
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
    this.messages.push(toolMessage(outcome, contents[outcome.index]));
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
      if (batchStop(own) === undefined && !own.some((o) => failsFast(this.failFast, o))) return this.ending(interrupted(this.waiting(), n, outcomes, waits));
    }
    const keptBack: RunEvent[] = [];
    for (const outcome of waits?.later ?? []) {
      this.messages.push(toolMessage(outcome, waits!.contents[outcome.index]));
      keptBack.push(toOutcomeEvent(n, outcome));
    }
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
    const reason = this.stopped ?? batchStop(outcomes);
    if (reason !== undefined) return this.end(ending(reason));
    // FAIL_RUN by its one rule: a failure of a call's own that stopped nothing left (it was the last to go).
    const failedCall = outcomes.find((o): o is ErrorOutcome => failsFast(this.failFast, o));
    if (failedCall !== undefined) return this.end({ type: 'RUN_FAILED', error: failedCall.error });
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

/** @internal One inert object of each class this module makes per run, for keepWarmShapes (lib/shapes.ts). */
export function keepShapes(keep: Keep): void {
  keep(() => new Run({ deadline: {}, shared: { concurrency: {}, lanes: {} } } as never, { agent: {}, history: [], input: '', initial: {} } as never, undefined));
}
