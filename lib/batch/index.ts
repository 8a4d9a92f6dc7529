export { openBatch, runBatch, type OpenBatch } from './runBatch.js';
export { mergeDeltas, assignDelta } from './deltas.js';
export { cancelled, cancelledWhy, failedBy, givenReason, stoppedOutcome } from './stops.js';
export { isPromiseLike, reportUnhandled } from './invocation.js';
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
} from './types.js';
