// Rate lanes across a fleet (RedisLaneStore.enterRate and pause). Each process queues its own
// waiters in an in-process rate lane (FIFO within a tenant, tenants round-robin); the head of
// the queue asks Redis, and one Lua script decides: admitted now (the admission recorded, GCRA,
// by Redis's own clock, TIME), admitted for a time shortly ahead (reserved: the process lets its
// head go then), or how many ms to wait before asking again. The bucket is debited at admission,
// as if the call started at its slot, which most do (the rate lane is the last thing they wait
// on): such a call costs one script. One whose body has not started within a grace of the lane
// letting it go (it waits in a concurrency lane, a write-ahead) is reported late: Redis then
// keeps it as a reservation (a sorted set, leased, refreshed while it waits) and admits only while
// the bucket covers every reservation not yet started, until the process reports its start (the
// bucket debited from then) or gives it back; the process's own next admissions wait for it too.
// A dead process's reservations end with their lease, so it holds back at most those for a
// lease, never a permit. A pause is written beside the lane's bucket (the
// script honours it) and published, so every process of the fleet pauses its in-process lane too
// (a tool with no rate declared is paused only in process, as there is nothing in Redis to ask).
import { asyncScheduler, type SchedulerLike } from 'rxjs';
import { LaneLostError } from '../../errors.js';
import type { OnGrant } from '../Lane.js';
import { LaneTable, type LanePauseNotice, type Permit } from '../LaneTable.js';
import type { Rate, RateDecider, RateLane } from '../RateLane.js';
import { laneBase } from './keys.js';
import { Pending } from './pending.js';
import { script, type Script } from './scripts.js';

const noop = (): void => undefined;
import { messageOf, unref } from './transport.js';

// One hash per rate lane: `tat` (when the bucket is empty until, Redis ms) and `paused` (until when).
// ARGV: the ms between admissions, how many ms early the burst lets one come, and the horizon:
// an admission due within that many ms is reserved now ('r' and the ms until it: the asker lets
// its head go then, without asking again), so the slots of the steady rate are kept by Redis's
// clock and a late timer or a round trip never thins them. Replies as text ('0': admitted now; a
// number: ask again after that many ms), since Redis would cut a Lua number to an integer.
// KEYS[2]: the lane's calls reported late, not yet started (a sorted set, scored by when each
// lease ends); ARGV[5] the new admission's name, ARGV[7] the burst. The bucket, debited for every
// admission at its slot, must cover every late reservation and the new one: while they fill the
// burst the asker is told to ask again shortly (or sooner, when one of its own starts or comes
// back), since when they start is not known. An admission's reply ends with
// '@<slot>~<before>~<after>' (Redis ms): its slot, and `tat` before and after it was debited, so
// a report of it may take the debit back while nothing was admitted since (`tat` still <after>).
// ARGV[4] '1': a lane that learns its pace (the rule of PaceLearner, RateLane.ts): its interval
// is the pace kept in the hash (`pace`, calls a second; none yet: every call at once), grown by
// one a second per second since it last changed; each admission is counted (`count`) in the
// current cycle (`cycle`), and an admission's reply ends with '|<cycle>|<pace>'. Its hash is kept
// an hour after its last use, so what it learned outlives a quiet spell.
const admitScript: Script = script(String.raw`
local K = KEYS[1]
local interval, tolerance, horizon = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local learn = ARGV[4] == '1'
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local pace = 0
if learn then
  pace = tonumber(redis.call('HGET', K, 'pace') or '0')
  if pace > 0 then
    local grew = tonumber(redis.call('HGET', K, 'grew') or '0')
    if now - grew >= 1000 then
      pace = pace + math.floor((now - grew) / 1000)
      redis.call('HSET', K, 'pace', string.format('%.3f', pace), 'grew', string.format('%.3f', now))
    end
    interval = 1000 / pace
  else
    interval = 0
  end
  tolerance = 0
  horizon = 20
  if interval >= 40 then horizon = math.min(interval / 2, 1000) end
end
local function keep(ms)
  if learn then ms = math.max(ms, 3600000) end
  redis.call('PEXPIRE', K, ms)
end
local function counted(reply)
  if not learn then return reply end
  redis.call('HINCRBY', K, 'count', 1)
  return reply .. '|' .. (redis.call('HGET', K, 'cycle') or '0') .. '|' .. string.format('%.3f', pace)
end
local O, burst = KEYS[2], tonumber(ARGV[7])
redis.call('ZREMRANGEBYSCORE', O, '-inf', now)
local out = redis.call('ZCARD', O)
local tat = tonumber(redis.call('HGET', K, 'tat') or '0')
-- The admission debits the bucket from its slot: '@<slot>~<tat before>~<tat after>'.
local function debit(slot)
  local before = string.format('%.3f', math.max(tat, now))
  tat = math.max(tat, now) + interval
  local after = string.format('%.3f', tat)
  redis.call('HSET', K, 'tat', after)
  keep(math.ceil(tat - now) + 1000)
  return '@' .. string.format('%.3f', slot) .. '~' .. before .. '~' .. after
end
local paused = tonumber(redis.call('HGET', K, 'paused') or '0')
if paused > 0 then
  -- A pause ends at the steady rate, without a burst: the bucket is empty when it ends.
  tat = math.max(tat, paused + tolerance)
  redis.call('HDEL', K, 'paused')
  redis.call('HSET', K, 'tat', string.format('%.3f', tat))
end
keep(math.ceil(math.max(tat, now) - now) + 1000)
if learn then burst = 1 end
if interval > 0 and out >= burst then
  -- Every slot the burst has is reserved: ask again once one may have started.
  return string.format('%.3f', math.max(1, math.min(interval / 2, 250)))
end
local at = math.max(tat, now) + out * interval - tolerance
if at > now then
  if at - now <= horizon then
    return counted('r' .. string.format('%.3f', at - now) .. debit(at))
  end
  -- Never '0.000': that reads as admitted.
  return string.format('%.3f', math.max(0.001, at - now - horizon))
end
return counted('0' .. debit(now))
`);

