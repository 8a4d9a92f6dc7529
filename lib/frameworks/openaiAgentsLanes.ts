// The OpenAI Agents SDK's function tools inside the lanes, for an app that keeps the SDK's own
// Runner (its loop, its model calls, its per-turn `maxFunctionToolConcurrency`, its approvals,
// guardrails and timeouts): each function tool's `invoke` runs as a call of one ToolLanes request,
// keyed by the SDK's call id and stopped by the signal the SDK hands the tool. Nothing of the SDK
// is imported: a tool is read by its shape.
import { CallStoppedError } from '../errors.js';
import type { ToolLanes } from '../toolLanes/ToolLanes.js';
import { contextOfSignal, frameworkRequest, knownSignal, laneCall, messageOf, refuseTool, slowedDown, toldStop, toolArray, type ToolFlags, type WithLanesOptions } from '../toolLanes/frameworkRequest.js';

/** What `withLanes` reads of an Agents SDK tool: its `type` (a `'function'` tool is wrapped; any other is passed through). */
export interface AgentsToolLike {
  readonly type: string;
}

/** What the SDK hands a function tool's invoke with the input, as far as `withLanes` reads it (the SDK's `ToolCallDetails`). */
export interface AgentsCallDetails {
  readonly toolCall?: { readonly callId?: string };
  readonly signal?: AbortSignal;
}

type Invoke = (runContext: unknown, input: string, details?: AgentsCallDetails) => Promise<unknown>;
type ErrorFunction = (runContext: unknown, error: unknown, details?: AgentsCallDetails) => unknown;

/** A function tool as `withLanes` reads it (the SDK's `FunctionTool`). */
interface FunctionToolLike {
  readonly type: 'function';
  readonly name: string;
  readonly invoke: Invoke;
  readonly outputSchema?: unknown;
  readonly errorFunction?: ErrorFunction | null;
}

/**
 * The lane context of the call a tool's `execute` is running for (its idempotency key, its
 * fencing token, its tenant), read from the details the execute was handed (its third argument);
 * undefined for an execute not called through `withLanes`.
 *
 * ## Example
 * ```ts
 * execute: async (order, _runContext, details) => {
 *   const lane = laneContextOf(details);
 *   return shop.place(order, { idempotencyKey: lane?.idempotencyKey, signal: details?.signal });
 * }
 * ```
 */
export function laneContextOf(details: { readonly signal?: AbortSignal | undefined } | undefined): ToolLanes.Context | undefined {
  return contextOfSignal(details?.signal);
}

// The details the tool's own invoke is handed: the SDK's, every field and symbol kept (its input
// callbacks, tracing, its timeout already enforced), with the call's own signal (aborted when the
// call is stopped or outruns its ceiling).
// Key by key: a plain field (writable, enumerable, configurable: what the SDK makes) is assigned,
// anything else defined as it is; about a sixth of the cost of copying all the descriptors at once.
function detailsFor(details: AgentsCallDetails | undefined, context: ToolLanes.Context): AgentsCallDetails {
  const signal = knownSignal(context);
  if (details === undefined) return { signal };
  const copy: Record<PropertyKey, unknown> = { signal };
  for (const key of Reflect.ownKeys(details)) {
    if (key === 'signal') continue;
    const field = Object.getOwnPropertyDescriptor(details, key)!;
    if (field.writable === true && field.enumerable === true && field.configurable === true && key !== '__proto__') copy[key] = field.value;
    else Object.defineProperty(copy, key, field);
  }
  return copy as AgentsCallDetails;
}

// The input as arguments, for the identical-arguments lane of a tool that is not parallel-safe
// (the SDK hands a tool its arguments as JSON text). Only that lane reads them: the text of a
// parallel-safe call's is passed as it is, unparsed.
function argsOf(input: string, flags: ToolFlags): unknown {
  if (flags.parallelSafe !== false) return input;
  try {
    return JSON.parse(input);
  } catch {
    return input;
  }
}

