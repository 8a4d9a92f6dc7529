export { RedisLaneStore, type FleetLaneOccupancy, type RedisLaneStoreOptions } from './RedisLaneStore.js';
export {
  ioredisConnection,
  nodeRedisConnection,
  redisConnection,
  type IoredisClientLike,
  type NodeRedisClientLike,
  type RedisConnection,
  type RedisLaneClient,
  type RedisSubscriber,
} from './connection.js';
export { LaneMetricNames, type LaneLossReason, type LaneMeter, type LaneMetricAttributes, type LaneMetricObservation, type LaneMetricOptions } from './metrics.js';
