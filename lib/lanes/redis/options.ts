// RedisLaneStore's options: what each means, and how they are checked and turned into the
// store's settings (a bad one is a ConfigError naming the field).
import { describeValue } from '../../config/index.js';
import { ConfigError } from '../../errors.js';
import { redisConnection, type RedisConnection, type RedisLaneClient } from './connection.js';
import type { LaneMeter } from './metrics.js';

export interface RedisLaneStoreOptions {
  /** A node-redis client (recommended) or an ioredis client, connected; or a RedisConnection. The store never closes it. */
  readonly client: RedisLaneClient;
  /** Put before every key and channel the store uses. Default `'agent-lanes:'`. No `{` or `}` (they make the hash tag). */
  readonly prefix?: string;
  /**
   * How long a permit (or a place in a queue) outlives its process's last sign of life: a
   * process killed with its permits held frees them within this. Refreshed every third of it.
   * Default 10.
   */
  readonly leaseSeconds?: number;
  /** How long Redis may take to answer before it counts as unreachable. Default a quarter of the lease, at most 2. */
  readonly timeoutSeconds?: number;
  /**
   * What calls on shared lanes do while Redis cannot be reached: `'fail'` (the default: they
   * fail, never started, with the reason), or `'in-process'`: they run in this process's own
   * lanes, with the same limits per process, until Redis answers again (reported on `activity$`).
   */
  readonly whenUnreachable?: 'fail' | 'in-process';
  /**
   * An OpenTelemetry meter (`metrics.getMeter(...)` from `@opentelemetry/api`): the lanes' waits,
   * holders, waiters, grants, losses, retries and time unreachable (docs/fleet.md). A meter that
   * throws is switched off for the store.
   */
  readonly meter?: LaneMeter;
  /**
   * How much later (ms) than another a call admitted by a rate lane may reach its partner: a
   * busy process's late timer, a round trip, the network. Rate lanes across the fleet space their
   * admissions as if each window of `perSeconds` were this much longer, so a late send cannot
   * put one more call into a partner's window than `limit`. It costs `rateJitterMs / (perSeconds *
   * 1000)` of the rate: 2 % of a rate per second, 0.03 % of one per minute. Default 20; 0 for
   * admissions at exactly the rate.
   */
  readonly rateJitterMs?: number;
}

/** The options, checked, and what the store derives from them. */
export interface StoreSettings {
  readonly connection: RedisConnection;
  readonly prefix: string;
  readonly leaseSeconds: number;
  readonly timeoutSeconds: number;
  readonly whenUnreachable: 'fail' | 'in-process';
  readonly leaseMs: number;
  /** The lease in milliseconds, as scripts take it. */
  readonly leaseText: string;
  /** How long Redis keeps a script's answer for a retry (twice the timeout), as scripts take it. */
  readonly keepText: string;
  readonly timeoutMs: number;
  /** The heartbeat's period: a third of the lease. */
  readonly beatMs: number;
  readonly rateJitterMs: number;
}

const optionFields = ['client', 'prefix', 'leaseSeconds', 'timeoutSeconds', 'whenUnreachable', 'meter', 'rateJitterMs'];

function positiveSeconds(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || !(value > 0)) {
    throw new ConfigError(field, `${field} must be a positive number of seconds, got ${describeValue(value)}`);
  }
  return value;
}

export function storeSettings(options: RedisLaneStoreOptions): StoreSettings {
  if (options === null || typeof options !== 'object') {
    throw new ConfigError('RedisLaneStore', `RedisLaneStore options must be an object, got ${describeValue(options)}`);
  }
  for (const field of Object.keys(options)) {
    if (!optionFields.includes(field)) throw new ConfigError(field, `RedisLaneStore has no option ${JSON.stringify(field)}; its options: ${optionFields.join(', ')}`);
  }
  const { client, prefix = 'agent-lanes:', whenUnreachable = 'fail' } = options;
  const connection = redisConnection(client);
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new ConfigError('prefix', `prefix must be a string without { or } (they make the hash tag), got ${describeValue(prefix)}`);
  }
  if (whenUnreachable !== 'fail' && whenUnreachable !== 'in-process') {
    throw new ConfigError('whenUnreachable', `whenUnreachable must be 'fail' or 'in-process', got ${describeValue(whenUnreachable)}`);
  }
  const leaseSeconds = positiveSeconds(options.leaseSeconds, 'leaseSeconds') ?? 10;
  const timeoutSeconds = positiveSeconds(options.timeoutSeconds, 'timeoutSeconds') ?? Math.min(2, leaseSeconds / 4);
  if (timeoutSeconds * 3 > leaseSeconds) {
    throw new ConfigError('timeoutSeconds', `timeoutSeconds must be at most a third of leaseSeconds (${leaseSeconds}), so a lease outlives a failed refresh; got ${timeoutSeconds}`);
  }
  const leaseMs = Math.max(1, Math.round(leaseSeconds * 1000));
  const { rateJitterMs = 20 } = options;
  if (typeof rateJitterMs !== 'number' || !Number.isFinite(rateJitterMs) || rateJitterMs < 0) {
    throw new ConfigError('rateJitterMs', `rateJitterMs must be a finite number of ms, at least 0, got ${describeValue(rateJitterMs)}`);
  }
  return {
    connection,
    prefix,
    leaseSeconds,
    timeoutSeconds,
    whenUnreachable,
    leaseMs,
    leaseText: String(leaseMs),
    keepText: String(2 * Math.max(1, Math.round(timeoutSeconds * 1000))),
    timeoutMs: Math.max(1, Math.round(timeoutSeconds * 1000)),
    beatMs: Math.max(1, Math.floor(leaseMs / 3)),
    rateJitterMs,
  };
}

/** Refuses a request `RedisLaneStore.enter` cannot take, with a TypeError naming the argument. */
export function checkEntry(key: unknown, limit: number, party: unknown): void {
  if (typeof key !== 'string' || key === '') throw new TypeError(`RedisLaneStore.enter: key must be a non-empty string, got ${describeValue(key)}`);
  if (!(limit >= 1)) throw new TypeError(`Expected a lane limit from 1 up, got ${limit}`);
  if (typeof party !== 'string') throw new TypeError(`RedisLaneStore.enter: party must be a string, got ${describeValue(party)}`);
}
