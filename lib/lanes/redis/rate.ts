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
import type { Rate, RateLane } from '../RateLane.js';
import type { RateDecider } from '../RatePermit.js';
import { laneBase } from './keys.js';
import { Pending } from './pending.js';
import type { Script } from './scripts.js';
import { admitScript, lateScript, notThroughScript, pauseScript, renewScript, returnedScript, startedScript } from './rateScripts.js';
import { messageOf, unref } from './transport.js';

const noop = (): void => undefined;

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
