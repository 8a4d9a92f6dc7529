// What a tool body is handed besides its arguments: who is calling, a signal that
// aborts when the call is stopped, a read-only view of the run's state and of the
// conversation, a way to record what it changed, and a way to start a sub-agent
// inside its own lanes.
import type { Message, RunInput } from '../conversation.js';
import type { ErrorInfo } from '../errors.js';

/** The run's state as tools see it: JSON-like data, frozen all the way down, as it was when the batch started. */
export type RunState = Readonly<Record<string, unknown>>;

/** An agent, as far as a tool needs to know one to start it. */
export interface AgentRef {
  readonly name: string;
}

/** Tokens used, as a model provider reported them. */
export interface NestedRunUsage {
  readonly inputTokens: number;
  readonly outputTokens: number;
}

/** What a nested run gives back to the tool that started it. */
export interface NestedRunResult {
  /** `'interrupted'`: the nested run waits for a person, and so do its caller's call and run (docs/resuming.md). */
  readonly status: 'completed' | 'failed' | 'cancelled' | 'interrupted';
  readonly output?: unknown;
  readonly error?: ErrorInfo;
  readonly state: RunState;
  /** The tokens of the nested run's own turns, when its provider reported any. */
  readonly usage?: NestedRunUsage;
  /** The tokens of the nested run and of every run nested in it, when any reported usage. */
  readonly totalUsage?: NestedRunUsage;
}

/** One message of the conversation as a body reads it: the runner's `Message`. */
export type ConversationMessage = Message;

export interface ToolContext {
  /** The call's id, as the model gave it. */
  readonly callId: string;
  /** The tool's name. */
  readonly tool: string;
  /** The tenant the run is for. */
  readonly tenant: string;
  /** The run this call belongs to. */
  readonly runId: string;
  /** Stable for this call of this run (`runId:callId`): pass it downstream to deduplicate a retried side effect. */
  readonly idempotencyKey: string;
  /** Aborts when the call is stopped in flight or outruns its ceiling (or a fleet lane lost its lease). */
  readonly signal: AbortSignal;
  /**
   * The fencing token of the call's grant, on lanes shared by a fleet (RedisLaneStore): a decimal
   * integer that grows with every grant of the lane, from the narrowest fleet lane the call holds
   * (its identical-arguments lane, else its tool lane, else its declaration's own lane, such as an
   * MCP server's, else its tenant lane). Pass it downstream
   * so a resource can refuse a holder whose lease ran out (leases bound load, not mutual
   * exclusion: docs/fleet.md). Undefined on in-process lanes. Read it from the context itself.
   */
  readonly fence?: string;
  /**
   * The fencing token of every fleet lane the call holds, by lane key (`tool:book`,
   * `tenant:acme`, `mcp:files`, `args:book:{...}`): for a tool that writes where more than one of
   * its lanes guards. Empty on in-process lanes. Read it from the context itself.
   */
  readonly fences: Readonly<Record<string, string>>;
  /**
   * Says how far the call has got: a `progress` activity on the runner's `activity$` (never part
   * of the transcript). `progress` and `total` are finite numbers (a TypeError names the one that
   * is not); a report after the call has ended is dropped.
   */
  progress(progress: number, total?: number, message?: string): void;
  /**
   * Reports what this call cost in all, for the tenant's cost budget (`perTenantBudget.cost`): it
   * replaces the tool's declared `cost` (the difference is spent, or given back). A finite number
   * from 0 up (a TypeError otherwise); the last report wins; reports after the call ended are dropped.
   */
  reportCost(total: number): void;
  /** The run's state when the batch started: JSON-like data, frozen all the way down (a write throws). */
  readonly state: RunState;
  /**
   * The conversation the model was sent on the turn that asked for this call (the instructions
   * aside, and without the response that holds the call), as the runner keeps it. Read-only:
   * the same array is handed to every call of the turn.
   */
  readonly messages: readonly ConversationMessage[];
  /**
   * Records what this call changed; merged into the run's state in call order once the batch
   * resolves, if the call succeeds. JSON-like data only (a TypeError names the path of anything
   * else); the delta is copied now, so changing the object afterwards changes nothing.
   */
  record(delta: Readonly<Record<string, unknown>>): void;
  /**
   * Runs a sub-agent under the same runner and tenant. It spends the lanes this call already
   * stands in rather than queueing behind itself, and is stopped if this call is. `input` is the
   * user's text or a conversation ending with the user's message, as for `runner.run`.
   */
  runAgent(agent: AgentRef, input: RunInput): Promise<NestedRunResult>;
}

/**
 * A tool body: returns the result, a Promise of it, or an Observable whose first value is it.
 * `args` is the body's own copy, decoded apart from what the model sent: changing it changes
 * neither the transcript nor what the model is shown next turn.
 */
export type ToolBody<A = unknown> = (args: A, ctx: ToolContext) => unknown;
