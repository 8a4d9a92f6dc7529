// agent-lanes: run LLM agents whose turns ask for several tool calls at once,
// concurrently inside declared lanes, in call order, with honest stop accounting.
// This file is the main entry: what a user writes (agents, the runner, tools, configs, events,
// errors, the batch's stages for embedding, and ToolLanes, the lanes around another framework's
// tools). Integrations have entries of their own:
// agent-lanes/redis, /postgres, /mcp, /otel, /testing, /providers, /streaming and /ai-sdk
// (package.json "exports"). Nothing internal is exported; spec/package/surface.spec.ts keeps
// this entry to at most 120 names.

export { ConcurrencyConfig, DeadlineConfig, type ConcurrencyOptions, type DeadlineOptions } from './config/index.js';
export {
  ApprovalRefusedError,
  BudgetExceededError,
  CallInterruptedError,
  CallStoppedError,
  ConfigError,
  DeadlineExceededError,
  EventLoopStalledError,
  JournalError,
  JsonFormError,
  LaneLostError,
  ProcessStoppedError,
  ProviderError,
  RateLimitedError,
  RunError,
  ToolArgumentsError,
  ToolRejectedError,
  ToolRemovedError,
  ToolTimedOutError,
  UnknownToolError,
  WorkerPoolFullError,
  type ErrorInfo,
} from './errors.js';
export { rateLimitedFrom } from './rateLimited.js';
export { keepWarmShapes } from './shapes.js';
export { StopClasses, stopClassOf, type StopClass } from './stopClass.js';
// The lanes without the runner: any framework's tool calls inside the same lanes (docs/frameworks.md).
export { ToolLanes } from './toolLanes/ToolLanes.js';

// Lanes: the semaphore as an operator, the runner's shared table, and what a store is.
export { Lane, LaneTable, inLane, type LaneChange, type LaneNotice, type LaneOccupancy, type LaneStore, type OnGrant, type Permit, type Rate } from './lanes/index.js';

// Tools.
export { ToolRegistry, WorkerPool, type NestedRunResult, type RunState, type Schema, type ToolBody, type ToolContext, type ToolDeclaration, type ToolSpec, type WorkerPoolOptions } from './tools/index.js';

// The batch's stages, for embedding: runBatch is their pipe.
export {
  runBatch,
  phases,
  gate,
  inLanes,
  ceiling,
  untilStopped,
  inCallOrder,
  settle,
  type BatchCall,
  type BatchOptions,
  type CallActivity,
  type CeilingLimits,
  type GateStep,
  type InvokeContext,
  type LanePlan,
  type Outcome,
  type SettleStep,
  type StopReason,
} from './batch/index.js';

// Agents, the runner, its events, the model's side of a turn, policies, snapshots and journals.
export {
  Agent,
  OnToolError,
  AgentRunner,
  RunEventType,
  decodeConversation,
  InMemorySnapshotStore,
  type AgentOptions,
  type RunnerOptions,
  type RunOptions,
  type ResumeOptions,
  type RecoverOptions,
  type RunResult,
  type RunStatus,
  type RunnerActivity,
  type RunEvent,
  type RunStartedEvent,
  type ModelResponseEvent,
  type ToolOutcomeEvent,
  type ToolResultEvent,
  type ToolErrorEvent,
  type ToolIndeterminateEvent,
  type RunCompletedEvent,
  type RunFailedEvent,
  type RunCancelledEvent,
  type RunInterruptedEvent,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type ModelStreamPart,
  type Message,
  type RunInput,
  type ToolCall,
  type Usage,
  type Approve,
  type Guardrails,
  type Hooks,
  type PolicyCall,
  type RunSnapshot,
  type PendingCall,
  type Approvals,
  type SnapshotStore,
  type RunJournal,
  type JournalEntry,
  type RecoverableRun,
} from './runner/index.js';
export { InMemoryRunJournal } from './journal/InMemoryRunJournal.js';
export { ScriptedProvider, type Script, type ScriptStep } from './providers/ScriptedProvider.js';
