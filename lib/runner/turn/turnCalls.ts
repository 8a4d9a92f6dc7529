// The calls of one turn as the runner hands them to its batch: each decoded against its tool
// (or refused, keeping what the model sent), the context its body is handed, and the run's state
// as bodies see it.
import { isLeft, left, right, type Either } from 'fp-ts/lib/Either.js';
import type { BatchCall, GateVerdict, InvokeContext, Outcome } from '../../batch/index.js';
import { ToolRemovedError, toErrorInfo, UnknownToolError, type ErrorInfo, type ToolArgumentsError } from '../../errors.js';
import { emptyState, recordable } from '../state.js';
import type { Keep } from '../../keep.js';
import { decodeArguments, type DecodedArguments, frozenView, ownCopy, type AgentRef, type NestedRunResult, type ResolvedDeclaration, type RunState, type ToolBody, type ToolContext, type ToolLane } from '../../tools/index.js';
import type { Message, RunInput, ToolCall } from '../model/model.js';
import type { PolicyTarget } from './policies.js';
import type { AgentTools, BodyTrace, RunnerParts, RunPlan } from '../parts.js';
import type { NestedResume } from '../resume/snapshotFormat.js';
import type { RunResult } from '../types.js';

// Freezes what Object.freeze can: a typed array with elements cannot be frozen, and is left as it is.
function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value) && !ArrayBuffer.isView(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}

// The arguments as the policies see them: what the model sent, decoded on their own and
// frozen, so a policy can neither change what the body gets nor see what the body did to its
// copy. A call refused before decoding shows what the model sent (a copy, if it was an object).
// A Standard Schema that checks asynchronously shows them once its verdict is in (a Promise).
export function shownArguments(declaration: ResolvedDeclaration | undefined, sent: ToolCall['arguments'], refused: boolean): unknown {
  if (refused || declaration === undefined) {
    try {
      // The copy shares nothing with the reply, so all of it can be frozen.
      return typeof sent === 'string' ? sent : deepFreeze(ownCopy(sent));
    } catch {
      // Arguments that cannot even be copied (their refusal says why) are shown as absent.
      return undefined;
    }
  }
  const decoded = decodeArguments(declaration, sent);
  if (decoded instanceof Promise) return decoded.then((later) => (isLeft(later) ? undefined : frozenView(later.right)));
  return isLeft(decoded) ? undefined : frozenView(decoded.right);
}

/** A call's arguments checked later: the body's own, and the policies' view of them. */
export interface CheckedLater {
  readonly args: unknown;
  readonly shown: unknown;
}

/**
 * The verdict on a call's arguments that a Standard Schema gives asynchronously, with the
 * policies' view of them (if they see the call). The Promise never rejects: a schema that throws
 * or rejects is a ToolArgumentsError already (decodeArguments).
 */
export function checkedLater(decoded: DecodedArguments | Promise<DecodedArguments>, shown: unknown): Promise<Either<ToolArgumentsError, CheckedLater>> {
  return Promise.all([decoded, shown]).then(([verdict, view]) => (isLeft(verdict) ? left(verdict.left) : right({ args: verdict.right, shown: view })));
}

type GateStepOf = (call: BatchCall, index: number) => GateVerdict | Promise<GateVerdict>;

/**
 * The gate of a turn some of whose calls have their arguments checked later: such a call waits
 * there (in call order, holding no permit) for its verdict, and is refused with its
 * ToolArgumentsError (never dispatched) or given its arguments, and shown to the policies of
 * `next` with them. A call checked already goes straight to `next`. `targets` are the policies'
 * view of the calls, by index, when there are policies.
 */
