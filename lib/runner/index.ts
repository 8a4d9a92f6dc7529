export { Agent, OnToolError, type AgentOptions } from './Agent.js';
export { AgentRunner, type RunnerActivity, type RunnerOptions, type RunOptions, type RunParent, type RunResult, type RunStatus } from './AgentRunner.js';
export { RunEventType, toOutcomeEvent, type OutcomeLike } from './events.js';
export type {
  ModelResponseEvent,
  RunCancelledEvent,
  RunCompletedEvent,
  RunEvent,
  RunFailedEvent,
  RunStartedEvent,
  ToolErrorEvent,
  ToolIndeterminateEvent,
  ToolOutcomeEvent,
  ToolResultEvent,
} from './events.js';
export { decodeModelResponse, ModelResponseCodec, type DecodedResponse, type Message, type ModelProvider, type ModelRequest, type ModelResponse, type ToolCall } from './model.js';
export type { Approve, Guardrails, GuardrailVerdict, Hooks, PolicyCall } from './policies.js';
export { TracingAttributes, TracingEvents } from './tracing.js';
