// The fleet's adaptive lanes: what the limit learned lives in one Redis hash per lane (limit,
// credit, usual time, generation) beside the lane's keys and under its hash tag, changed by one
// Lua script with the in-process rule (AdaptiveLimit.ts), step for step. The script also writes
// the lane's own limit and grants the waiters a larger one lets in, publishing the grants as
// every change does, so every process of the fleet sees one limit; a change is also published
// on the fleet's news (news.ts), so every process's lanes and activity$ hear of it.
import { randomBytes } from 'node:crypto';
import { DECREASE_FACTOR, initialLimit, LATENCY_TOLERANCE, LATENCY_WEIGHT, type AdaptiveBounds, type LaneSignal, type LimitCause, type LimitChange } from '../AdaptiveLimit.js';
import { grant, type OnGrant } from '../Lane.js';
import type { LaneLimitNotice, Permit } from '../LaneTable.js';
import type { AskRedis } from './budget.js';
import { Pending } from './pending.js';
import { keysOf, laneBase } from './keys.js';
import { change } from './scripts.js';
import type { FleetLane } from './requests.js';

/** The key of lane `key`'s adaptive state: the lane's ninth key, which its acquire reads when it makes the lane. */
export function adaptiveKeyOf(prefix: string, key: string): string {
  return `${laneBase(prefix, key)}:a`;
}

/**
 * What a holder told, applied to the limit. argv (after the request id and how long its answer
 * is kept): signal, how long the permit was held (ms), the generation it was granted in, min,
 * max, initial, channel, sharded, then the news channel, the lane's key and the process's id
 * (a change is published there). Out: the limit, the limit before, the cause ('' for none), the generation.
 */
export const adaptiveScript = change(String.raw`
local A = KEYS[9]
local signal, held, gen = argv[1], tonumber(argv[2]), tonumber(argv[3])
local min, max = tonumber(argv[4]), tonumber(argv[5])
local limit = tonumber(redis.call('HGET', A, 'limit') or argv[6])
local credit = tonumber(redis.call('HGET', A, 'credit') or '0')
local usual = tonumber(redis.call('HGET', A, 'usual') or '-1')
local generation = tonumber(redis.call('HGET', A, 'generation') or '0')
local previous, cause = limit, ''
local slow = usual >= 0 and held > usual * ${LATENCY_TOLERANCE} and held - usual >= 1
if signal ~= 'overload' then
  if usual < 0 then usual = held else usual = usual + (held - usual) * ${LATENCY_WEIGHT} end
end
if signal == 'overload' or slow then
  if gen >= generation then
    credit = 0
    generation = generation + 1
    limit = math.max(min, math.floor(limit * ${DECREASE_FACTOR}))
    if signal == 'overload' then cause = 'overload' else cause = 'latency' end
  end
elseif signal == 'ok' then
  credit = credit + 1
  if credit >= limit then
    credit = 0
    if limit < max then
      limit = limit + 1
      cause = 'success'
    end
  end
end
limit = math.max(min, math.min(max, limit))
redis.call('HSET', A, 'limit', limit, 'credit', credit, 'usual', tostring(usual), 'generation', generation)
if limit ~= previous and redis.call('HGET', M, 'limit') then redis.call('HSET', M, 'limit', limit) end
if limit ~= previous then
  redis.call('PUBLISH', argv[9], cjson.encode({ key = argv[10], limit = limit, previous = previous, cause = cause, generation = generation, from = argv[11] }))
end
reclaim()
drain()
return finish(argv[7], argv[8], 0, { tostring(limit), tostring(previous), cause, tostring(generation) })
`);

/** What the fleet's adaptive lanes need of their store. */
export interface AdaptiveHost {
  readonly prefix: string;
  readonly keepText: string;
  readonly processId: string;
  ask: AskRedis;
  /** Hears `channel` of the fleet's news from now on (news.ts). */
  listen(channel: string, heard: (text: string) => void): void;
  /** True while Redis is known to be unreachable: a holder's report is then not sent. */
  down(): boolean;
  /** Where a change of a limit made by another process is told (the store's limits$). */
  limitNotice(notice: LaneLimitNotice): void;
  /** '1' when wake-ups go by sharded pub/sub. */
  sharded(): string;
  /** This process's lane under `key`, if it has one. */
  lane(key: string): FleetLane | undefined;
}

/**
 * A request for a permit of a fleet adaptive lane: the lane's own request, told of the grant
 * first (to note when, and the generation of the limit this process last heard of); its
 * `report(signal)` sends the holder's news to Redis, once.
 */
export class FleetAdaptivePermit implements Permit {
  inner: Permit | undefined = undefined;
  private grantedAt = -1;
  private generation = 0;
  private reported = false;

  constructor(
    private readonly lanes: FleetAdaptiveLanes,
    readonly key: string,
    readonly bounds: AdaptiveBounds,
    readonly onGrant: OnGrant,
  ) {}

  get holding(): boolean {
    return this.inner?.holding ?? this.grantedAt >= 0;
  }

  get fence(): string | undefined {
    return this.inner?.fence;
  }

  granted(): void {
    this.grantedAt = performance.now();
    this.generation = this.lanes.generationOf(this.key);
    grant(this.onGrant);
  }

  lost(error: Error): void {
    const { lost } = this.onGrant as { lost?: unknown };
    if (typeof lost === 'function') lost.call(this.onGrant, error);
  }

  leave(): void {
    this.inner?.leave();
  }

