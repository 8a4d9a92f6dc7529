// agent-lanes/streaming: a run to a UI (docs/streaming.md): as an AsyncIterable, as server-sent
// events over node:http, as the Vercel AI SDK UI message stream (no `ai` import), and the
// approvals such a UI answers.
export { toAsyncIterable } from './adapters/toAsyncIterable.js';
export { EVENT_STREAM_HEADERS, EVENT_STREAM_HEARTBEAT, eventStreamFrame, type EventStreamFrame } from './adapters/eventStream.js';
export { followForClient, type ClientFollow, type StreamEnding } from './adapters/followForClient.js';
export { sseHandler, serveEventStream, type EventStreamEncoding, type SseHandlerOptions, type StreamStarter } from './adapters/sseHandler.js';
export { toUIMessageStream, UI_MESSAGE_STREAM_DONE, UI_MESSAGE_STREAM_HEADERS, type UIMessageChunk, type UIMessageStreamOptions } from './adapters/toUIMessageStream.js';
export { toUIMessageReadableStream } from './adapters/toUIMessageReadableStream.js';
export { approvalAnswers, approvalIdOf, keepSnapshots, resumeApproved, type ApprovalAnswer, type ResumeApprovedOptions } from './adapters/uiApprovals.js';
export {
  uiMessageStreamHandler,
  uiMessageStreamResponse,
  type UIMessageStreamHandlerOptions,
  type UIMessageStreamResponseOptions,
} from './adapters/uiMessageStreamHandler.js';
