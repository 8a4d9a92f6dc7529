// The batch's stages, each a public RxJS operator; runBatch is their pipe.
export { phases } from './phases.js';
export { gate, type GateStep } from './gate.js';
export { inLanes, type LanePlan } from './inLanes.js';
export { ceiling, type CeilingLimits } from './ceiling.js';
export { untilStopped } from './untilStopped.js';
export { inCallOrder } from './inCallOrder.js';
export { settle, type SettleAnswer, type SettleStep } from './settle.js';