// A learning lane's pause (ARGV: the pause's end, Redis ms), when a new one: not one more refusal
// of the same window (the last pause has ended, 'since' <= now). The pace is what went through
// since the last pause ended (admitted, less the refused call that set this one off) over the
// time from then to this one's end; nothing through halves the pace before. A new cycle begins.
const learnOnPause = String.raw`
local function learnPace(untilMs, now)
  local since = tonumber(redis.call('HGET', K, 'since') or '0')
  if since > now then return end
  if since > 0 and untilMs > since then
    local through = tonumber(redis.call('HGET', K, 'count') or '0') - 1
    local before = tonumber(redis.call('HGET', K, 'pace') or '0')
    local ms = untilMs - since
    local pace = math.max(before / 2, 1000 / ms)
    if through > 0 then pace = through * 1000 / ms end
    redis.call('HSET', K, 'pace', string.format('%.3f', pace), 'through', through, 'ms', string.format('%.3f', ms), 'before', string.format('%.3f', before))
  end
  redis.call('HSET', K, 'since', string.format('%.3f', untilMs), 'grew', string.format('%.3f', untilMs), 'count', 0)
  redis.call('HINCRBY', K, 'cycle', 1)
end
`;

// A call a learning lane admitted in cycle ARGV[1] never started: not counted in that cycle, or
// taken back from the pace the last cycle gave (it is often told after that cycle's pause began).
const notThroughScript: Script = script(String.raw`
local K = KEYS[1]
local cycle = tonumber(redis.call('HGET', K, 'cycle') or '0')
local of = tonumber(ARGV[1])
if of == cycle then
  if tonumber(redis.call('HGET', K, 'count') or '0') > 0 then redis.call('HINCRBY', K, 'count', -1) end
elseif of == cycle - 1 then
  local ms = tonumber(redis.call('HGET', K, 'ms') or '0')
  if ms > 0 then
    local through = tonumber(redis.call('HGET', K, 'through') or '0') - 1
    local pace = math.max(tonumber(redis.call('HGET', K, 'before') or '0') / 2, 1000 / ms)
    if through > 0 then pace = through * 1000 / ms end
    redis.call('HSET', K, 'through', through, 'pace', string.format('%.3f', pace))
  end
end
return 1
`);

// Takes back an admission's debit (ARGV[i]: `tat` before it, ARGV[i + 1]: after it) while nothing
// was admitted since: `tat` still reads as it left it. Else the debit stays (fewer calls, never more).
const takeBack = String.raw`
local function takeBack(i)
  if ARGV[i + 1] ~= '' and redis.call('HGET', K, 'tat') == ARGV[i + 1] then redis.call('HSET', K, 'tat', ARGV[i]) end
end
`;

