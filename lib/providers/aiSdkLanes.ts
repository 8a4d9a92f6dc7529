// An AI SDK ToolSet inside the lanes, for an app that keeps the AI SDK's own loop (generateText,
// streamText, ai 7's agents): each tool's execute runs as a call of one ToolLanes request, keyed
// by the SDK's toolCallId and stopped by its abortSignal. Everything else about a tool (its
// schema, needsApproval, its input callbacks) is the SDK's as before. Nothing of `ai` is
// imported: a tool is read by its shape.
import { describeValue } from '../config/index.js';
import { CallStoppedError, ConfigError } from '../errors.js';
import { contextOfSignal, FollowingSignal, frameworkRequest, knownSignal, laneCall, toldStop, type ToolFlags, type WithLanesOptions } from '../toolLanes/frameworkRequest.js';
import type { ToolLanes } from '../toolLanes/ToolLanes.js';
import { executeAnswer, slowedDown } from './aiSdkExecute.js';

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
  return contextOfSignal(options?.abortSignal);
}

// A stopped call's error as the model reads it: what its class means first, then what happened.
// The same class, tool, call id and cause: a step's tool-error part keeps every fact.
function told(error: unknown): never {
  throw error instanceof CallStoppedError ? toldStop(error) : error;
}

// A call's lane call: the tool's flags, with the id and signal the SDK handed its execute.
function laneCallOf(flags: ToolFlags, input: unknown, options: ExecuteOptions): ToolLanes.Call {
  const { toolCallId, abortSignal } = options ?? ({} as Partial<ExecuteOptions>);
  return laneCall(flags, input, toolCallId, abortSignal);
}

// The execute's options as the body hands them on: the call's own signal (aborted when the call
// is stopped or outruns its ceiling), known to laneContextOf.
function optionsFor(options: ExecuteOptions, context: ToolLanes.Context): ExecuteOptions {
  return { ...options, abortSignal: knownSignal(context) };
}

// An execute that returns a value or a Promise, inside the lanes. An output that streams from a
// plain function is drained: the SDK is given its last value.
function wrapped(request: ToolLanes.Request, flags: ToolFlags, execute: Execute): Execute {
  return (input, options) =>
    request
      .run(laneCallOf(flags, input, options), (context) => executeAnswer(() => execute(input, optionsFor(options, context))))
      .catch(told);
}

// An async generator execute (preliminary results, then the final one), inside the lanes: the
// permits are held while it yields, and each value is handed on to the SDK as it comes. A consumer
// that stops reading before the call ended (return(), a for await's break) stops the call: its
// execute's signal aborts. A call stopped in flight (that, its signals, its ceiling) reads its
// generator no further: it is returned at its next value, so one that ignores its signal ends
// there too, and the permits go back once it has ended.
function wrappedStream(request: ToolLanes.Request, flags: ToolFlags, execute: Execute): Execute {
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
    // The call's own signal: the SDK's abortSignal, or the consumer leaving early.
    const { toolCallId, abortSignal } = options ?? ({} as Partial<ExecuteOptions>);
    // Anything else than a signal is the call's, refused by run with the field named.
    const heard = abortSignal instanceof AbortSignal ? abortSignal : undefined;
    const own = new FollowingSignal(heard);
    request
      .run(laneCall(flags, input, toolCallId, abortSignal === undefined || heard !== undefined ? own.signal : abortSignal), async (context) => {
        try {
          for await (const value of execute(input, optionsFor(options, context)) as AsyncIterable<unknown>) {
            // Stopped: its generator is read no further (returned here).
            if (context.signal.aborted) break;
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
        own.end();
        ended = true;
        nudge();
      });
    try {
      for (;;) {
        while (waiting.length > 0) yield waiting.shift();
        if (ended) break;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      if (!ended) {
        waiting.length = 0;
        own.abort(new Error('its output was no longer read'));
      }
    }
    if (failure !== undefined) throw failure.error;
  } as Execute;
}

// A copy of `tool` with `run` as its execute, and every other own field as it was: one the SDK
// hides (ai 7's experimental_toolCaller is not enumerable, so a spread would drop it) is kept
// hidden, a getter stays a getter, and the copy has the tool's prototype.
function withExecute(tool: AiSdkLanesTool, run: Execute): AiSdkLanesTool {
  const { execute: _execute, ...fields } = Object.getOwnPropertyDescriptors(tool);
  const copy = Object.create(Object.getPrototypeOf(tool) as object | null, fields) as AiSdkLanesTool;
  return Object.defineProperty(copy, 'execute', { value: run, writable: true, enumerable: true, configurable: true });
}

function isAsyncGeneratorFunction(execute: unknown): boolean {
  return Object.prototype.toString.call(execute) === '[object AsyncGeneratorFunction]';
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
  // An array (the shape the other frameworks' withLanes take) would be read as tools named 0, 1, ...
  if (tools === null || typeof tools !== 'object' || Array.isArray(tools)) {
    throw new ConfigError('tools', `withLanes: tools must be a ToolSet (a record of AI SDK tools keyed by name), got ${Array.isArray(tools) ? 'an array ' : ''}${describeValue(tools)}`);
  }
  const names = Object.keys(tools);
  const { request, flagsOf } = frameworkRequest(names, toolLanes, options, 'withLanes');
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
    const bound = (execute as Execute).bind(tool);
    const run = isAsyncGeneratorFunction(execute) ? wrappedStream(request, flagsOf(name), bound) : wrapped(request, flagsOf(name), bound);
    wrappedTools[name] = withExecute(tool, run);
  }
  return wrappedTools as unknown as Tools;
}

export type { WithLanesOptions } from '../toolLanes/frameworkRequest.js';