export function afterArguments(next: GateStepOf | undefined, targets: PolicyTarget[] | undefined): GateStepOf {
  return (call, index) => {
    const runnerCall = call as RunnerCall;
    const { later } = runnerCall;
    if (later === undefined) return next === undefined ? undefined : next(call, index);
    return later.then((verdict) => {
      if (isLeft(verdict)) return toErrorInfo(verdict.left);
      const { args, shown } = verdict.right;
      runnerCall.args = args;
      runnerCall.shown = shown;
      const target = targets?.[index];
      if (target !== undefined) targets![index] = { call: { ...target.call, args: shown }, needsApproval: target.needsApproval };
      return next === undefined ? undefined : next(call, index);
    });
  };
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
    readonly messages: readonly Message[],
    invocation: InvokeContext,
    readonly record: (delta: Readonly<Record<string, unknown>>) => void,
    readonly runAgent: (agent: AgentRef, input: RunInput) => Promise<NestedRunResult>,
  ) {
    this.idempotencyKey = `${runId}:${callId}`;
    this.#invocation = invocation;
    Object.defineProperty(this, 'signal', ToolCallContext.#signal);
  }

  // On the prototype, read only if the body asks (a fleet lane's fencing token).
  get fence(): string | undefined {
    return this.#invocation.fence;
  }

  get fences(): Readonly<Record<string, string>> {
    return this.#invocation.fences ?? noFences;
  }

  reportCost(total: number): void {
    this.#invocation.reportCost?.(total);
  }

  progress(progress: number, total?: number, message?: string): void {
    this.#invocation.progress?.(progress, total, message);
  }
}

const noFences: Readonly<Record<string, string>> = Object.freeze({});

// What a turn's calls share: their run (where a body's runAgent goes), their tenant, the state
// they read, and the run's trace, if it is traced. One per turn, handed to each of its calls.
export class TurnScope {
  readonly trace: BodyTrace | undefined;
  constructor(
    readonly run: NestedRuns,
    readonly runId: string,
    readonly tenant: string,
    readonly view: RunState,
    /** The conversation as the model was sent it this turn. */
    readonly messages: readonly Message[] = [],
  ) {
    this.trace = run.trace;
  }
}

/** Where a body's runAgent goes: the run its call belongs to. */
export interface NestedRuns {
  nested(agent: AgentRef, input: RunInput, context: InvokeContext, call: RunnerCall): Promise<NestedRunResult>;
  readonly trace: BodyTrace | undefined;
}

// One call of a turn as the batch sees it. A class, so `invoke` is one method on the prototype
// rather than a closure per call.
export class RunnerCall implements BatchCall {
  readonly parallelSafe: boolean | undefined;
  readonly idempotent: boolean | undefined;
  readonly lane: ToolLane | undefined;
  readonly cost: number | undefined;
  readonly needsApproval: boolean;
  /** Set once the batch has taken the call's outcome (in call order): its body's runAgent then starts nothing. */
  over = false;
  /** Its outcome when known already (a resumed run), or given at the gate (a call held for a person): never dispatched. */
  outcome: Outcome | undefined = undefined;
  /** True when it passed its gate already (a resumed run: asked, approved): it is dispatched without asking again. */
  gated = false;
  /** True when its event went out already (a resumed run): its outcome counts, but is not told again. */
  told = false;
  /** True when its settle steps ran already (a resumed run): its outcome is final. */
  settled = false;
  /** Where its body's nested run goes on from (a resumed run whose nested run waited): taken by its first runAgent. */
  resumes: NestedResume | undefined = undefined;
  constructor(
    readonly callId: string,
    readonly tool: string,
    /**
     * The body's own decoded arguments; for a call refused before decoding, what the model sent;
     * for a call whose arguments are checked later, undefined until the gate has their verdict.
     */
    public args: unknown,
    readonly refused: ErrorInfo | undefined,
    declaration: ResolvedDeclaration | undefined,
    private readonly body: ToolBody<unknown> | undefined,
    private readonly scope: TurnScope,
    /** The arguments as the policies see them (frozen, apart from the body's); undefined when no policy will. */
    public shown: unknown,
    /** The verdict on the arguments, when a Standard Schema gives it asynchronously: the gate waits for it. */
    readonly later: Promise<Either<ToolArgumentsError, CheckedLater>> | undefined = undefined,
  ) {
    this.parallelSafe = declaration?.parallelSafe;
    this.idempotent = declaration?.idempotent;
    this.lane = declaration?.lane;
    this.cost = declaration?.cost;
    this.needsApproval = refused === undefined && declaration?.needsApproval === true;
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
      scope.messages,
      context,
      (delta) => context.record(recordable(delta)),
      (sub: AgentRef, subInput: RunInput) => scope.run.nested(sub, subInput, context, this),
    );
    // The one thing tracing costs a call when it is off: this check.
    const { trace } = scope;
    if (trace === undefined || !trace.carries) return this.body!(this.args, ctx);
    return trace.within(callId, () => this.body!(this.args, ctx));
  }
}