// A call not started within its grace (ARGV: its name, its lease in ms, `tat` before and after
// its admission): a reservation until it starts or comes back, and its debit taken back if nothing
// was admitted since (the reservation holds its slot now).
const lateScript: Script = script(String.raw`
local K, O = KEYS[1], KEYS[2]
${takeBack}
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local lease = tonumber(ARGV[2])
redis.call('ZADD', O, now + lease, ARGV[1])
redis.call('PEXPIRE', O, lease + 1000)
takeBack(3)
return 1
`);

// A late call started (ARGV: its name, when it started by the server's clock as the process
// reckons it, the ms between admissions, '1' for a learning lane; then, for one whose lateness was
// not reported, `tat` before and after its admission, else ''): the bucket is debited from then
// (never later than now), whether or not its lease ran out meanwhile.
const startedScript: Script = script(String.raw`
local K, O = KEYS[1], KEYS[2]
${takeBack}
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
redis.call('ZREM', O, ARGV[1])
takeBack(5)
local interval = tonumber(ARGV[3])
if ARGV[4] == '1' then
  local pace = tonumber(redis.call('HGET', K, 'pace') or '0')
  interval = 0
  if pace > 0 then interval = 1000 / pace end
end
local at = math.min(tonumber(ARGV[2]), now)
local tat = math.max(tonumber(redis.call('HGET', K, 'tat') or '0'), at) + interval
redis.call('HSET', K, 'tat', string.format('%.3f', tat))
local ttl = redis.call('PTTL', K)
if ttl < math.ceil(tat - now) + 1000 then redis.call('PEXPIRE', K, math.ceil(tat - now) + 1000) end
return 1
`);

// An admission given back (ARGV: its name, then `tat` before and after it, or '' for one reported
// late, whose debit is counted already): its call never started.
const returnedScript: Script = script(String.raw`
local K, O = KEYS[1], KEYS[2]
${takeBack}
redis.call('ZREM', O, ARGV[1])
takeBack(2)
return 1
`);

// The leases of reservations whose calls still wait (ARGV: the lease in ms, then their names),
// renewed from now; one whose lease already ran out is not brought back.
const renewScript: Script = script(String.raw`
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local lease = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', 'GT', now + lease, ARGV[i]) end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], lease + 1000) end
return 1
`);

// ARGV: how many ms to pause, the channel, the message, and '1' for a lane that learns its pace
// (learnOnPause). Keeps the later of two pauses.
const pauseScript: Script = script(String.raw`
local K = KEYS[1]
${learnOnPause}
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local untilMs = now + tonumber(ARGV[1])
if ARGV[4] == '1' then learnPace(untilMs, now) end
local old = tonumber(redis.call('HGET', K, 'paused') or '0')
if untilMs > old then redis.call('HSET', K, 'paused', string.format('%.3f', untilMs)) end
local ttl = redis.call('PTTL', K)
if ttl < math.ceil(untilMs - now) + 1000 then redis.call('PEXPIRE', K, math.ceil(untilMs - now) + 1000) end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
`);

/**
 * How far ahead (ms) a process may hold an admission at a steady `interval`: at least 20 ms (a
 * busy process's timer lag and a round trip), so at a fast rate the next slot is held by someone
 * while the current one is used; half an interval for a slower one (at most a second), so an
 * admission is decided at least half an interval after the one before it was let go, by when a
 * late report of that one has reached Redis. An admission held by a process whose head left, with
 * nobody behind it, goes unused: at most one per process and lane, never an extra call.
 */
export function reservationHorizon(interval: number): number {
  return interval >= 40 ? Math.min(interval / 2, 1000) : 20;
}

/**
 * How long (ms) a call the lane let go may take to start and still count as started at its slot:
 * a quarter of an interval, a quarter of `rateJitterMs` (the room left for a call reaching its
 * partner late, which this uses), and 5 ms at most. 0 with no jitter room: every call not started
 * as the lane lets it go is reported late.
 */
export function startGrace(interval: number, rateJitterMs: number): number {
  return Math.min(interval > 0 ? interval / 4 : Number.POSITIVE_INFINITY, rateJitterMs / 4, 5);
}

// An admission Redis made for this process, until its call starts or comes back: its lane, `tat`
// before and after it was debited, when the lane let it go (performance.now()), the timer of its
// grace, and whether it was reported late.
interface Admission {
  readonly key: string;
  readonly before: string;
  readonly after: string;
  letGo: number | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  late: boolean;
}

