// What every `withLanes` shares (agent-lanes/ai-sdk, agent-lanes/openai-agents,
// agent-lanes/langchain): the options and their checks, the one ToolLanes request a wrapped set of
// tools makes, each tool's lane call, the words a model reads for a stopped call, and the lane
// context a body finds by the signal it was handed. Nothing of a framework is imported here.
import { describeValue, refuseUnknownFields, type ConcurrencyConfig } from '../config/index.js';
import { CallStoppedError, ConfigError } from '../errors.js';
import { own } from '../own.js';
import { rateLimitedFrom } from '../rateLimited.js';
import { stopAdvice } from '../stopClass.js';
import { ToolLanes } from './ToolLanes.js';

/** The request the wrapped tools' calls make, and what the framework cannot say about each tool. */
export interface WithLanesOptions<Name extends string = string> {
  /** The tenant the calls run for (its `perTenant` lane, rates and budget). Default `'default'`. */
  readonly tenant?: string;
  /** Aborting it stops every call of the request (give the HTTP request's signal). The framework's own signal (the AI SDK's abortSignal) stops each call too. */
  readonly signal?: AbortSignal;
  /** The request's id (the framework's run id): with a call's id (the AI SDK's toolCallId) it makes the call's idempotency key. Default: a random UUID. */
  readonly requestId?: string;
  /** Narrows this request's own bounds (`maxConcurrentTools`, `perTool` within the request); never widens the shared lanes. */
  readonly concurrency?: ConcurrencyConfig;
  /** true: a call of the tool stopped in flight is safe to call again. Default false. */
  readonly idempotent?: { readonly [K in Name]?: boolean };
  /** false: calls of the tool with identical arguments run one at a time, across every request on the store. Default true. */
  readonly parallelSafe?: { readonly [K in Name]?: boolean };
  /** What one call of the tool costs against the tenant's cost budget (`perTenantBudget.cost`). */
  readonly cost?: { readonly [K in Name]?: number };
}

const optionFields = ['tenant', 'signal', 'requestId', 'concurrency', 'idempotent', 'parallelSafe', 'cost'];
const byToolFields = ['idempotent', 'parallelSafe', 'cost'] as const;

/** One tool's lane call, less what each call brings (its arguments, id and signal). */
export interface ToolFlags {
  readonly tool: string;
  readonly idempotent: boolean | undefined;
  readonly parallelSafe: boolean | undefined;
  readonly cost: number | undefined;
}

/** What a wrapped set of tools runs on: its request, and each tool's flags by name. */
export interface FrameworkRequest {
  readonly request: ToolLanes.Request;
  flagsOf(tool: string): ToolFlags;
}

/**
 * The request `withLanes` makes for `names` (the tools' names), its options checked: a bad field
 * throws a ConfigError naming it. `where` names the caller in messages.
 */
export function frameworkRequest(names: readonly string[], toolLanes: ToolLanes, options: WithLanesOptions, where: string): FrameworkRequest {
  if (!(toolLanes instanceof ToolLanes)) throw new ConfigError('toolLanes', `${where}: toolLanes must be a ToolLanes, got ${describeValue(toolLanes)}`);
  if (options === null || typeof options !== 'object') throw new ConfigError('options', `${where} options must be an object, got ${describeValue(options)}`);
  refuseUnknownFields(options, optionFields, where);
  for (const field of byToolFields) {
    const byTool: unknown = options[field];
    if (byTool === undefined) continue;
    if (byTool === null || typeof byTool !== 'object') throw new ConfigError(field, `${where}: ${field} must be an object keyed by tool name, got ${describeValue(byTool)}`);
    for (const [name, value] of Object.entries(byTool)) {
      if (!names.includes(name)) throw new ConfigError(`${field}.${name}`, `${where}: ${field} names ${name}, which is not one of the tools (${names.join(', ')})`);
      const fits = field === 'cost' ? typeof value === 'number' && Number.isFinite(value) && value >= 0 : typeof value === 'boolean';
      if (!fits) throw new ConfigError(`${field}.${name}`, `${where}: ${field}.${name} must be ${field === 'cost' ? 'a finite number from 0 up' : 'true or false'}, got ${describeValue(value)}`);
    }
  }
  const { tenant, signal, requestId, concurrency, idempotent = {}, parallelSafe = {}, cost = {} } = options;
  // ToolLanes.request checks these and the signal, naming the field (an undefined one takes its default).
  const request = toolLanes.request({ tenant, signal, requestId, concurrency });
  return {
    request,
    flagsOf: (tool) => ({ tool, idempotent: own(idempotent, tool), parallelSafe: own(parallelSafe, tool), cost: own(cost, tool) }),
  };
}

