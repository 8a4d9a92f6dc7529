// An AI SDK ToolSet inside the lanes, for an app that keeps the AI SDK's own loop (generateText,
// streamText, ai 7's agents): each tool's execute runs as a call of one ToolLanes request, keyed
// by the SDK's toolCallId and stopped by its abortSignal. Everything else about a tool (its
// schema, needsApproval, its input callbacks) is the SDK's as before. Nothing of `ai` is
// imported: a tool is read by its shape.
import { describeValue, refuseUnknownFields, type ConcurrencyConfig } from '../config/index.js';
import { CallStoppedError, ConfigError } from '../errors.js';
import { own } from '../own.js';
import { rateLimitedFrom } from '../rateLimited.js';
import { stopAdvice } from '../stopClass.js';
import { ToolLanes } from '../toolLanes/ToolLanes.js';
import { fromAiSdkError } from './aiSdkErrors.js';

/** What `withLanes` reads of an AI SDK tool: its `execute`, if it has one (a tool without one runs on the client and is passed through). */
export interface AiSdkLanesTool {
  readonly execute?: unknown;
}

/** What an execute is given, as far as `withLanes` reads it: the call's id, and the SDK's abort signal. */
interface ExecuteOptions {
  readonly toolCallId: string;
  readonly abortSignal?: AbortSignal;
}

type Execute = (input: unknown, options: ExecuteOptions) => unknown;

/** The request the wrapped tools' calls make, and what the AI SDK cannot say about each tool. */
export interface WithLanesOptions<Name extends string = string> {
  /** The tenant the calls run for (its `perTenant` lane, rates and budget). Default `'default'`. */
  readonly tenant?: string;
  /** Aborting it stops every call of the request (give the HTTP request's signal). The SDK's own abortSignal stops each call too. */
  readonly signal?: AbortSignal;
  /** The request's id: with a call's toolCallId it makes the call's idempotency key. Default: a random UUID. */
  readonly requestId?: string;
  /** Narrows this request's own bounds (`maxConcurrentTools`, `perTool` within the request); never widens the shared lanes. */
  readonly concurrency?: ConcurrencyConfig;
  /** true: a call stopped in flight is safe to call again. Default false. */
  readonly idempotent?: { readonly [K in Name]?: boolean };
  /** false: calls of the tool with identical arguments run one at a time, across every request on the store. Default true. */
  readonly parallelSafe?: { readonly [K in Name]?: boolean };
  /** What one call of the tool costs against the tenant's cost budget (`perTenantBudget.cost`). */
  readonly cost?: { readonly [K in Name]?: number };
}

const optionFields = ['tenant', 'signal', 'requestId', 'concurrency', 'idempotent', 'parallelSafe', 'cost'];
const byToolFields = ['idempotent', 'parallelSafe', 'cost'] as const;

// Each call's context, by the signal its execute was handed, for laneContextOf. A WeakMap: a
// call's entry goes with its signal.
const contexts = new WeakMap<AbortSignal, ToolLanes.Context>();

/**
 * The lane context of the call an execute is running for (its idempotency key, its fencing
 * token, its tenant), read from the options the execute was handed; undefined for an execute
 * not called through `withLanes`.
 *
 * ## Example
 * ```ts
 * execute: async (order, options) => {
 *   const lane = laneContextOf(options);
 *   return shop.place(order, { idempotencyKey: lane?.idempotencyKey ?? options.toolCallId, signal: options.abortSignal });
 * }
 * ```
 */
export function laneContextOf(options: { readonly abortSignal?: AbortSignal | undefined }): ToolLanes.Context | undefined {
  const signal = options?.abortSignal;
  return signal === undefined ? undefined : contexts.get(signal);
}

// A failure of an execute as the call's: a 429 the SDK raised (an execute that calls a model or
// an API through it: APICallError, its Retry-After read) or any error saying HTTP 429 becomes a
// RateLimitedError, so the tool's rate lane pauses; anything else goes as it is.
function slowedDown(error: unknown): never {
  throw rateLimitedFrom(fromAiSdkError(error, 'an AI SDK tool')) ?? error;
}

