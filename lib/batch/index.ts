export { runBatch } from './runBatch.js';
export { BatchScope, type BatchScopeOptions } from './batchScope.js';
export { CallRecord, type CallNews, type CallState, type LaneEntry } from './records.js';
export { CallLanes, type LaneSource, type LaneStep } from './callLanes.js';
export { CallBody, CallContext } from './callBody.js';
export * from './operators/index.js';
export { mergeDeltas, assignDelta } from './deltas.js';
export { batchStop, cancelled, cancelledWhy, errorOutcome, failedBy, failsFast, givenReason, stopOf, stoppedOutcome } from './stops.js';
export { reportUnhandled } from '../unhandled.js';
export { isPending, isPromiseLike, takeAnswer, type AnswerObserver } from './answer.js';
export type {
  ActivitySink,
  BatchCall,
  BatchOptions,
  CallActivity,
  Delta,
  ErrorOutcome,
  GateVerdict,
  IndeterminateOutcome,
  InvokeContext,
  Outcome,
  ResultOutcome,
  StopReason,
  WriteAhead,
  WriteAheadWaiter,
} from './types.js';
