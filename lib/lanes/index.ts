export { grant, Lane, LanePermit, LanePermit as Ticket, type LaneChange, type LaneGrantTarget, type LaneOccupancy, type OnGrant } from './Lane.js';
export { LaneTable, type LaneLimitNotice, type LaneNotice, type LanePauseNotice, type LaneStore, type LaneStoreNotice, type Permit } from './LaneTable.js';
export { RatedStore } from './RatedStore.js';
export { checkRate, RateLane, type Rate, type RateOccupancy } from './RateLane.js';
export { RatePermit, type RateDecider } from './RatePermit.js';
export { inLane, type InLaneOptions } from './inLane.js';
export { Loan, enterWithLoan } from './Loan.js';
export {
  RedisLaneStore,
  LaneMetricNames,
  type LaneMeter,
  ioredisConnection,
  nodeRedisConnection,
  redisConnection,
  type FleetLaneOccupancy,
  type IoredisClientLike,
  type NodeRedisClientLike,
  type RedisConnection,
  type RedisLaneClient,
  type RedisLaneStoreOptions,
  type RedisSubscriber,
} from './redis/index.js';
export {
  AdaptiveLimit,
  initialLimit,
  type AdaptiveBounds,
  type LaneSignal,
  type LimitCause,
  type LimitChange,
} from './AdaptiveLimit.js';
export { AdaptivePermit } from './adaptiveLanes.js';
export { BudgetLanes, BudgetPermit, covers, type BudgetOccupancy, type BudgetSpec } from './BudgetLane.js';
