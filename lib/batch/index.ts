export { runBatch } from './runBatch.js';
export { toPhases } from './phases.js';
export { inCallOrder } from './inCallOrder.js';
export { mergeDeltas, assignDelta } from './deltas.js';
export { cancelled, failedBy, stoppedOutcome } from './stops.js';
export { fromResult, invocation, isPromiseLike, reportUnhandled } from './invocation.js';
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