  report(signal: LaneSignal): void {
    if (this.reported || this.grantedAt < 0 || signal === 'stopped' || signal === 'unstarted') return;
    this.reported = true;
    this.lanes.report(this, signal, Math.round(performance.now() - this.grantedAt), this.generation);
  }
}

// A change of a limit as published by the adaptive script.
interface LimitMessage {
  readonly key: string;
  readonly limit: number;
  readonly previous: number;
  readonly cause: LimitCause;
  readonly generation: number;
  readonly from: string;
}

const causes: ReadonlySet<string> = new Set<LimitCause>(['overload', 'latency', 'success']);

function limitMessageOf(text: string): LimitMessage | undefined {
  try {
    const { key, limit, previous, cause, generation, from } = JSON.parse(text) as Partial<LimitMessage>;
    if (typeof key !== 'string' || typeof from !== 'string' || typeof cause !== 'string' || !causes.has(cause)) return undefined;
    if (![limit, previous, generation].every((n) => typeof n === 'number' && Number.isInteger(n) && n >= 0)) return undefined;
    return { key, limit: limit!, previous: previous!, cause, generation: generation!, from };
  } catch {
    return undefined;
  }
}

const notTold = (): void => undefined;

/** The adaptive lanes of a RedisLaneStore: the limit and generation each last answered with, or was heard to take. */
export class FleetAdaptiveLanes {
  private readonly known = new Map<string, { limit: number; generation: number }>();
  // Each request's id: this store's id, and a count.
  private readonly requestPrefix = randomBytes(6).toString('base64url');
  private made = 0;
  private readonly pending = new Pending();
  private listening = false;

  constructor(private readonly host: AdaptiveHost) {}

  private get channel(): string {
    return `${this.host.prefix}adaptive-limits`;
  }

  /** Hears the fleet's changes of adaptive limits from now on (the first adaptive lane asked for calls it). */
  listen(): void {
    if (this.listening) return;
    this.listening = true;
    this.host.listen(this.channel, (text) => this.heard(text));
  }

  /** The limit this process last heard of for lane `key` (its bounds' start before any answer). */
  limitOf(key: string, bounds: AdaptiveBounds): number {
    return this.known.get(key)?.limit ?? initialLimit(bounds);
  }

  /** The adaptive lanes this process has heard of, with the limit Redis last answered with. */
  list(bounds: ReadonlyMap<string, AdaptiveBounds>): Array<{ readonly key: string; readonly limit: number; readonly min: number; readonly max: number }> {
    return [...bounds].map(([key, { min, max }]) => ({ key, limit: this.limitOf(key, bounds.get(key)!), min, max }));
  }

  generationOf(key: string): number {
    return this.known.get(key)?.generation ?? 0;
  }

  /** @internal Sends what a holder told; a change of the limit is told to its holder. */
  report(permit: FleetAdaptivePermit, signal: LaneSignal, heldMs: number, generation: number): void {
    const { host } = this;
    // Redis unreachable: what this holder saw is not told (the limit the fleet learned stands).
    if (host.down()) return;
    const { key, bounds } = permit;
    const base = laneBase(host.prefix, key);
    const keys = [...keysOf(base), adaptiveKeyOf(host.prefix, key)];
    const args = [
      `${this.requestPrefix}:a${(++this.made).toString(36)}`,
      host.keepText,
      signal,
      String(heldMs),
      String(generation),
      String(bounds.min),
      String(bounds.max),
      String(initialLimit(bounds)),
      `${base}:g`,
      host.sharded(),
      this.channel,
      key,
      host.processId,
    ];
    // A report Redis does not take (it stopped answering, the script failed) is not told either:
    // the limit the fleet learned stands, and nothing of it reaches the call or the process.
    this.pending.track(host.ask(adaptiveScript, keys, args).then((answer) => this.answered(permit, answer), notTold));
  }

  /** Resolves once every script sent has its answer. */
  idle(): Promise<void> {
    return this.pending.idle();
  }

  private answered(permit: FleetAdaptivePermit, answer: unknown): void {
    if (!Array.isArray(answer) || answer.length < 4) throw new TypeError(`an adaptive lane's script answered ${JSON.stringify(answer)}`);
    const tail = answer.slice(-4).map((part) => String(part));
    const [limit, previous, cause, generation] = [Number(tail[0]), Number(tail[1]), tail[2]!, Number(tail[3])];
    // News of a later fall, heard before this answer came back, stands (the news and the answers
    // come on different connections); the holder is still told of its own change.
    const known = this.known.get(permit.key);
    if (known === undefined || generation >= known.generation) {
      this.known.set(permit.key, { limit, generation });
      const lane = this.host.lane(permit.key);
      if (lane !== undefined) lane.limit = limit;
    }
    if (limit === previous || cause === '') return;
    const told: LimitChange = { key: permit.key, limit, previous, cause: cause as LimitCause };
    const { limitChanged } = permit.onGrant as { limitChanged?: unknown };
    if (typeof limitChanged === 'function') limitChanged.call(permit.onGrant, told);
  }

  // Another process moved a limit: this process's lane takes it, and its activity$ hears of it.
  private heard(text: string): void {
    const message = limitMessageOf(text);
    if (message === undefined || message.from === this.host.processId) return;
    const { key, limit, previous, cause, generation } = message;
    const known = this.known.get(key);
    // A generation older than one already known is news overtaken.
    if (known !== undefined && generation < known.generation) return;
    this.known.set(key, { limit, generation });
    const lane = this.host.lane(key);
    if (lane !== undefined) lane.limit = limit;
    this.host.limitNotice({ type: 'lane-limit', key, limit, previous, cause, at: Date.now() });
  }
}
