// What the fleet lanes need of a Redis client, and the small adapters that give it from the two
// clients in use: node-redis (`redis`, the maintained one, recommended) and ioredis. Neither is
// imported: both are optional peer dependencies, met here by their shapes, so the library loads
// without them and works with whichever the application already has.
import { describeValue } from '../../config/index.js';
import { ConfigError } from '../../errors.js';

/** What the store needs of Redis: scripts (by sha1, or whole), a scan of key names, a subscriber. */
export interface RedisConnection {
  /** EVALSHA: rejects with the server's error, `NOSCRIPT` included, as the client reports it. */
  evalsha(sha1: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /** EVAL: the whole script (Redis caches it, so the next EVALSHA finds it). */
  eval(script: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /** The key names matching a glob pattern (SCAN); absent where the client cannot (a Cluster). */
  scan?(pattern: string): AsyncIterable<string>;
  /** A connection of its own for subscriptions, made when first needed; `onReady` is told of each reconnection. */
  subscriber(onReady: () => void): RedisSubscriber;
  /**
   * False while the client is not connected (it keeps what it is handed until it is). Redis
   * unreachable, the store then sends no probe, so none piles up in the client's queue. Absent:
   * taken as connected.
   */
  ready?(): boolean;
}

/** A connection in subscriber mode. */
export interface RedisSubscriber {
  /** Subscribes to `channel`, sharded (SSUBSCRIBE) or not (SUBSCRIBE); resolves once Redis confirmed. */
  subscribe(channel: string, sharded: boolean, listener: (message: string) => void): Promise<void>;
  unsubscribe(channel: string, sharded: boolean): Promise<void>;
  /** Says goodbye (QUIT) and closes; a connection not up (Redis unreachable) is dropped at once, with no goodbye to wait for. */
  close(): Promise<void>;
  /**
   * Drops the connection at once, without a goodbye, and stops it reconnecting: what the store
   * does when `close()` has not ended within its `timeoutSeconds` (Redis hanging). Optional for
   * a connection of your own: without it, a close that never ends is left behind unwaited.
   */
  destroy?(): void;
}

/**
 * Closes `subscriber` with a goodbye if that ends within `ms`, and drops it (`destroy()`)
 * otherwise: a store's close never waits longer on a Redis that does not answer. Its timer is
 * cleared whichever comes first.
 */
export async function closeWithin(subscriber: RedisSubscriber, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(true), ms);
  });
  const closed = subscriber.close().then(
    () => false,
    // A goodbye that failed leaves the connection to be dropped too.
    () => true,
  );
  const drop = await Promise.race([closed, late]);
  clearTimeout(timer);
  if (drop) subscriber.destroy?.();
}

/** A node-redis client (`createClient()` from `redis`), connected. Only its shape is relied on. */
export interface NodeRedisClientLike {
  evalSha(...args: never[]): unknown;
  duplicate(...args: never[]): unknown;
}

/** An ioredis client (`new Redis()`). Only its shape is relied on. */
export interface IoredisClientLike {
  evalsha(...args: never[]): unknown;
  duplicate(...args: never[]): unknown;
}

/** What `RedisLaneStore` takes as its client: a node-redis or ioredis client, or a connection of your own. */
export type RedisLaneClient = NodeRedisClientLike | IoredisClientLike | RedisConnection;

// The parts of node-redis's client the adapter uses.
interface NodeRedis {
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  duplicate(): NodeRedis;
  /** node-redis 5 and later: the client with other command options (4 has none). */
  withCommandOptions?(options: { readonly timeout: undefined }): NodeRedis;
  connect(): Promise<unknown>;
  readonly isOpen: boolean;
  readonly isReady?: boolean;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  sSubscribe(channel: string, listener: (message: string) => void): Promise<void>;
  sUnsubscribe(channel: string): Promise<void>;
  subscribe(channel: string, listener: (message: string) => void): Promise<void>;
  unsubscribe(channel: string): Promise<void>;
  close?(): Promise<void>;
  quit?(): Promise<unknown>;
  destroy?(): void;
  scanIterator?(options: { MATCH: string; COUNT: number }): AsyncIterable<string | string[]>;
}

