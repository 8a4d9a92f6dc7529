export { Agent, OnToolError, type AgentOptions } from './Agent.js';
export {
  AgentRunner,
  type CompletedRunResult,
  type EndedRunResult,
  type InterruptedRunResult,
  type ResumeOptions,
  type RunnerActivity,
  type RunnerOptions,
  type TracerLike,
  type RunOptions,
  type RunParent,
  type RunResult,
  type RunResultFields,
  type RunStatus,
} from './AgentRunner.js';
export { decodeConversation } from './model/conversation.js';
export { RunEventType, toOutcomeEvent, toResponseEvent, type OutcomeLike } from './events.js';
export type {
  ModelResponseEvent,
  RunCancelledEvent,
  RunCompletedEvent,
  RunEvent,
  RunFailedEvent,
  RunInterruptedEvent,
  RunStartedEvent,
  ToolErrorEvent,
  ToolIndeterminateEvent,
  ToolOutcomeEvent,
  ToolResultEvent,
} from './events.js';
export {
  decodeModelResponse,
  decodeToolCall,
  FinishReasonCodec,
  isStreamPart,
  ModelResponseCodec,
  UsageCodec,
  type DecodedResponse,
  type FinishReason,
  type Message,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type ModelStreamPart,
  type ResponseInfo,
  type RunInput,
  type ToolCall,
  type Usage,
} from './model/model.js';
export { StreamPartError, WrittenTurn } from './model/modelStream.js';
export type { Approve, ApprovalVerdict, Guardrails, GuardrailVerdict, Hooks, PolicyCall } from './turn/policies.js';
export { snapshotFormat, snapshotVersion, type Approval, type Approvals, type PendingCall, type RunSnapshot, type SnapshotCall } from './resume/snapshotFormat.js';
export { TracingAttributes, TracingEvents } from './trace/tracingNames.js';
export type {
  CallDispatchedEntry,
  CallDecidedEntry,
  CallSettledEntry,
  CallWrittenEntry,
  JournalEntry,
  JournalWaiter,
  RecoverableRun,
  RunEndedEntry,
  RunJournal,
  RunResumedEntry,
  RunStartedEntry,
  TurnAnsweredEntry,
} from './journal/runJournal.js';
export type { RecoverOptions } from './journal/recover.js';
export { defaultSnapshotTtlSeconds, InMemorySnapshotStore, type InMemorySnapshotStoreOptions, type KeptSnapshot, type SnapshotStore } from './resume/snapshotStore.js';