// A call that could not be decoded (malformed, a repeated id, arguments its tool refuses): it
// keeps what the model sent, and goes through the batch as a failure, never started.
export function undecodable(toolCall: ToolCall, scope: TurnScope, policed: boolean, refused: ErrorInfo, declaration?: ResolvedDeclaration): RunnerCall {
  const shown = policed ? shownArguments(declaration, toolCall.arguments, true) : undefined;
  return new RunnerCall(toolCall.id, toolCall.name, toolCall.arguments, refused, declaration, undefined, scope, shown);
}

// What runAgent resolves with when its call can no longer start a sub-run: cancelled, with
// nothing run. The shape of every nested run's result, so a body reads it as it reads any other.
export function neverStarted(why: string): RunResult {
  return { status: 'cancelled', error: { name: 'RunCancelled', message: `never started: ${why}` }, events: [], state: emptyState, messages: [] };
}

/** What decoding a turn's calls reads of its run: the agent's tools as the turn asked with them, the runner's parts, the plan. */
export interface CallsFrom {
  readonly agentTools: AgentTools;
  readonly parts: RunnerParts;
  readonly plan: RunPlan;
}

/**
 * One call of the turn as the batch runs it, decoded against its tool or undecodable. `seen`
 * holds the ids of the turn's calls before it; `problem` says what was wrong with a malformed one.
 */
export function callOf(run: CallsFrom, toolCall: ToolCall, position: number, problem: string | undefined, seen: Set<string>, scope: TurnScope): RunnerCall {
  const { allowed, allowedSet } = run.agentTools;
  const { tools, policed } = run.parts;
  const { id: callId, name } = toolCall;
  if (problem !== undefined) {
    return undecodable(toolCall, scope, policed, { name: 'MalformedToolCallError', message: `the model's call #${position + 1} is malformed and was not dispatched: ${problem}` });
  }
  if (seen.has(callId)) {
    return undecodable(toolCall, scope, policed, { name: 'DuplicateCallIdError', message: `call id ${callId} appears twice in one response; this call was not dispatched` });
  }
  seen.add(callId);
  const registered = allowedSet.has(name) ? tools.get(name) : undefined;
  if (registered === undefined) {
    // A tool taken out since (by the registry's record): said to be removed, not unknown.
    const removed = run.plan.agent.tools === undefined || allowedSet.has(name) ? tools.removedWhy(name) : undefined;
    const error = removed === undefined ? new UnknownToolError(name, allowed) : new ToolRemovedError(name, removed);
    return undecodable(toolCall, scope, policed, toErrorInfo(error));
  }
  const { declaration, body } = registered;
  const decoded = decodeArguments(declaration, toolCall.arguments);
  const now = !(decoded instanceof Promise);
  if (now && isLeft(decoded)) return undecodable(toolCall, scope, policed, toErrorInfo(decoded.left), declaration);
  // Decoded a second time for the policies, only when one will see the call.
  const shown = policed || declaration.needsApproval ? shownArguments(declaration, toolCall.arguments, false) : undefined;
  // A Standard Schema that checks asynchronously: the call waits at the gate for its verdict.
  if (!now || shown instanceof Promise) return new RunnerCall(callId, name, undefined, undefined, declaration, body, scope, undefined, checkedLater(decoded, shown));
  return new RunnerCall(callId, name, decoded.right, undefined, declaration, body, scope, shown);
}

/** The turn's calls as the batch runs them, each decoded against its tool or undecodable. */
export function callsOf(run: CallsFrom, toolCalls: readonly ToolCall[], malformed: ReadonlyMap<number, string>, scope: TurnScope): RunnerCall[] {
  const seen = new Set<string>();
  return toolCalls.map((toolCall, position) => callOf(run, toolCall, position, malformed.get(position), seen, scope));
}

/** @internal A scope per turn, a call and a context per call, inert, for keepWarmShapes (lib/shapes.ts). */
export function keepShapes(keep: Keep): void {
  const inertScope = new TurnScope({ trace: undefined, nested: () => Promise.reject(new Error('inert')) }, '', '', emptyState);
  keep(() => inertScope);
  keep(() => new RunnerCall('', '', undefined, undefined, undefined, undefined, inertScope, undefined));
  keep(() => new ToolCallContext('', '', '', '', emptyState, [], undefined as never, () => undefined, () => Promise.reject(new Error('inert'))));
}