// The parts of ioredis's client the adapter uses.
interface Ioredis {
  evalsha(sha1: string, count: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(script: string, count: number, ...keysAndArgs: string[]): Promise<unknown>;
  duplicate(): Ioredis;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  ssubscribe(channel: string): Promise<unknown>;
  sunsubscribe(channel: string): Promise<unknown>;
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  quit(): Promise<unknown>;
  disconnect(): void;
  readonly status: string;
  scan?(cursor: string, ...args: string[]): Promise<[string, string[]]>;
  nodes?: unknown;
}

// A subscriber's errors are the store's to notice (a failed subscription rejects, a lost
// connection shows as missed wake-ups the heartbeat catches); an 'error' event nobody listens
// to would end the process.
const ignore = (): void => undefined;

/** The RedisConnection of a node-redis client (standalone or cluster). */
export function nodeRedisConnection(client: NodeRedisClientLike): RedisConnection {
  const redis = client as unknown as NodeRedis;
  // node-redis 6 puts a timer of its own on every command (its commandOptions.timeout, 5 s unless
  // set: an AbortSignal.timeout a command, which was half the client's CPU a grant in the
  // fleet-scale bench). The store bounds its scripts itself (timeoutSeconds, an attempt that
  // fails on the way sent again), so they go through a view of the client without that timer.
  const scripts = typeof redis.withCommandOptions === 'function' ? redis.withCommandOptions({ timeout: undefined }) : redis;
  return {
    evalsha: (sha1, keys, args) => scripts.evalSha(sha1, { keys: keys as string[], arguments: args as string[] }),
    eval: (source, keys, args) => scripts.eval(source, { keys: keys as string[], arguments: args as string[] }),
    ready: () => redis.isReady !== false,
    scan:
      typeof redis.scanIterator === 'function'
        ? async function* (pattern: string) {
            for await (const page of redis.scanIterator!({ MATCH: pattern, COUNT: 500 })) {
              // node-redis 5 and later yield a page of names at a time; 4 yielded names one by one.
              if (Array.isArray(page)) yield* page;
              else yield page;
            }
          }
        : undefined,
    subscriber(onReady) {
      const sub = redis.duplicate();
      sub.on('error', ignore);
      let readies = 0;
      sub.on('ready', () => {
        if (readies++ > 0) onReady();
      });
      const connected = sub.connect();
      // A connection that cannot be made shows in the subscribe that waits for it.
      connected.catch(ignore);
      // Dropped at once; it reconnects no more. (node-redis before 6 throws on a client already closed.)
      const drop = (): void => {
        try {
          sub.destroy?.();
        } catch {
          // Already closed.
        }
      };
      return {
        async subscribe(channel, sharded, listener) {
          await connected;
          await (sharded ? sub.sSubscribe(channel, listener) : sub.subscribe(channel, listener));
        },
        async unsubscribe(channel, sharded) {
          if (!sub.isOpen) return;
          await (sharded ? sub.sUnsubscribe(channel) : sub.unsubscribe(channel));
        },
        async close() {
          // Not connected (still connecting, or Redis unreachable and the client trying again):
          // nothing to say goodbye to, and a goodbye would wait for the connection for as long as
          // the outage lasts. Dropped now, and again should the connection come up after all.
          if (!sub.isOpen || sub.isReady === false) {
            drop();
            void connected.then(drop, ignore);
            return;
          }
          if (typeof sub.close === 'function') await sub.close();
          else if (typeof sub.quit === 'function') await sub.quit();
          else drop();
        },
        destroy: drop,
      };
    },
  };
}

/** The RedisConnection of an ioredis client (standalone or Cluster). */
export function ioredisConnection(client: IoredisClientLike): RedisConnection {
  const redis = client as unknown as Ioredis;
  const standalone = typeof redis.scan === 'function' && redis.nodes === undefined;
  return {
    evalsha: (sha1, keys, args) => redis.evalsha(sha1, keys.length, ...keys, ...args),
    eval: (source, keys, args) => redis.eval(source, keys.length, ...keys, ...args),
    ready: () => redis.status === 'ready',
    scan: standalone
      ? async function* (pattern: string) {
          let cursor = '0';
          do {
            const [next, names] = await redis.scan!(cursor, 'MATCH', pattern, 'COUNT', '500');
            yield* names;
            cursor = next;
          } while (cursor !== '0');
        }
      : undefined,
    subscriber(onReady) {
      const sub = redis.duplicate();
      const listeners = new Map<string, (message: string) => void>();
      const deliver = (channel: unknown, message: unknown): void => listeners.get(String(channel))?.(String(message));
      sub.on('error', ignore);
      sub.on('message', deliver);
      sub.on('smessage', deliver);
      let readies = 0;
      sub.on('ready', () => {
        if (readies++ > 0) onReady();
      });
      return {
        async subscribe(channel, sharded, listener) {
          listeners.set(channel, listener);
          try {
            await (sharded ? sub.ssubscribe(channel) : sub.subscribe(channel));
          } catch (error) {
            listeners.delete(channel);
            throw error;
          }
        },
        async unsubscribe(channel, sharded) {
          listeners.delete(channel);
          await (sharded ? sub.sunsubscribe(channel) : sub.unsubscribe(channel));
        },
        async close() {
          listeners.clear();
          // Not connected (Redis unreachable, the client trying again): nothing to say goodbye
          // to, and QUIT would wait in the offline queue for as long as the outage lasts.
          if (sub.status !== 'ready') return sub.disconnect();
          try {
            await sub.quit();
          } catch {
            // A connection that went away meanwhile cannot say goodbye: it is dropped.
            sub.disconnect();
          }
        },
        destroy: () => sub.disconnect(),
      };
    },
  };
}

function isConnection(client: object): client is RedisConnection {
  const candidate = client as Partial<RedisConnection>;
  return typeof candidate.evalsha === 'function' && typeof candidate.eval === 'function' && typeof candidate.subscriber === 'function';
}

/** The RedisConnection for `client`: a node-redis or ioredis client, or a connection as it is. */
export function redisConnection(client: RedisLaneClient): RedisConnection {
  if (client !== null && typeof client === 'object') {
    if (isConnection(client)) return client;
    const shape = client as { evalSha?: unknown; evalsha?: unknown; duplicate?: unknown };
    if (typeof shape.evalSha === 'function' && typeof shape.duplicate === 'function') return nodeRedisConnection(client as NodeRedisClientLike);
    if (typeof shape.evalsha === 'function' && typeof shape.duplicate === 'function') return ioredisConnection(client as IoredisClientLike);
  }
  throw new ConfigError(
    'client',
    `client must be a node-redis client (createClient() from 'redis'), an ioredis client, or a RedisConnection, got ${describeValue(client)}`,
  );
}