/** `tools` as an array (else a ConfigError naming `tools`, saying it must be an array of `kind`). */
export function toolArray(tools: unknown, kind: string): readonly unknown[] {
  if (!Array.isArray(tools)) throw new ConfigError('tools', `withLanes: tools must be an array of ${kind}, got ${describeValue(tools)}`);
  return tools;
}

/** Refuses the tool at `index`: a ConfigError naming `tools[index]`, saying what it must be and what it is. */
export function refuseTool(index: number, expected: string, tool: unknown): never {
  throw new ConfigError(`tools[${index}]`, `withLanes: tools[${index}] must be ${expected}, got ${describeValue(tool)}`);
}

/**
 * The lane call of one call of a tool: its flags, and the arguments, id and signal the framework
 * gave it. One shape for every call (a field the framework did not give is undefined, which a
 * call reads as not given), built without spreading: this is made on every call.
 */
export function laneCall(flags: ToolFlags, args: unknown, callId: unknown, signal: AbortSignal | undefined): ToolLanes.Call {
  return {
    tool: flags.tool,
    args,
    callId: typeof callId === 'string' && callId !== '' ? callId : undefined,
    signal,
    idempotent: flags.idempotent,
    parallelSafe: flags.parallelSafe,
    cost: flags.cost,
  };
}

// Each call's context, by the signal its body was handed, for laneContextOf: a property of that
// signal (the call's own, made by the lanes), under a symbol of this module, not enumerable. The
// context lives as long as its signal, as a WeakMap's entry would; but a WeakMap's entry, whose
// value (the context) holds its key (the signal), is kept through every minor collection, and
// with it the call's whole batch: about 6 µs a call of collecting (docs/frameworks.md).
const laneContext: unique symbol = Symbol('agent-lanes call context');

interface KnownSignal extends AbortSignal {
  readonly [laneContext]?: ToolLanes.Context;
}

/** Makes `context` findable by its signal (the one a wrapped body is handed), and returns that signal. */
export function knownSignal(context: ToolLanes.Context): AbortSignal {
  // Defined without reading it first: a signal is one call's. A body started again (after a 429)
  // has a context of its own, which takes the old one's place.
  const signal: KnownSignal = context.signal;
  Object.defineProperty(signal, laneContext, { value: context, configurable: true });
  return signal;
}

/** The lane context of the call whose body was handed `signal`; undefined for a body not run by `withLanes`. */
export function contextOfSignal(signal: AbortSignal | undefined): ToolLanes.Context | undefined {
  return (signal as KnownSignal | undefined)?.[laneContext];
}

/**
 * A call's own signal, for a wrapper that must stop the call itself: it follows `given` (the
 * framework's signal, aborted with its reason), the wrapper may abort it (`abort`), and with
 * `timeoutMs` it aborts by itself then (a TimeoutError). `end`, once the call has settled,
 * clears the timer and leaves `given`.
 */
export class FollowingSignal {
  private readonly controller = new AbortController();
  private readonly timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly given: AbortSignal | undefined,
    timeoutMs?: number,
  ) {
    this.timer = timeoutMs === undefined ? undefined : setTimeout(() => this.abort(new DOMException(`the tool call timed out after ${timeoutMs} ms`, 'TimeoutError')), timeoutMs);
    if (given?.aborted === true) this.handleEvent();
    else given?.addEventListener('abort', this);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    this.controller.abort(reason);
  }

  /** `given` aborted. */
  handleEvent(): void {
    this.abort(this.given!.reason);
  }

  end(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.given?.removeEventListener('abort', this);
  }
}

/** A body's failure as the call's: a 429 (a RateLimitedError, or any error saying HTTP 429) pauses the tool's rate lane; anything else goes as it is. */
export function slowedDown(error: unknown): never {
  throw rateLimitedFrom(error) ?? error;
}

/**
 * A stopped call's error as a model reads it: what its class means first, then what happened.
 * The same class, tool, call id and cause, so every fact is kept.
 */
export function toldStop(error: CallStoppedError): CallStoppedError {
  const { stopClass, dispatched, tool, callId } = error;
  return new CallStoppedError(`${stopAdvice(stopClass)} (${error.message})`, dispatched, {
    stopClass,
    ...(tool === undefined ? {} : { tool }),
    ...(callId === undefined ? {} : { callId }),
    ...(error.cause === undefined ? {} : { cause: error.cause }),
  });
}

/** The text of an error that ends a call without its body's answer (a stop, a refusal), for the model. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