function wrapped(request: ToolLanes.Request, flags: ToolFlags, tool: FunctionToolLike): FunctionToolLike {
  // What the model reads for a call that ended without its body's answer: a tool with an output
  // schema keeps its contract through its own errorFunction (none: the error goes to the SDK).
  const answer = (error: Error, runContext: unknown, details: AgentsCallDetails | undefined): unknown => {
    if (tool.outputSchema === undefined) return error.message;
    if (typeof tool.errorFunction === 'function') return tool.errorFunction(runContext, error, details);
    throw error;
  };
  const invoke: Invoke = (runContext, input, details) => {
    // Whether the body started: a failure before it is a refusal (a spent budget), told to the model.
    let started = false;
    const signal = details?.signal;
    return request
      .run(laneCall(flags, argsOf(input, flags), details?.toolCall?.callId, signal), (context) => {
        started = true;
        return tool.invoke(runContext, input, detailsFor(details, context)).then(undefined, slowedDown);
      })
      .catch((error: unknown) => {
        // The SDK aborted (stop, a sibling's failure, its own timeout): it drops the call when it
        // gets its signal's reason back; the call's class is on toolLanes.activity$.
        if (signal?.aborted === true && (error instanceof CallStoppedError || !started)) throw signal.reason ?? error;
        if (error instanceof CallStoppedError) return answer(toldStop(error), runContext, details);
        if (!started) return answer(error instanceof Error ? error : new Error(messageOf(error)), runContext, details);
        // The body's own failure that the tool let through (errorFunction: null): the SDK's to handle.
        throw error;
      });
  };
  return { ...tool, invoke };
}

/**
 * `tools` (an Agent's tools) with each function tool's `invoke` run inside `toolLanes`' lanes, as
 * the calls of one request: call `withLanes` once per user request, with that request's tenant
 * and signal, and give the tools to the request's agent (`agent.clone({ tools: withLanes(...) })`).
 * Each tool keeps its name, schema, approvals, guardrails and timeout; tools of another type
 * (hosted tools, computer, shell) are passed through.
 *
 * Each call runs as `request.run({ tool: name, args, callId: details.toolCall.callId, signal:
 * details.signal })`, and the tool is handed the call's own signal (aborted when the call is
 * stopped or outruns its `perToolSeconds`). When the SDK aborts (the run's signal, a sibling's
 * fatal failure, the tool's `timeoutMs`), a call still queued never starts and the SDK drops the
 * call as it does; every call's class is on `toolLanes.activity$`. A call the lanes stop
 * themselves (this request's `signal`, a ceiling, a lost fleet lease) gives the model a text that
 * starts with what its stop class means. A 429 that reaches the lanes (a tool made with
 * `errorFunction: null`) pauses the tool's rate lane; the SDK's default errorFunction turns a
 * body's error into text inside the tool, so the lanes see such a call end by itself.
 *
 * ## Example
 * ```ts
 * const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { search: 4 }, perTenant: 8 }) });
 * const result = await run(agent.clone({ tools: withLanes(agent.tools, toolLanes, { tenant: 'acme', signal }) }), input, { signal });
 * ```
 */
export function withLanes<Tools extends readonly AgentsToolLike[]>(tools: Tools, toolLanes: ToolLanes, options: WithLanesOptions = {}): Tools {
  const functions: FunctionToolLike[] = [];
  toolArray(tools, 'Agents SDK tools').forEach((tool, index) => {
    if (tool === null || typeof tool !== 'object' || typeof (tool as AgentsToolLike).type !== 'string') refuseTool(index, 'an Agents SDK tool (with a type)', tool);
    if ((tool as AgentsToolLike).type !== 'function') return;
    const { name, invoke } = tool as FunctionToolLike;
    if (typeof name !== 'string' || name === '' || typeof invoke !== 'function') refuseTool(index, "a function tool with a name and an invoke (made with the SDK's tool())", tool);
    functions.push(tool as FunctionToolLike);
  });
  const { request, flagsOf } = frameworkRequest(
    functions.map((tool) => tool.name),
    toolLanes,
    options,
    'withLanes',
  );
  return tools.map((tool) => (tool.type === 'function' ? wrapped(request, flagsOf((tool as FunctionToolLike).name), tool as FunctionToolLike) : tool)) as unknown as Tools;
}

export type { WithLanesOptions } from '../toolLanes/frameworkRequest.js';