/** What the fleet's rate lanes need of their store. */
export interface FleetRateHost {
  readonly prefix: string;
  readonly processId: string;
  /** How late an admitted call may reach its partner (ms): admissions are spaced to leave room for it (options.ts). */
  readonly rateJitterMs: number;
  /** How long a reservation not yet started outlives its process's last word (ms). */
  readonly leaseMs: number;
  /** Hears `channel` of the fleet's news from now on (news.ts). */
  listen(channel: string, heard: (text: string) => void): void;
  /** Runs a script, bounded by the store's timeout. */
  ask(script: Script, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /** Where pauses are told (the store's pauses$). */
  notice(notice: LanePauseNotice): void;
}

// A pause as published: which lane, how long, why, and who paused it.
interface PauseMessage {
  readonly key: string;
  readonly seconds: number;
  readonly reason: string;
  readonly from: string;
}

function pauseMessageOf(text: string): PauseMessage | undefined {
  try {
    const message = JSON.parse(text) as Partial<PauseMessage>;
    const { key, seconds, reason, from } = message;
    if (typeof key !== 'string' || typeof seconds !== 'number' || !(seconds > 0) || typeof reason !== 'string' || typeof from !== 'string') return undefined;
    return { key, seconds, reason, from };
  } catch {
    return undefined;
  }
}

export class FleetRates implements RateDecider {
  // This process's queues, whose rated lanes ask Redis (this object decides for them).
  readonly table: LaneTable;
  // Listening to the fleet's pauses, from the lanes' first use.
  private listening = false;
  // The clock pauses heard from the fleet are kept on: the last one a caller gave (asyncScheduler before any).
  private scheduler: SchedulerLike | undefined = undefined;
  // Questions to Redis not yet answered.
  private readonly pending = new Pending();
  private closed = false;
  // This process's admissions whose calls have not started, by name.
  private readonly admissions = new Map<string, Admission>();
  // How many of them were reported late, by lane key (Redis keeps those as reservations).
  private readonly lateByLane = new Map<string, number>();
  private made = 0;
  // Renews the leases of those reported late every third of a lease while there are any.
  private renewing: ReturnType<typeof setInterval> | undefined = undefined;

  constructor(private readonly host: FleetRateHost) {
    this.table = new LaneTable({ rateDecider: this });
    this.table.pauses$.subscribe((notice) => host.notice(notice));
  }

  private get channel(): string {
    return `${this.host.prefix}rate-pauses`;
  }

  enterRate(key: string, rate: Rate | undefined, onGrant: OnGrant, party: string, scheduler: SchedulerLike): Permit {
    this.listen(scheduler);
    return this.table.enterRate(key, rate, onGrant, party, scheduler);
  }

  paused(key: string): boolean {
    this.listen(undefined);
    return this.table.paused(key);
  }

  /** Has rate lane `key` learn its pace, across the fleet: Redis keeps and applies it (admitScript). */
  learnRate(key: string, scheduler: SchedulerLike): void {
    this.listen(scheduler);
    this.table.learnRate(key, scheduler);
  }

  /** Pauses lane `key` here at once, and across the fleet through Redis. */
  pause(key: string, seconds: number, reason: string, scheduler: SchedulerLike): void {
    this.listen(scheduler);
    // Written first: the lane's head asks Redis again as it pauses here, and that question must
    // find the pause (the scripts run in the order they are sent).
    if (!this.closed) {
      const message: PauseMessage = { key, seconds, reason, from: this.host.processId };
      const learning = this.table.learning(key) ? '1' : '0';
      const written = this.host.ask(pauseScript, [this.keyOf(key)], [String(seconds * 1000), this.channel, JSON.stringify(message), learning]);
      this.pending.track(written.then(noop, () => {
        // Not reached: this process is paused all the same, and the fleet's admissions go on being
        // decided by Redis (a pause that could not be written there is this process's alone).
      }));
    }
    this.table.pause(key, seconds, reason, scheduler);
  }