// A stopped call's error as the model reads it: what its class means first, then what happened.
// The same class, tool, call id and cause: a step's tool-error part keeps every fact.
function told(error: unknown): never {
  if (!(error instanceof CallStoppedError)) throw error;
  const { stopClass, dispatched, tool, callId } = error;
  throw new CallStoppedError(`${stopAdvice(stopClass)} (${error.message})`, dispatched, {
    stopClass,
    ...(tool === undefined ? {} : { tool }),
    ...(callId === undefined ? {} : { callId }),
    ...(error.cause === undefined ? {} : { cause: error.cause }),
  });
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function';
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

// The last value of an output that streams: the SDK's final output.
async function lastOf(iterable: AsyncIterable<unknown>): Promise<unknown> {
  let last: unknown;
  for await (const value of iterable) last = value;
  return last;
}

/** How one tool's calls run: its lane call, less the id and signal each call brings. */
interface ToolCall {
  readonly tool: string;
  readonly idempotent: boolean | undefined;
  readonly parallelSafe: boolean | undefined;
  readonly cost: number | undefined;
}

function laneCall(tool: ToolCall, input: unknown, options: ExecuteOptions): ToolLanes.Call {
  const { toolCallId, abortSignal } = options ?? ({} as Partial<ExecuteOptions>);
  return {
    tool: tool.tool,
    args: input,
    ...(typeof toolCallId === 'string' && toolCallId !== '' ? { callId: toolCallId } : {}),
    ...(abortSignal === undefined ? {} : { signal: abortSignal }),
    ...(tool.idempotent === undefined ? {} : { idempotent: tool.idempotent }),
    ...(tool.parallelSafe === undefined ? {} : { parallelSafe: tool.parallelSafe }),
    ...(tool.cost === undefined ? {} : { cost: tool.cost }),
  };
}

// The execute's options as the body hands them on: the call's own signal (aborted when the call
// is stopped or outruns its ceiling), known to laneContextOf.
function optionsFor(options: ExecuteOptions, context: ToolLanes.Context): ExecuteOptions {
  contexts.set(context.signal, context);
  return { ...options, abortSignal: context.signal };
}

// An execute that returns a value or a Promise, inside the lanes. An output that streams from a
// plain function is drained: the SDK is given its last value.
function wrapped(request: ToolLanes.Request, tool: ToolCall, execute: Execute): Execute {
  return (input, options) =>
    request
      .run(laneCall(tool, input, options), (context) => {
        let output: unknown;
        try {
          output = execute(input, optionsFor(options, context));
        } catch (error) {
          slowedDown(error);
        }
        if (isAsyncIterable(output) && !isThenable(output)) return lastOf(output).catch(slowedDown);
        return isThenable(output) ? Promise.resolve(output).then(undefined, slowedDown) : output;
      })
      .catch(told);
}

// An async generator execute (preliminary results, then the final one), inside the lanes: the
// permits are held while it yields, and each value is handed on to the SDK as it comes.
function wrappedStream(request: ToolLanes.Request, tool: ToolCall, execute: Execute): Execute {
  return async function* (input, options) {
    // The values yielded and not yet handed on.
    const waiting: unknown[] = [];
    // Wakes the generator when a value comes or the call ends.
    let wake: (() => void) | undefined;
    let ended = false;
    let failure: { readonly error: unknown } | undefined;
    const nudge = (): void => {
      const woken = wake;
      wake = undefined;
      woken?.();
    };
    request
      .run(laneCall(tool, input, options), async (context) => {
        try {
          for await (const value of execute(input, optionsFor(options, context)) as AsyncIterable<unknown>) {
            waiting.push(value);
            nudge();
          }
        } catch (error) {
          slowedDown(error);
        }
      })
      .catch(told)
      .then(
        () => undefined,
        (error: unknown) => {
          failure = { error };
        },
      )
      .finally(() => {
        ended = true;
        nudge();
      });
    for (;;) {
      while (waiting.length > 0) yield waiting.shift();
      if (ended) break;
      await new Promise<void>((resolve) => (wake = resolve));
    }
    if (failure !== undefined) throw failure.error;
  } as Execute;
}

function isAsyncGeneratorFunction(execute: unknown): boolean {
  return Object.prototype.toString.call(execute) === '[object AsyncGeneratorFunction]';
}

function checkOptions(options: WithLanesOptions, names: readonly string[]): void {
  if (options === null || typeof options !== 'object') throw new ConfigError('options', `withLanes options must be an object, got ${describeValue(options)}`);
  refuseUnknownFields(options, optionFields, 'withLanes');
  for (const field of byToolFields) {
    const byTool: unknown = options[field];
    if (byTool === undefined) continue;
    if (byTool === null || typeof byTool !== 'object') throw new ConfigError(field, `withLanes: ${field} must be an object keyed by tool name, got ${describeValue(byTool)}`);
    for (const [name, value] of Object.entries(byTool)) {
      if (!names.includes(name)) throw new ConfigError(`${field}.${name}`, `withLanes: ${field} names ${name}, which is not one of the tools (${names.join(', ')})`);
      const fits = field === 'cost' ? typeof value === 'number' && Number.isFinite(value) && value >= 0 : typeof value === 'boolean';
      if (!fits) throw new ConfigError(`${field}.${name}`, `withLanes: ${field}.${name} must be ${field === 'cost' ? 'a finite number from 0 up' : 'true or false'}, got ${describeValue(value)}`);
    }
  }
}

/**
 * `tools` (the ToolSet passed to `generateText`, `streamText` or an ai 7 agent) with each tool's
 * `execute` run inside `toolLanes`' lanes, as the calls of one request: call `withLanes` once per
 * user request (a route handler's call), with that request's tenant and signal. The tools keep
 * their keys, types, schemas and `needsApproval`; a tool without `execute` is passed through.
 *
 * Each call runs as `request.run({ tool: <key>, args: input, callId: toolCallId, signal:
 * abortSignal })`, and its execute is handed the call's own signal (aborted when the call is
 * stopped or outruns its `perToolSeconds`). A stopped call throws a `CallStoppedError`, which the
 * SDK hands the model as the tool's error: its message starts with what the stop class means (it
 * never started; or it ran and asking again is safe; or its side effect may have landed). A 429
 * an execute raises (the SDK's `APICallError`, a `RateLimitedError`) pauses the tool's rate lane,
 * fleet-wide on a RedisLaneStore. When the SDK aborts (stop pressed, the request closed), a call
 * still queued never starts, and every call's class is on `toolLanes.activity$` even where the SDK
 * drops the error.
 *
 * ## Example
 * ```ts
 * const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { search: 4 }, perTenant: 8 }) });
 * export async function POST(req: Request) {
 *   const result = streamText({
 *     model, messages,
 *     tools: withLanes(tools, toolLanes, { tenant: userOf(req).org, signal: req.signal, idempotent: { search: true } }),
 *     abortSignal: req.signal,
 *   });
 *   return result.toUIMessageStreamResponse();
 * }
 * ```
 */
export function withLanes<Tools extends Readonly<Record<string, AiSdkLanesTool>>>(
  tools: Tools,
  toolLanes: ToolLanes,
  options: WithLanesOptions<Extract<keyof Tools, string>> = {},
): Tools {
  if (tools === null || typeof tools !== 'object') throw new ConfigError('tools', `withLanes: tools must be a ToolSet (a record of AI SDK tools), got ${describeValue(tools)}`);
  if (!(toolLanes instanceof ToolLanes)) throw new ConfigError('toolLanes', `withLanes: toolLanes must be a ToolLanes, got ${describeValue(toolLanes)}`);
  const names = Object.keys(tools);
  checkOptions(options, names);
  const { tenant, signal, requestId, concurrency, idempotent = {}, parallelSafe = {}, cost = {} } = options as WithLanesOptions;
  const request = toolLanes.request({
    ...(tenant === undefined ? {} : { tenant }),
    ...(signal === undefined ? {} : { signal }),
    ...(requestId === undefined ? {} : { requestId }),
    ...(concurrency === undefined ? {} : { concurrency }),
  });
  const wrappedTools: Record<string, AiSdkLanesTool> = {};
  for (const name of names) {
    const tool = tools[name]!;
    if (tool === null || typeof tool !== 'object') throw new ConfigError(name, `withLanes: tool ${name} must be an AI SDK tool, got ${describeValue(tool)}`);
    const { execute } = tool;
    if (execute === undefined) {
      wrappedTools[name] = tool;
      continue;
    }
    if (typeof execute !== 'function') throw new ConfigError(`${name}.execute`, `withLanes: tool ${name}'s execute must be a function, got ${describeValue(execute)}`);
    const call: ToolCall = { tool: name, idempotent: own(idempotent, name), parallelSafe: own(parallelSafe, name), cost: own(cost, name) };
    const bound = (execute as Execute).bind(tool);
    const run = isAsyncGeneratorFunction(execute) ? wrappedStream(request, call, bound) : wrapped(request, call, bound);
    wrappedTools[name] = { ...tool, execute: run };
  }
  return wrappedTools as unknown as Tools;
}
