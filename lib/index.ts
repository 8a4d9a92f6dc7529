// agent-lanes: run LLM agents whose turns ask for several tool calls at once,
// concurrently inside declared lanes, in call order, with honest stop accounting.
// This file is the one public entry.

export { ConcurrencyConfig, DeadlineConfig, type ConcurrencyOptions, type DeadlineOptions } from './config/index.js';
export {
  CallStoppedError,
  ConfigError,
  DeadlineExceededError,
  EventLoopStalledError,
  JsonFormError,
  ProviderError,
  RunError,
  ToolArgumentsError,
  ToolRejectedError,
  ToolTimedOutError,
  UnknownToolError,
  WorkerPoolFullError,
  toErrorInfo,
  type ErrorInfo,
} from './errors.js';
export { jsonForm, jsonText, type JsonValue } from './json.js';
export { Lane, LaneTable, inLane, type LaneChange, type LaneOccupancy, type OnGrant, type LaneStore, type Permit } from './lanes/index.js';
export {
  LoopMonitor,
  ToolRegistry,
  WorkerPool,
  toJsonSchema,
  type AgentRef,
  type JsonSchema,
  type NestedRunResult,
  type RunState,
  type ToolBody,
  type ToolContext,
  type ToolDeclaration,
  type ToolSpec,
  type WorkerPoolOptions,
} from './tools/index.js';
export {
  runBatch,
  mergeDeltas,
  type BatchCall,
  type BatchOptions,
  type CallActivity,
  type Delta,
  type InvokeContext,
  type Outcome,
  type StopReason,
} from './batch/index.js';
export * from './runner/index.js';
export { ScriptedProvider, type Script, type ScriptStep } from './providers/index.js';
export {
  AnthropicMessagesProvider,
  OpenAIChatProvider,
  ProviderHttpError,
  ProviderReplyError,
  abortableSleep,
  fromChatCompletion,
  fromMessagesReply,
  postJson,
  retryAfterMs,
  retryDelay,
  retryPolicy,
  toChatCompletionRequest,
  toMessagesRequest,
  type AnthropicBlock,
  type AnthropicMessage,
  type AnthropicMessagesOptions,
  type ChatMessage,
  type JsonPost,
  type OpenAIChatOptions,
  type RetryOptions,
  type RetryPolicy,
} from './providers/index.js';
export {
  EVENT_STREAM_HEADERS,
  EVENT_STREAM_HEARTBEAT,
  UI_MESSAGE_STREAM_DONE,
  UI_MESSAGE_STREAM_HEADERS,
  eventStreamFrame,
  followForClient,
  serveEventStream,
  sseHandler,
  toAsyncIterable,
  toUIMessageStream,
  uiMessageStreamHandler,
  uiMessageStreamResponse,
  type ClientFollow,
  type EventStreamEncoding,
  type EventStreamFrame,
  type SseHandlerOptions,
  type StreamEnding,
  type StreamStarter,
  type UIMessageChunk,
  type UIMessageStreamHandlerOptions,
  type UIMessageStreamOptions,
  type UIMessageStreamResponseOptions,
} from './adapters/index.js';
export * from './transcript/index.js';