  /** @internal (RateDecider) The head of `lane` asks Redis whether it may go. */
  ask(lane: RateLane): void {
    if (this.closed) {
      lane.failed(new LaneLostError(lane.key, `rate lane ${lane.key} cannot be asked: its RedisLaneStore was closed`));
      return;
    }
    const { interval, tolerance } = this.spacingOf(lane);
    const id = `${this.host.processId}:${(++this.made).toString(36)}`;
    const burst = lane.rate?.burst ?? 1;
    const args = [interval.toFixed(3), tolerance.toFixed(3), reservationHorizon(interval).toFixed(3), lane.learning ? '1' : '0', id, String(this.host.leaseMs), String(burst)];
    const answered = this.host.ask(admitScript, this.keysOf(lane.key), args).then(
      (reply) => {
        // '0@<slot>~<before>~<after>', 'r<ms>@<slot>~<before>~<after>' or '<ms>'; a learning lane's admission adds '|<cycle>|<pace>'.
        const [answer = '', cycle, pace] = typeof reply === 'string' ? reply.split('|') : [];
        const [decision = '', debit] = answer.split('@');
        const [slotText, before = '', after = ''] = debit === undefined ? [] : debit.split('~');
        const reserved = decision.startsWith('r');
        const wait = Number(reserved ? decision.slice(1) : decision);
        const slot = Number(slotText);
        if (decision === '' || !Number.isFinite(wait) || wait < 0 || (slotText !== undefined && (!Number.isFinite(slot) || before === '' || after === ''))) {
          lane.failed(new LaneLostError(lane.key, `rate lane ${lane.key}: Redis answered ${String(reply)}, not a wait in ms`));
          return;
        }
        if (cycle !== undefined) lane.learned(Number(cycle), Number(pace));
        if (slotText === undefined) {
          lane.decided(wait);
          return;
        }
        this.admissions.set(id, { key: lane.key, before, after, letGo: undefined, timer: undefined, late: false });
        if (reserved) lane.reserved(wait, id, slot);
        else lane.decided(wait, id, slot);
      },
      (error: unknown) => lane.failed(new LaneLostError(lane.key, `rate lane ${lane.key} could not ask Redis: ${messageOf(error)}`)),
    );
    this.pending.track(answered);
  }

  // The lane's spacing, widened so a send up to rateJitterMs late cannot put one more call into a
  // window of perSeconds than its limit (a learned pace measures what went through, jitter and all).
  private spacingOf(lane: RateLane): { readonly interval: number; readonly tolerance: number } {
    const { rate } = lane;
    const jitter = this.host.rateJitterMs;
    if (rate === undefined || jitter === 0) return lane.spacing;
    const interval = (rate.perSeconds * 1000 + jitter) / rate.limit;
    return { interval, tolerance: ((rate.burst ?? 1) - 1) * interval };
  }

  /** @internal (RateDecider) The call admitted as `admission` was let go and has not started: past its grace, it is reported late. */
  waiting(lane: RateLane, admission: string): void {
    const entry = this.admissions.get(admission);
    if (entry === undefined || entry.letGo !== undefined || this.closed) return;
    entry.letGo = performance.now();
    entry.timer = unref(setTimeout(() => this.late(lane, admission), this.graceOf(lane)));
  }

  /** @internal (RateDecider) This process's calls of `lane` reported late and not started fill its burst: its head waits for one. */
  holds(lane: RateLane): boolean {
    const late = this.lateByLane.get(lane.key) ?? 0;
    if (late === 0) return false;
    // As the admission script: a lane that spaces nothing (a learning lane with no pace yet) holds no one back.
    if (lane.learning) return lane.occupancy().limit > 0;
    return late >= (lane.rate?.burst ?? 1);
  }

  // Not started within its grace: Redis keeps it as a reservation until it starts or comes back.
  private late(lane: RateLane, admission: string): void {
    const entry = this.admissions.get(admission);
    if (entry === undefined || entry.late || this.closed) return;
    entry.timer = undefined;
    entry.late = true;
    this.lateByLane.set(entry.key, (this.lateByLane.get(entry.key) ?? 0) + 1);
    this.renewing ??= unref(setInterval(() => this.renew(), Math.max(1, Math.floor(this.host.leaseMs / 3))));
    const args = [admission, String(this.host.leaseMs), entry.before, entry.after];
    this.pending.track(this.host.ask(lateScript, this.keysOf(lane.key), args).then(noop, () => {
      // Not reached: the call counts from its slot, as if on time (its start report, when it comes, debits the bucket again).
    }));
  }

  // An admission leaves this process's books (its call started, or it came back): what it was.
  private forget(admission: string): Admission | undefined {
    const entry = this.admissions.get(admission);
    if (entry === undefined) return undefined;
    this.admissions.delete(admission);
    clearTimeout(entry.timer);
    entry.timer = undefined;
    if (entry.late) {
      const late = (this.lateByLane.get(entry.key) ?? 1) - 1;
      if (late > 0) this.lateByLane.set(entry.key, late);
      else this.lateByLane.delete(entry.key);
    }
    return entry;
  }

