// agent-lanes/redis: the shared lanes across a fleet of processes, on Redis (docs/fleet.md).
// The clients are met by their shape (node-redis 4+ or ioredis 5+): this entry imports neither.
export {
  RedisLaneStore,
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
} from './lanes/redis/index.js';
