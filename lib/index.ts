// agent-lanes: run LLM agents whose turns ask for several tool calls at once,
// concurrently inside declared lanes, in call order, with honest stop accounting.
// This file is the one public entry.

export { ConcurrencyConfig, DeadlineConfig, type ConcurrencyOptions, type DeadlineOptions } from './config/index.js';
export {
  CallStoppedError,
  ConfigError,
  DeadlineExceededError,
  EventLoopStalledError,
  ProviderError,
  RunError,
  ToolArgumentsError,
  ToolRejectedError,
  ToolTimedOutError,
  UnknownToolError,
  WorkerPoolFullError,
  type ErrorInfo,
} from './errors.js';
export { Lane, LaneTable, inLane, type LaneChange, type LaneOccupancy, type LaneStore, type Permit } from './lanes/index.js';
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
