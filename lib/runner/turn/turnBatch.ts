// One turn's calls as the batch runs them: the policies' gate and settle steps, the JSON form of
// each result, the calls that wait for a person (interrupts.ts), the runner's lanes, and the
// calls' activity (to the run's trace, and to activity$).
import { tap, type Observable, type Subject } from 'rxjs';
import { errorOutcome, runBatch, type ActivitySink, type BatchCall, type CallActivity, type GateVerdict, type Outcome, type ResultOutcome, type StopReason } from '../../batch/index.js';
import { JsonFormError, toErrorInfo } from '../../errors.js';
import { jsonForm, type JsonValue } from '../../json.js';
import type { Keep } from '../../keep.js';
import { isStandardSchema, type ToolRegistry } from '../../tools/index.js';
import { toOutcomeEvent, type ToolOutcomeEvent } from '../events.js';
import type { RunJournaling } from '../journal/journaling.js';
import type { AgentTools, BodyTrace, RunnerParts, RunPlan } from '../parts.js';
import type { RunnerActivity, RunParent } from '../types.js';
import { TurnWaits } from './interrupts.js';
import { policySteps, type PolicyTarget } from './policies.js';
import { afterArguments, type RunnerCall } from './turnCalls.js';

/** What a turn's batch reads of its run (run.ts): it writes nothing there. */
export interface BatchRun {
  readonly parts: RunnerParts;
  readonly plan: RunPlan;
  readonly runId: string;
  readonly parent: RunParent | undefined;
  readonly journal: RunJournaling | undefined;
  readonly trace: BodyTrace | undefined;
  readonly failFast: boolean;
  /** The tools the agent may call as of the turn's request. */
  readonly agentTools: AgentTools;
}

/** A turn's batch: its outcomes, and its calls that may wait for a person (undefined when none can wait). */
export interface TurnBatch {
  readonly outcomes$: Observable<Outcome>;
  readonly waits: TurnWaits | undefined;
}

type GateStepOf = (call: BatchCall, index: number) => GateVerdict | Promise<GateVerdict>;

/**
 * The gate of a resumed batch: calls that passed it before go straight on, the others are asked
 * by `next` as any call is.
 */
export function pastGated(next: GateStepOf, calls: readonly RunnerCall[]): GateStepOf {
  if (!calls.some((call) => call.gated)) return next;
  return (call, index) => ((call as RunnerCall).gated ? undefined : next(call, index));
}

// Whether some tool of a registry needs approval (a nested run may then wait for a person), by its version.
const approvalTools = new WeakMap<ToolRegistry, { version: number; any: boolean }>();
function someNeedApproval(tools: ToolRegistry): boolean {
  let known = approvalTools.get(tools);
  if (known === undefined || known.version !== tools.version) {
    known = { version: tools.version, any: tools.names.some((name) => tools.get(name)?.declaration.needsApproval === true) };
    approvalTools.set(tools, known);
  }
  return known.any;
}

// Whether some tool an agent may call needs approval, and whether some checks its arguments with a
// Standard Schema (which may answer asynchronously), by the agent's tools as of a registry version:
// a streamed turn's gate must be in place before its calls are known. Worked out again whenever
// the agent's tools change (an MCP server's list changed), so a tool added later is never run unasked.
const approvalsAmong = new WeakMap<AgentTools, boolean>();
const checksLaterAmong = new WeakMap<AgentTools, boolean>();
function mayNeedApproval(current: AgentTools, tools: ToolRegistry): boolean {
  let known = approvalsAmong.get(current);
  if (known === undefined) approvalsAmong.set(current, (known = current.allowed.some((name) => tools.get(name)?.declaration.needsApproval === true)));
  return known;
}
function mayCheckLater(current: AgentTools, tools: ToolRegistry): boolean {
  let known = checksLaterAmong.get(current);
  if (known === undefined) checksLaterAmong.set(current, (known = current.allowed.some((name) => isStandardSchema(tools.get(name)?.declaration.args))));
  return known;
}

/**
 * A result outcome with its result in its JSON form, and the text the model reads for it in
 * `contents` (a string as itself, anything else as its JSON); a result without a JSON form is
 * the call's ToolResultError, naming where and why.
 */
export function inJsonForm(outcome: ResultOutcome, contents: Array<string | undefined>): Outcome {
  const { index, callId, tool, dispatched, result, delta } = outcome;
  let form: JsonValue;
  try {
    form = jsonForm(result);
  } catch (error) {
    // The path from the result (`result.items.0: a circular reference`), shortened if very long.
    const where = error instanceof JsonFormError && error.path !== '' ? `result.${error.message}` : toErrorInfo(error).message;
    return errorOutcome(outcome, dispatched, { name: 'ToolResultError', message: `the result of ${tool} cannot be sent to the model as JSON (${where})` });
  }
  contents[index] = typeof form === 'string' ? form : JSON.stringify(form);
  // A string, a number or a boolean is its own form: the outcome goes on as it is.
  return form === result ? outcome : { kind: 'result', index, callId, tool, dispatched, result: form, delta };
}

// One turn's call activity: to the run's trace as it is, when the run is traced, and as the
// runner's activity$ carries it (with the run and turn) when someone watches.
export class TurnActivity implements ActivitySink {
  constructor(
    private readonly activity: Subject<RunnerActivity>,
    private readonly runId: string,
    private readonly turn: number,
    private readonly parent: RunParent | undefined,
    private readonly trace: BodyTrace | undefined,
  ) {}

  get observed(): boolean {
    return this.trace !== undefined || this.activity.observed;
  }

