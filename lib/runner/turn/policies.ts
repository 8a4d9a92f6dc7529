// The runner's policies as the batch's serial steps. Before a call enters its lanes, in call order:
// onToolStart, the input guardrail, then approval (so nobody is asked about a call a
// guardrail refuses). After the reorder, in call order: the output guardrail, then
// onToolEnd (for every call). A policy that throws refuses, with its message; it never
// crashes the run.
import { errorOutcome, isPromiseLike, reportUnhandled, stopOf, type BatchCall, type GateVerdict, type Outcome } from '../../batch/index.js';
import { ToolRejectedError, toErrorInfo, type ErrorInfo, type PolicyName } from '../../errors.js';
import type { ToolOutcomeEvent } from '../events.js';

/** A call as policies see it. */
export interface PolicyCall {
  readonly runId: string;
  readonly callId: string;
  readonly tool: string;
  readonly args: unknown;
  readonly tenant: string;
}

/** A guardrail's verdict: a string refuses, with that reason; anything else lets the call through. */
export type GuardrailVerdict = string | void | undefined | null | boolean;

export interface Guardrails {
  input?(call: PolicyCall): GuardrailVerdict | Promise<GuardrailVerdict>;
  output?(call: PolicyCall, result: unknown): GuardrailVerdict | Promise<GuardrailVerdict>;
}

export interface Hooks {
  onToolStart?(call: PolicyCall): void | Promise<void>;
  onToolEnd?(call: PolicyCall, outcome: ToolOutcomeEvent): void | Promise<void>;
}

/**
 * An approval policy's answer: true runs the call, false refuses it, `'defer'` leaves it to a
 * person: the run ends `interrupted`, the call among its `pending`, to go on with
 * `runner.resume` (docs/resuming.md).
 */
export type ApprovalVerdict = boolean | 'defer';

export type Approve = (call: PolicyCall) => ApprovalVerdict | Promise<ApprovalVerdict>;

export interface Policies {
  readonly approve?: Approve | undefined;
  readonly guardrails?: Guardrails | undefined;
  readonly hooks?: Hooks | undefined;
}

/** What the policies need to know of each call of a turn. */
export interface PolicyTarget {
  readonly call: PolicyCall;
  readonly needsApproval: boolean;
}

type Step<T> = T | Promise<T>;

function isPromise<T>(value: Step<T>): value is Promise<T> {
  return isPromiseLike(value);
}

// Runs `next` on `value`, at once when it is plain, after it resolves when it is a Promise:
// policies that answer synchronously keep the batch synchronous (and marble-testable).
function then<T, R>(value: Step<T>, next: (value: T) => Step<R>): Step<R> {
  return isPromise(value) ? value.then(next) : next(value);
}

// Calls a policy; a throw or a rejection becomes a refusal naming the policy.
function attempt<T>(policy: PolicyName, run: () => Step<T>): Step<T | ErrorInfo> {
  const refuse = (error: unknown): ErrorInfo => {
    const { message } = toErrorInfo(error);
    return toErrorInfo(new ToolRejectedError(policy, message));
  };
  try {
    const value = run();
    return isPromise(value) ? value.then((v) => v, refuse) : value;
  } catch (error) {
    return refuse(error);
  }
}

// The same call, failed: a rejected result keeps nothing of what it returned or recorded.
function rejected(outcome: Outcome, error: ErrorInfo): Outcome {
  return errorOutcome(outcome, outcome.dispatched, error);
}

function isRefusal(value: unknown): value is ErrorInfo {
  return value !== null && typeof value === 'object' && typeof (value as ErrorInfo).name === 'string' && typeof (value as ErrorInfo).message === 'string';
}

function guardrailRefusal(policy: PolicyName, verdict: GuardrailVerdict | ErrorInfo): ErrorInfo | undefined {
  if (isRefusal(verdict)) return verdict;
  if (typeof verdict === 'string') return toErrorInfo(new ToolRejectedError(policy, verdict));
  if (verdict === false) return toErrorInfo(new ToolRejectedError(policy, 'refused'));
  return undefined;
}

/**
 * The gate and settle steps of one turn's batch. onToolStart sees every call that reaches
 * the gate; onToolEnd sees every call of the batch, with its final outcome (bad arguments
 * and stopped calls included), so a log built from it is complete. `targets` is read by call
 * index when each call is gated and settled, so a streamed turn may add to it as calls come;
 * `approvals` then says whether any call may need approval (the gate must exist beforehand).
 */
export function policySteps(
  policies: Policies,
  targets: readonly PolicyTarget[],
  toEvent: (outcome: Outcome) => ToolOutcomeEvent,
  approvals: boolean = targets.some((t) => t.needsApproval),
  // A call left to a person (no approve policy, or one that defers it): it waits, and the gate lets it go on.
  defer: (call: BatchCall, index: number) => GateVerdict = () => toErrorInfo(new ToolRejectedError('approval', 'needs approval and nobody can give it here')),
): {
  gate: ((call: BatchCall, index: number) => Step<GateVerdict>) | undefined;
  settle: (outcome: Outcome) => Step<Outcome>;
} {
  const { approve, guardrails, hooks } = policies;
  const onToolStart = hooks?.onToolStart;
  const input = guardrails?.input;
  const output = guardrails?.output;
  const onToolEnd = hooks?.onToolEnd;
  const anyGate = onToolStart !== undefined || input !== undefined || approvals;

  const gate = (batchCall: BatchCall, index: number): Step<GateVerdict> => {
    const { call, needsApproval } = targets[index]!;
    const started$ =
      onToolStart === undefined
        ? undefined
        : attempt('onToolStart hook', () => onToolStart.call(hooks, call));
    return then(started$, (refusal): Step<GateVerdict> => {
      if (isRefusal(refusal)) return refusal;
      const verdict = input === undefined ? undefined : attempt('input guardrail', () => input.call(guardrails, call));
      return then(verdict, (v): Step<GateVerdict> => {
        const refusal = guardrailRefusal('input guardrail', v);
        if (refusal !== undefined || !needsApproval) return refusal;
        if (approve === undefined) return defer(batchCall, index);
        return then(attempt('approval', () => approve(call)), (approved) =>
          isRefusal(approved) ? approved : approved === true ? undefined : approved === 'defer' ? defer(batchCall, index) : toErrorInfo(new ToolRejectedError('approval', 'not approved')),
        );
      });
    });
  };

  const settle = (outcome: Outcome): Step<Outcome> => {
    const { call } = targets[outcome.index]!;
    const checked =
      outcome.kind === 'result' && output !== undefined
        ? then(attempt('output guardrail', () => output.call(guardrails, call, outcome.result)), (v): Outcome => {
            const refusal = guardrailRefusal('output guardrail', v);
            return refusal === undefined ? outcome : rejected(outcome, refusal);
          })
        : outcome;
    if (onToolEnd === undefined) return checked;
    return then(checked, (final) =>
      then(attempt('onToolEnd hook', () => onToolEnd.call(hooks, call, toEvent(final))), (refusal): Outcome => {
        if (!isRefusal(refusal)) return final;
        // A stopped call's classification (never dispatched, safe to call again, may have landed)
        // and the stop it carries outrank a hook's failure: the hook's error is reported instead.
        if (stopOf(final) !== undefined) {
          reportUnhandled(new ToolRejectedError('onToolEnd hook', refusal.message));
          return final;
        }
        return rejected(final, refusal);
      }),
    );
  };

  return { gate: anyGate ? gate : undefined, settle };
}
