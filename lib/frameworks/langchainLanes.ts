// LangChain tools inside the lanes, for an app that keeps LangChain's own loop (LangGraph's
// ToolNode and createReactAgent, an AgentExecutor, its model calls): each tool's `invoke` runs as
// a call of one ToolLanes request, keyed by the tool call's id and stopped by the config's
// signal. The tool is otherwise itself (its name, schema, description, callbacks, class): the
// wrapped tool is a new object whose prototype is the tool. Of LangChain, only ToolMessage is
// imported, when a stopped call's message is handed to ToolNode: the entry loads without its peer.
import { CallStoppedError } from '../errors.js';
import type { ToolLanes } from '../toolLanes/ToolLanes.js';
import { contextOfSignal, FollowingSignal, frameworkRequest, knownSignal, laneCall, messageOf, refuseTool, slowedDown, toldStop, toolArray, type ToolFlags, type WithLanesOptions } from '../toolLanes/frameworkRequest.js';

/** What `withLanes` reads of a LangChain tool (a `StructuredTool`, a `tool()`, a `DynamicTool`): its name and its invoke. */
export interface LangChainToolLike {
  readonly name: string;
  invoke(input: never, config?: never): Promise<unknown>;
}

/** The config a tool is invoked with, as far as `withLanes` reads it (LangChain's `ToolRunnableConfig`). */
interface ToolConfig {
  readonly signal?: AbortSignal;
  readonly timeout?: number;
  readonly metadata?: Record<string, unknown>;
  readonly toolCall?: { readonly id?: string };
  readonly toolCallId?: string;
}

/** A tool call as ToolNode hands it to a tool (LangChain's `ToolCall`). */
interface ToolCallInput {
  readonly type: 'tool_call';
  readonly id?: string;
  readonly name: string;
  readonly args: unknown;
}

type Invoke = (input: unknown, config?: ToolConfig) => Promise<unknown>;

function isToolCall(input: unknown): input is ToolCallInput {
  return input !== null && typeof input === 'object' && (input as { type?: unknown }).type === 'tool_call';
}

/**
 * The lane context of the call a tool's function is running for (its idempotency key, its
 * fencing token, its tenant), read from the config the function was handed (its second
 * argument); undefined for a function not called through `withLanes`.
 *
 * ## Example
 * ```ts
 * const order = tool(async (input, config) => {
 *   const lane = laneContextOf(config);
 *   return shop.place(input, { idempotencyKey: lane?.idempotencyKey, signal: config.signal });
 * }, { name: 'order', schema });
 * ```
 */
export function laneContextOf(config: { readonly signal?: AbortSignal | undefined } | undefined): ToolLanes.Context | undefined {
  return contextOfSignal(config?.signal);
}

function wrapped<Tool extends LangChainToolLike>(request: ToolLanes.Request, flags: ToolFlags, tool: Tool): Tool {
  const own = tool.invoke.bind(tool) as Invoke;
  const invoke: Invoke = (input, config) => {
    const call = isToolCall(input) ? input : undefined;
    const callId = call?.id ?? config?.toolCall?.id ?? config?.toolCallId;
    // LangChain's `timeout` (ms) aborts the call as its signal does, counted from here (a call
    // still queued when it fires never starts). The tool gets it as its signal already made: left
    // in its config, LangChain would start the clock again with the body, and hand the function a
    // signal of its own in place of the call's (laneContextOf would find nothing).
    const timeout = config?.timeout;
    const timed = config !== undefined && typeof timeout === 'number' && timeout > 0;
    const timing = timed ? new FollowingSignal(config.signal, timeout) : undefined;
    const signal = timing === undefined ? config?.signal : timing.signal;
    const given = timed ? { ...config, timeout: undefined, metadata: { ...config.metadata, timeoutMs: config.metadata?.['timeoutMs'] ?? timeout } } : config;
    // Whether the body started: a failure before it is a refusal (a spent budget).
    let started = false;
    const settled = request
      .run(laneCall(flags, call === undefined ? input : call.args, callId, signal), (context) => {
        started = true;
        // The config as it came, with the call's own signal (aborted when the call is stopped or outruns its ceiling).
        return own(input, { ...given, signal: knownSignal(context) }).then(undefined, slowedDown);
      })
      .catch((error: unknown) => {
        const told = error instanceof CallStoppedError ? toldStop(error) : error;
        // ToolNode makes any other error "Error: ... Please fix your mistakes."; a call that ended
        // without its body's answer says what happened instead, as the tool's own message. Where
        // LangChain itself aborted, it has left already: the call's class is on activity$.
        const ownAnswer = error instanceof CallStoppedError || !started;
        if (ownAnswer && signal?.aborted !== true && call !== undefined && typeof callId === 'string') {
          return import('@langchain/core/messages').then(({ ToolMessage }) => new ToolMessage({ status: 'error', content: messageOf(told), name: tool.name, tool_call_id: callId }));
        }
        throw told;
      });
    return timing === undefined ? settled : settled.finally(() => timing.end());
  };
  return Object.create(tool, { invoke: { value: invoke, writable: true, configurable: true } }) as Tool;
}

/**
 * `tools` (LangChain tools, as `ToolNode`, `createReactAgent` or `model.bindTools` take them)
 * with each tool's `invoke` run inside `toolLanes`' lanes, as the calls of one request: call
 * `withLanes` once per user request, with that request's tenant and signal, and build the request's
 * ToolNode or agent with them. Each wrapped tool is the tool itself underneath (its prototype), so
 * its name, schema, description and class stay what they were.
 *
 * Each call runs as `request.run({ tool: name, args, callId: toolCall.id, signal: config.signal
 * })`, and the tool is invoked with the call's own signal (aborted when the call is stopped or
 * outruns its `perToolSeconds`). When LangChain aborts (the signal given to `invoke`, its config's
 * `timeout`, counted from `invoke`), a call still queued never starts; every call's class is on `toolLanes.activity$`. A call the
 * lanes stop themselves (this request's `signal`, a ceiling, a lost fleet lease) answers ToolNode
 * with an error ToolMessage that starts with what its stop class means. A 429 a tool throws (a
 * `RateLimitedError`, any error with HTTP status 429) pauses the tool's rate lane.
 *
 * LangChain's `tool()` settles a call the moment its signal aborts, without waiting for the
 * function inside: a stopped call's permits go back then, so a function that ignores its signal
 * runs on outside the bound. A `StructuredTool` subclass or `new DynamicStructuredTool` is awaited
 * to its end.
 *
 * ## Example
 * ```ts
 * const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { search: 4 }, perTenant: 8 }) });
 * const agent = createReactAgent({ llm, tools: withLanes([search, book], toolLanes, { tenant: 'acme', signal }) });
 * await agent.invoke({ messages }, { signal });
 * ```
 */
export function withLanes<Tools extends readonly LangChainToolLike[]>(tools: Tools, toolLanes: ToolLanes, options: WithLanesOptions = {}): Tools {
  toolArray(tools, 'LangChain tools').forEach((tool, index) => {
    if (tool === null || typeof tool !== 'object' || typeof (tool as LangChainToolLike).name !== 'string' || typeof (tool as LangChainToolLike).invoke !== 'function') {
      refuseTool(index, 'a LangChain tool (with a name and invoke)', tool);
    }
  });
  const { request, flagsOf } = frameworkRequest(
    tools.map((tool) => tool.name),
    toolLanes,
    options,
    'withLanes',
  );
  return tools.map((tool) => wrapped(request, flagsOf(tool.name), tool)) as unknown as Tools;
}

export type { WithLanesOptions } from '../toolLanes/frameworkRequest.js';
