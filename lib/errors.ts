// The library's error classes. Each carries its facts as fields, so callers can
// test `instanceof` and read `tool` or `seconds` instead of parsing a message.
// Every module may import this file; it imports nothing.

/** The plain shape an error takes in events and messages: a name and a message. */
export interface ErrorInfo {
  readonly name: string;
  readonly message: string;
}

/** Turns anything thrown (an Error, a string, an object, undefined) into an ErrorInfo. */
export function toErrorInfo(reason: unknown): ErrorInfo {
  if (reason instanceof Error) {
    return { name: reason.name || 'Error', message: reason.message };
  }
  if (typeof reason === 'string') return { name: 'Error', message: reason };
  if (reason !== null && typeof reason === 'object') {
    const { name, message } = reason as { name?: unknown; message?: unknown };
    if (typeof message === 'string') {
      return { name: typeof name === 'string' && name !== '' ? name : 'Error', message };
    }
  }
  return { name: 'Error', message: `a non-Error value was thrown: ${describeThrown(reason)}` };
}

function describeThrown(reason: unknown): string {
  if (reason === undefined) return 'undefined';
  if (typeof reason === 'bigint') return `${reason}n`;
  try {
    return JSON.stringify(reason) ?? String(reason);
  } catch {
    return Object.prototype.toString.call(reason);
  }
}

/** The base of the library's errors: `name` is the class's own, so events and logs name it. */
export abstract class AgentLanesError extends Error {
  constructor(message: string) {
    super(message);
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

/** A call outran its own ceiling, `perToolSeconds[tool]`, counted from dispatch. */
export class ToolTimedOutError extends AgentLanesError {
  readonly tool: string;
  readonly seconds: number;
  readonly idempotent: boolean;
  constructor(tool: string, seconds: number, idempotent = false) {
    super(
      `${tool} timed out after ${seconds}s (its perToolSeconds ceiling)` +
        (idempotent ? '. Safe to call again' : '. The side effect may have landed'),
    );
    this.tool = tool;
    this.seconds = seconds;
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

/** A call's arguments were not JSON, or did not decode with its tool's codec. */
export class ToolArgumentsError extends AgentLanesError {
  readonly tool: string;
  constructor(tool: string, detail: string) {
    super(`bad arguments for ${tool}: ${detail}`);
    this.tool = tool;
  }
}

/**
 * A call that a stopped batch ended: either before it was dispatched, or in flight.
 * `dispatched` says which; the message says why, and whether calling again is safe.
 */
export class CallStoppedError extends AgentLanesError {
  readonly dispatched: boolean;
  constructor(message: string, dispatched: boolean) {
    super(message);
    this.dispatched = dispatched;
  }
}

/** A policy (approval, guardrail) refused a call or its result. */
export type PolicyName = 'approval' | 'input guardrail' | 'output guardrail' | 'onToolStart hook' | 'onToolEnd hook';

export class ToolRejectedError extends AgentLanesError {
  readonly policy: PolicyName;
  constructor(policy: PolicyName, reason: string) {
    super(`${policy} rejected the call: ${reason}`);
    this.policy = policy;
  }
}

/** A model provider failed, or its reply did not decode. */
export class ProviderError extends AgentLanesError {
  readonly turn: number;
  constructor(turn: number, detail: string) {
    super(`model provider failed on turn ${turn}: ${detail}`);
    this.turn = turn;
  }
}

/** The run could not produce its final answer (bad structured output, too many turns). */
export class RunError extends AgentLanesError {}