  // The grace of a call of `lane` (startGrace), at its spacing.
  private graceOf(lane: RateLane): number {
    return startGrace(this.spacingOf(lane).interval, this.host.rateJitterMs);
  }

  /**
   * @internal (RateDecider) The call admitted as `admission` started, `lateMs` after its slot: one
   * that started within its grace was counted at its slot already, and nothing is sent; one
   * reported late (or found late only now, its grace timer held up) has Redis debit the bucket
   * from its start.
   */
  started(lane: RateLane, admission: string, slot: number, lateMs: number): void {
    const entry = this.forget(admission);
    if (entry === undefined || this.closed) return;
    const overran = !entry.late && entry.letGo !== undefined && performance.now() - entry.letGo > this.graceOf(lane);
    if (!entry.late && !overran) return;
    const { interval } = this.spacingOf(lane);
    const args = [admission, (slot + lateMs).toFixed(3), interval.toFixed(3), lane.learning ? '1' : '0', entry.late ? '' : entry.before, entry.late ? '' : entry.after];
    this.pending.track(this.host.ask(startedScript, this.keysOf(lane.key), args).then(noop, () => {
      // Not reached: the bucket is not debited for this start, and its reservation ends with its lease.
    }));
  }

  /** @internal (RateDecider) The admission `admission` goes unused: Redis forgets its reservation, or takes its debit back while nothing was admitted since. */
  returned(lane: RateLane, admission: string): void {
    const entry = this.forget(admission);
    if (entry === undefined || this.closed) return;
    const args = entry.late ? [admission, '', ''] : [admission, entry.before, entry.after];
    this.pending.track(this.host.ask(returnedScript, this.keysOf(lane.key), args).then(noop, () => {
      // Not reached: a reservation ends with its lease; a debit stays (fewer calls, never more).
    }));
  }

  private renew(): void {
    if (this.lateByLane.size === 0 || this.closed) {
      clearInterval(this.renewing);
      this.renewing = undefined;
      return;
    }
    const byLane = new Map<string, string[]>();
    for (const [id, { key, late }] of this.admissions) {
      if (!late) continue;
      const ids = byLane.get(key);
      if (ids === undefined) byLane.set(key, [id]);
      else ids.push(id);
    }
    for (const [key, ids] of byLane) {
      this.pending.track(this.host.ask(renewScript, [this.keysOf(key)[1]!], [String(this.host.leaseMs), ...ids]).then(noop, () => {
        // Not reached: the reservations end with their leases unless the next renewal comes first.
      }));
    }
  }

  /** @internal (RateDecider) A call learning lane `lane` admitted in `cycle` never started: Redis does not count it. */
  notThrough(lane: RateLane, cycle: number): void {
    if (this.closed) return;
    this.pending.track(this.host.ask(notThroughScript, [this.keyOf(lane.key)], [String(cycle)]).then(noop, () => {
      // Not reached: the pace learned counts one call too many, until the next pause.
    }));
  }

  /** Resolves once every question sent to Redis has its answer. */
  idle(): Promise<void> {
    return this.pending.idle();
  }

  /** No more questions, and no pause heard (the store closes the news connection). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.renewing);
    this.renewing = undefined;
    for (const entry of this.admissions.values()) clearTimeout(entry.timer);
    this.admissions.clear();
    this.lateByLane.clear();
    await this.idle();
  }

  private keyOf(key: string): string {
    return `${laneBase(this.host.prefix, key)}:rate`;
  }

  // The lane's bucket and its reservations not yet started (one hash tag: one slot of a Cluster).
  private keysOf(key: string): string[] {
    const base = this.keyOf(key);
    return [base, `${base}:o`];
  }

  // Hears the fleet's pauses from the first use on (a failed subscription leaves this process to
  // its own pauses, and to Redis's answers for lanes that have a rate).
  private listen(scheduler: SchedulerLike | undefined): void {
    if (scheduler !== undefined) this.scheduler = scheduler;
    if (this.listening || this.closed) return;
    this.listening = true;
    this.host.listen(this.channel, (text) => this.heard(text));
  }

  private heard(text: string): void {
    const message = pauseMessageOf(text);
    if (message === undefined || message.from === this.host.processId || this.closed) return;
    this.table.pause(message.key, message.seconds, message.reason, this.scheduler ?? asyncScheduler);
  }
}
