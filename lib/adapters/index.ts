// The streaming adapters: a run (or any Observable) as an AsyncIterable, as server-sent
// events over node:http, and as the Vercel AI SDK UI message stream.
export { toAsyncIterable } from './toAsyncIterable.js';
export { EVENT_STREAM_HEADERS, EVENT_STREAM_HEARTBEAT, eventStreamFrame, type EventStreamFrame } from './eventStream.js';
export { followForClient, type ClientFollow, type StreamEnding } from './followForClient.js';
export { sseHandler, serveEventStream, type EventStreamEncoding, type SseHandlerOptions, type StreamStarter } from './sseHandler.js';
export {
  toUIMessageStream,
  UI_MESSAGE_STREAM_DONE,
  UI_MESSAGE_STREAM_HEADERS,
  type UIMessageChunk,
  type UIMessageStreamOptions,
} from './toUIMessageStream.js';
export { toUIMessageReadableStream } from './toUIMessageReadableStream.js';
export {
  approvalAnswers,
  approvalIdOf,
  InMemorySnapshotStore,
  keepSnapshots,
  resumeApproved,
  type ApprovalAnswer,
  type KeptSnapshot,
  type ResumeApprovedOptions,
  type SnapshotStore,
} from './uiApprovals.js';
export {
  uiMessageStreamHandler,
  uiMessageStreamResponse,
  type UIMessageStreamHandlerOptions,
  type UIMessageStreamResponseOptions,
} from './uiMessageStreamHandler.js';
