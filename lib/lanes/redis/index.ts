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
