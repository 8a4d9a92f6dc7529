// The library's error classes. Each carries its facts as fields, so callers can
// test `instanceof` and read `tool` or `seconds` instead of parsing a message.
// Every module may import this file; it imports only the stop wording (stopClass.ts) and the
// reading of thrown values (errorInfo.ts), which import nothing.
import { inFlightMessage, type StopClass } from './stopClass.js';

import type { ErrorInfo } from './errorInfo.js';

export { toErrorInfo, type ErrorInfo } from './errorInfo.js';

/** The base of the library's errors: `name` is the class's own, so events and logs name it. */
export abstract class AgentLanesError extends Error {
  constructor(message: string, options?: { readonly cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A configuration (concurrency, deadline, registry, agent, runner) is invalid. */
export class ConfigError extends AgentLanesError {
  /** The field at fault, as a dotted path (`perTool.search`). */
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

/** A call outran its own ceiling, `perToolSeconds[tool]`, counted from its body's start. */
export class ToolTimedOutError extends AgentLanesError {
  readonly tool: string;
  readonly seconds: number;
  readonly idempotent: boolean;
  constructor(tool: string, seconds: number, idempotent = false) {
    super(inFlightMessage(`${tool} timed out after ${seconds}s (its perToolSeconds ceiling)`, idempotent));
    this.tool = tool;
    this.seconds = seconds;
    this.idempotent = idempotent;
  }
}

/** An MCP server answered a call with an error result (`isError: true`); the message is its text. */
export class McpToolError extends AgentLanesError {
  readonly tool: string;
  readonly server: string;
  constructor(tool: string, server: string, detail: string) {
    super(`${tool} (MCP server ${server}) failed: ${detail}`);
    this.tool = tool;
    this.server = server;
  }
}

/**
 * The connection to an MCP server was lost while a call was in flight (the server exited, or
 * stopped answering, and a ping found it gone): the call may have run on the server or not.
 */
export class McpConnectionLostError extends AgentLanesError {
  readonly tool: string;
  readonly server: string;
  readonly idempotent: boolean;
  constructor(tool: string, server: string, idempotent: boolean, detail: string) {
    super(inFlightMessage(`the connection to MCP server ${server} was lost while ${tool} was in flight (${detail})`, idempotent));
    this.tool = tool;
    this.server = server;
    this.idempotent = idempotent;
  }
}

/** A call ran past the run-wide `DeadlineConfig.toolCallSeconds`, or the run past `runSeconds`. */
export class DeadlineExceededError extends AgentLanesError {
  /** Which ceiling was passed. */
  readonly deadline: 'toolCallSeconds' | 'runSeconds';
  readonly seconds: number;
  /** The call that ran too long, for `toolCallSeconds`. */
  readonly tool: string | undefined;
  readonly callId: string | undefined;
  constructor(deadline: 'toolCallSeconds' | 'runSeconds', seconds: number, call?: { tool: string; callId: string }) {
    super(
      deadline === 'toolCallSeconds'
        ? `${call?.tool ?? 'a tool'} (call ${call?.callId ?? '?'}) ran longer than DeadlineConfig.toolCallSeconds = ${seconds}s`
        : `the run lasted longer than DeadlineConfig.runSeconds = ${seconds}s`,
    );
    this.deadline = deadline;
    this.seconds = seconds;
    this.tool = call?.tool;
    this.callId = call?.callId;
  }
}

/** A tool body held the event loop longer than the runner's `loopStallMs`. */
export class EventLoopStalledError extends AgentLanesError {
  readonly tool: string;
  readonly stalledMs: number;
  constructor(tool: string, stalledMs: number, limitMs: number) {
    super(
      `${tool} blocked the event loop for ${Math.round(stalledMs)}ms (loopStallMs is ${limitMs}); ` +
        'run a blocking body on a WorkerPool',
    );
    this.tool = tool;
    this.stalledMs = stalledMs;
  }
}

/** A WorkerPool had every thread busy and its queue full, and refused the call. */
export class WorkerPoolFullError extends AgentLanesError {
  readonly threads: number;
  readonly queue: number;
  constructor(threads: number, queue: number) {
    super(
      `the worker pool is full: ${threads} ${threads === 1 ? 'thread' : 'threads'} busy and ${queue} ${queue === 1 ? 'call' : 'calls'} queued; it refuses rather than grows`,
    );
    this.threads = threads;
    this.queue = queue;
  }
}

/** The model asked for a tool the registry (or the agent) does not have. */
export class UnknownToolError extends AgentLanesError {
  readonly tool: string;
  readonly known: readonly string[];
  constructor(tool: string, known: readonly string[]) {
    super(
      `unknown tool "${tool}"; known tools: ${known.length === 0 ? '(none)' : known.join(', ')}`,
    );
    this.tool = tool;
    this.known = known;
  }
}

/** The model called a tool that was taken out of the registry (an MCP server stopped listing it). */
export class ToolRemovedError extends AgentLanesError {
  readonly tool: string;
  readonly why: string;
  constructor(tool: string, why: string) {
    super(`${tool} was removed: ${why}; the call was not sent`);
    this.tool = tool;
    this.why = why;
  }
}

/** A call's arguments were not JSON, or did not decode with its tool's codec. */
export class ToolArgumentsError extends AgentLanesError {
  readonly tool: string;
  constructor(tool: string, detail: string) {
    super(`bad arguments for ${tool}: ${detail}`);
    this.tool = tool;
  }
}

/**
 * A call that was stopped: either before it was dispatched, or in flight. `dispatched` says
 * which, `stopClass` what that means (`never_dispatched`, `safe_to_call_again`, or
 * `indeterminate`: its side effect may have landed); the message says why, in words a model can
 * read. A batch's outcomes carry it as their error; `ToolLanes` rejects a stopped call with one,
 * naming its `tool` and `callId`, with what cut the call off (a `ToolTimedOutError`, a
 * `CallInterruptedError` its body threw) as its `cause` when it was not a stop of the call's own.
 */
export class CallStoppedError extends AgentLanesError {
  readonly dispatched: boolean;
  /** What the stop means for the call: never dispatched, or dispatched and safe to call again or not. */
  readonly stopClass: StopClass;
  /** The tool and the call, where the error names them (ToolLanes' do). */
  readonly tool: string | undefined;
  readonly callId: string | undefined;
  constructor(message: string, dispatched: boolean, call: { readonly tool?: string; readonly callId?: string; readonly stopClass?: StopClass; readonly cause?: unknown } = {}) {
    super(message, call.cause === undefined ? undefined : { cause: call.cause });
    this.dispatched = dispatched;
    // A batch's stop builds it for the two classes an error outcome has; an indeterminate one is named.
    this.stopClass = call.stopClass ?? (dispatched ? 'safe_to_call_again' : 'never_dispatched');
    this.tool = call.tool;
    this.callId = call.callId;
  }
}

/**
 * A call's request went out and was cut off before its answer came: its client's own request
 * timeout, a gateway's timeout (HTTP 504), a stream that broke while the server stayed up. What
 * it did on the other side is unknown. A body that throws one ends its call as a call stopped in
 * flight (alone: the batch goes on): `TOOL_INDETERMINATE` "The side effect may have landed", or
 * for an idempotent tool `TOOL_ERROR` "Safe to call again". The message is the clause the
 * outcome is built around: "<tool> was in flight when <message>."
 */
export class CallInterruptedError extends AgentLanesError {
  /** The protocol's or the transport's code (`-32001`, `ECONNRESET`), when there was one. */
  readonly code: string | number | undefined;
  /** The HTTP status the request ended with (`504`), when there was one. */
  readonly status: number | undefined;
  constructor(message: string, facts: { readonly code?: string | number; readonly status?: number } = {}) {
    super(message);
    this.code = facts.code;
    this.status = facts.status;
  }
}

/**
 * The process running a call stopped (it crashed, or was killed) after the call's dispatch was
 * journaled and before its outcome was: read back by `runner.recover`, the call is classified as
 * a call cut off in flight (safe to call again if idempotent, else its side effect may have landed).
 */
export class ProcessStoppedError extends AgentLanesError {}

/**
 * A run journal could not record what a run asked of it (PostgreSQL unreachable, a statement
 * refused): a call whose dispatch could not be recorded never starts, and fails with this error.
 */
export class JournalError extends AgentLanesError {}

/**
 * A lane store shared by a fleet (RedisLaneStore) lost a call's permit or its place in a lane's
 * queue: the lease ran out before it could be refreshed (a process paused past its lease, Redis
 * unreachable), or the store could not be asked at all. `lane` names the lane; the message is
 * the clause the call's outcome is built around ("its lease on tool:search was lost (...)").
 */
export class LaneLostError extends AgentLanesError {
  readonly lane: string;
  constructor(lane: string, message: string) {
    super(message);
    this.lane = lane;
  }
}

/** A policy (approval, guardrail) refused a call or its result. */
export type PolicyName = 'approval' | 'input guardrail' | 'output guardrail' | 'onToolStart hook' | 'onToolEnd hook';

export class ToolRejectedError extends AgentLanesError {
  readonly policy: PolicyName;
  constructor(policy: PolicyName, reason: string) {
    super(`${rejectedBy(policy)}${reason}`);
    this.policy = policy;
  }
}

// How a ToolRejectedError's message begins, by its policy: the one place these words are written.
function rejectedBy(policy: PolicyName): string {
  return `${policy} rejected the call: `;
}

/**
 * True for the error of a call that was not approved (`approve` said no, a person refused it on
 * resume, or nobody could be asked): a ToolRejectedError of the approval policy, as events and
 * journals carry it (name and message; its words are built above, so this is the one reader).
 */
export function notApproved(error: ErrorInfo): boolean {
  return error.name === 'ToolRejectedError' && error.message.startsWith(rejectedBy('approval'));
}

/**
 * A model provider failed, or its reply did not decode. The facts of the provider's own error
 * (a ProviderHttpError's `status`, `code`, `attempts`, `isRetryable`, `retryAfterSeconds`) are kept as fields, so a failed run's
 * `RUN_FAILED.error` and `RunResult.error` carry them too.
 */
export class ProviderError extends AgentLanesError {
  readonly turn: number;
  readonly status: number | undefined;
  readonly code: string | number | undefined;
  readonly attempts: number | undefined;
  readonly isRetryable: boolean | undefined;
  readonly retryAfterSeconds: number | undefined;
  constructor(
    turn: number,
    detail: string,
    facts: { readonly status?: number; readonly code?: string | number; readonly attempts?: number; readonly isRetryable?: boolean; readonly retryAfterSeconds?: number } = {},
  ) {
    super(`model provider failed on turn ${turn}: ${detail}`);
    this.turn = turn;
    this.status = facts.status;
    this.code = facts.code;
    this.attempts = facts.attempts;
    this.isRetryable = facts.isRetryable;
    this.retryAfterSeconds = facts.retryAfterSeconds;
  }
}

/** A value has no JSON form (see `jsonForm`): where, and why. */
export class JsonFormError extends AgentLanesError {
  /** Where in the value, dotted (`items.0.price`); `''` for the value as a whole. */
  readonly path: string;
  /** Why: `a circular reference`, what a getter threw, `a function is not JSON`. */
  readonly reason: string;
  constructor(path: string, reason: string) {
    // A path hundreds of keys long (a value nested too deep) is shortened in the message only.
    super(path === '' ? reason : `${path.length > 120 ? `${path.slice(0, 58)}...${path.slice(-58)}` : path}: ${reason}`);
    this.path = path;
    this.reason = reason;
  }
}

/**
 * A partner said "slow down": a tool body (or an adapter reading a 429, or an MCP server's rate
 * error) throws this. The call fails with it, and the tool's lane starts nothing new for
 * `retryAfterSeconds` (docs/concurrency.md).
 */
export class RateLimitedError extends AgentLanesError {
  /** How long the partner asked for, in seconds (0 when it gave no figure). */
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds: number) {
    super(message);
    if (!Number.isFinite(retryAfterSeconds) || retryAfterSeconds < 0) {
      throw new ConfigError('retryAfterSeconds', `retryAfterSeconds must be a finite number of seconds, at least 0; got ${String(retryAfterSeconds)}`);
    }
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** What a budget counts: the model's tokens, or the cost tools declare or report. */
export type BudgetMeasure = 'tokens' | 'cost';

/**
 * A tenant's budget cannot cover the next turn or call: how much was asked, how much is left, and
 * when the window frees enough of it (`until`, epoch milliseconds).
 */
export class BudgetExceededError extends AgentLanesError {
  readonly tenant: string;
  readonly measure: BudgetMeasure;
  /** What the turn or call needed (at least 1 when it is not known in advance). */
  readonly needed: number;
  /** What the window has left now. */
  readonly left: number;
  /** When enough of the window is free again, in epoch milliseconds. */
  readonly until: number;
  constructor(tenant: string, measure: BudgetMeasure, needed: number, left: number, until: number) {
    super(`the tenant's budget is spent until ${new Date(until).toISOString()}: ${tenant} needs ${needed} ${measure} and has ${left} left in its window`);
    this.tenant = tenant;
    this.measure = measure;
    this.needed = needed;
    this.left = left;
    this.until = until;
  }
}

/** The run could not produce its final answer (bad structured output, too many turns). */
export class RunError extends AgentLanesError {}

/**
 * A request's answers to a run waiting for a person were refused, and nothing changed: the run
 * they answer waits no more (answered already, or never kept), is another tenant's, or does not
 * wait on the calls they answer. `reason` says which.
 */
export class ApprovalRefusedError extends AgentLanesError {
  readonly reason: 'unknown' | 'answered' | 'tenant' | 'calls';
  constructor(reason: ApprovalRefusedError['reason'], message: string) {
    super(message);
    this.reason = reason;
  }
}