  outcome(index: number, outcome: Outcome): void {
    this.trace?.outcome(this.turn, index, outcome);
  }

  next(activity: CallActivity): void {
    this.trace?.activity(this.turn, activity);
    if (!this.activity.observed) return;
    const { runId, turn, parent } = this;
    this.activity.next(Object.assign({}, activity, parent === undefined ? { runId, turn } : { runId, turn, parent }));
  }
}

/**
 * Turn `turn`'s batch: `given` whole (an array) or streamed (an Observable of calls, each as soon
 * as it is complete). `contents` receives each result's JSON as it settles. When a call may wait
 * for a person (a tool of the runner needs approval), the batch's `waits` keep the turn's waiting calls.
 */
export function turnBatch(run: BatchRun, turn: number, given: readonly RunnerCall[] | Observable<RunnerCall>, contents: Array<string | undefined>, stop$: Observable<StopReason> | undefined): TurnBatch {
  const { parts, plan, runId, journal } = run;
  const { tenant } = plan;
  const whole = Array.isArray(given);
  // Policies see each call as { runId, callId, tool, args, tenant }: made only when there are policies to see them.
  const approvals = whole ? (given as readonly RunnerCall[]).some((call) => call.needsApproval) : mayNeedApproval(run.agentTools, parts.tools);
  const policed = parts.policed || approvals;
  // A call of this turn may wait for a person (its own approval, or a nested run's): its waits, and the gate that makes calls wait behind it.
  const waits = approvals || someNeedApproval(parts.tools) ? new TurnWaits(whole ? [...(given as readonly RunnerCall[])] : [], contents) : undefined;
  const targetOf = (call: RunnerCall): PolicyTarget => ({ call: { runId, callId: call.callId, tool: call.tool, args: call.shown, tenant }, needsApproval: call.needsApproval });
  const targets: PolicyTarget[] = policed && whole ? (given as readonly RunnerCall[]).map(targetOf) : [];
  // A streamed turn's targets (and calls, for its waits) are added as its calls come, before the batch sees each.
  const calls =
    (policed || waits !== undefined) && !whole
      ? (given as Observable<RunnerCall>).pipe(
          tap((call) => {
            if (policed) targets.push(targetOf(call));
            waits?.calls.push(call);
          }),
        )
      : given;
  const wait = waits === undefined ? undefined : (call: BatchCall, index: number) => waits.wait(call, index, 'approval');
  const { gate: policyGate, settle: policySettle } = policed
    ? policySteps(parts.policies, targets, (outcome: Outcome): ToolOutcomeEvent => toOutcomeEvent(turn, outcome), approvals, wait)
    : { gate: undefined, settle: undefined };
  // Calls whose arguments a Standard Schema checks asynchronously wait for the verdict at the gate.
  const later = whole ? (given as readonly RunnerCall[]).some((call) => call.later !== undefined) : mayCheckLater(run.agentTools, parts.tools);
  const checked = later ? afterArguments(policyGate, policed ? targets : undefined) : policyGate;
  // Calls of a later phase than a waiting one wait too; a resumed batch's calls that passed their gate before go straight on.
  const ordered = waits === undefined ? checked : waits.gate(checked);
  const gate = whole && ordered !== undefined ? pastGated(ordered, given as readonly RunnerCall[]) : ordered;
  // Each result goes on in its one JSON form (lib/json.ts), made here in the settle step: the
  // policies, the transcript, the model's message and everything built from them see the same
  // value, and a result that has no JSON form fails its own call.
  const settle = (outcome: Outcome, call: BatchCall): Outcome | Promise<Outcome> => {
    const runnerCall = call as RunnerCall;
    // From here the call is over as far as its body is concerned: a late runAgent starts nothing.
    runnerCall.over = true;
    // Settled before (a resumed run), or waiting for a person: its outcome stands as it is.
    if (runnerCall.settled || waits?.waits[outcome.index] !== undefined) return outcome;
    if (outcome.kind === 'result') outcome = inJsonForm(outcome, contents);
    return policySettle === undefined ? outcome : policySettle(outcome);
  };
  // Calls whose outcome is not this batch's to journal: settled before (a resumed run's), or waiting for a person.
  const before = whole ? (given as readonly RunnerCall[]) : undefined;
  const known = (index: number): boolean => before?.[index]?.settled === true || waits?.waits[index] !== undefined;
  // One shape for every turn's options (a field it does not use is undefined): no object spread per turn.
  const outcomes$ = runBatch(calls, {
    concurrency: plan.turnConcurrency,
    shared: parts.shared,
    tenant,
    lent: plan.nesting?.lent,
    deadline: parts.deadline,
    failFast: run.failFast,
    gate,
    settle,
    stop$,
    scheduler: parts.scheduler,
    monitor: parts.monitor,
    onActivity: new TurnActivity(parts.activity, runId, turn, run.parent, run.trace),
    writeAhead: journal?.turn(turn, known),
  });
  // Each outcome is journaled as the batch decides it (its settle steps done), before a streamed
  // turn's stream has ended or an earlier call's outcome is told: a crash after it reads it back.
  // Not an outcome settled before (a resumed run's), nor a call's that waits for a person.
  if (journal === undefined) return { outcomes$, waits };
  return {
    outcomes$: outcomes$.pipe(
      tap((outcome) => {
        const { index } = outcome;
        if (!known(index)) journal.settled(turn, outcome, contents[index]);
      }),
    ),
    waits,
  };
}

/** @internal An activity sink per turn, inert, for keepWarmShapes (lib/shapes.ts). */
export function keepShapes(keep: Keep): void {
  keep(() => new TurnActivity(undefined as never, '', 0, undefined, undefined));
}
