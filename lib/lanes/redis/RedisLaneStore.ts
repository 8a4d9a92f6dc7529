// RedisLaneStore: the runner's shared lanes (per tool, per tenant, identical arguments) shared by a
// fleet of processes through Redis, with the in-process lanes' rules: never more than `limit`
// permits of a lane held across the fleet, FIFO within a party, round-robin between parties. Every
// change is one Lua script (scripts.ts); waiters live in Redis with leases of their own; a grant
// wakes the process it is for, alone, by pub/sub (sharded where the server has it), and a heartbeat
// that keeps the leases also catches a missed wake-up. A dead process's permits and places come
// back within one lease. Here is the process's side: what it asks of Redis, what it tells the
// engine, and when. How its parts are put together is in parts.ts; its options in options.ts; its
// requests, as it keeps them, in requests.ts; how scripts reach Redis, and are sent again after a
// failed attempt, in transport.ts; what their replies do in replies.ts; the wake-ups in wakeUps.ts;
// the heartbeat in heartbeat.ts; Redis unreachable, and probed, in outage.ts; the in-process lanes
// meanwhile in fallback.ts; the fleet's snapshot in snapshot.ts; what explains a lost lease in
// epoch.ts; the metrics in metrics.ts; the rate, adaptive and budget lanes in laneKinds.ts.
import { randomBytes } from 'node:crypto';
import { Subject, type Observable, type SchedulerLike } from 'rxjs';
import { LaneLostError } from '../../errors.js';
import type { LaneChange, LaneOccupancy, OnGrant } from '../Lane.js';
import type { LaneLimitNotice, LanePauseNotice, LaneStore, LaneStoreNotice, LaneTable, Permit } from '../LaneTable.js';
import type { Rate } from '../RateLane.js';
import type { RedisConnection } from './connection.js';
import type { RedisEpoch } from './epoch.js';
import type { InProcessFallback } from './fallback.js';
import type { Heartbeat } from './heartbeat.js';
import type { LaneLossReason, LaneMetrics } from './metrics.js';
import { checkEntry, storeSettings, type RedisLaneStoreOptions } from './options.js';
import type { Outage } from './outage.js';
import { storeParts } from './parts.js';
import { ACQUIRE, FleetPermit, HOLDING, LEAVE, Op, PENDING, lostAtOnce, tell, tellLost, WAITING, type FleetLane, type FleetLanes } from './requests.js';
import { acquireScript, leaveScript, type Script } from './scripts.js';
import { fleetSnapshot, type FleetLaneOccupancy } from './snapshot.js';
import type { ScriptTransport } from './transport.js';
import type { WakeUps } from './wakeUps.js';
import type { AdaptiveBounds } from '../AdaptiveLimit.js';
import type { BudgetOccupancy, BudgetSpec } from '../BudgetLane.js';
import type { FleetLaneKinds } from './laneKinds.js';

export type { RedisLaneStoreOptions } from './options.js';
export type { FleetLaneOccupancy } from './snapshot.js';

/**
 * A LaneStore whose lanes are shared by every process that uses the same Redis (and prefix).
 * Hand it to the runner (`new AgentRunner({ ..., lanes: store })`): per-tool, per-tenant and
 * identical-arguments lanes then bound the whole fleet; the turn lane stays in process.
 * `occupancy()` and `changes$` are this process's view; `snapshot()` is the fleet's.
 *
 * A grant comes later, once Redis answers: `enter` returns a permit that is not yet holding.
 * A caller that hands an object with `lost(error)` is told when a permit (or a place in the
 * queue) is lost: its lease ran out before it could be refreshed, or Redis could not be reached.
 * Leases bound load, they do not give mutual exclusion: a process paused past its lease may
 * overlap its successor. Downstreams that must refuse a stale holder check the permit's `fence`
 * (the tool context's `ctx.fence`). See docs/fleet.md.
 *
 * ## Example
 * ```ts
 * const client = await createClient({ url: 'redis://127.0.0.1:6379' }).connect();
 * const lanes = new RedisLaneStore({ client, leaseSeconds: 10 });
 * const runner = new AgentRunner({ provider, tools, concurrency: { perTool: { search: 4 } }, lanes });
 * // at most 4 searches at once across every process with this runner config and this Redis
 * await lanes.close(); // at shutdown, before the client is closed (ends within timeoutSeconds, Redis up or not)
 * ```
 */
export class RedisLaneStore implements LaneStore {
  readonly prefix: string;
  readonly leaseSeconds: number;
  readonly timeoutSeconds: number;
  readonly whenUnreachable: 'fail' | 'in-process';
  private readonly connection: RedisConnection;
  private readonly leaseMs: number;
  private readonly timeoutMs: number;
  private readonly leaseText: string;
  private readonly keepText: string;
  // This process's name in request ids, and how many requests it made.
  private readonly processId = randomBytes(6).toString('base64url');
  private made = 0;
  // Lanes with requests of this process, by key, and by wake-up channel (requests.ts).
  private readonly registry: FleetLanes;
  private readonly lanes: Map<string, FleetLane>;
  private readonly wakeUps: WakeUps;
  // How scripts reach Redis, and how many were ever sent.
  private readonly transport: ScriptTransport;
  private sent = 0;
  private readonly epoch: RedisEpoch;
  private readonly metrics: LaneMetrics;
  private readonly heartbeat: Heartbeat;
  // Redis unreachable, and probed; the in-process lanes used meanwhile (whenUnreachable: 'in-process').
  private readonly outage: Outage;
  private readonly fallback: InProcessFallback;
  private changes: Subject<LaneChange> | undefined = undefined;
  private readonly notices = new Subject<LaneStoreNotice>();
  // Pauses, this process's and the fleet's, and the limits other processes moved (made when first watched).
  private pauses: Subject<LanePauseNotice> | undefined = undefined;
  private limitNews: Subject<LaneLimitNotice> | undefined = undefined;
  private closed = false;
  private closing: Promise<void> | undefined = undefined;
  // The rate, adaptive and budget lanes (laneKinds.ts).
  private readonly kinds: FleetLaneKinds;

  /** What the store says of itself: Redis unreachable, the fall back to in-process lanes, Redis back. */
  readonly notices$: Observable<LaneStoreNotice> = this.notices.asObservable();

  /** Its rate lanes paused, by this process or by another of the fleet. */
  get pauses$(): Observable<LanePauseNotice> {
    return (this.pauses ??= new Subject<LanePauseNotice>()).asObservable();
  }

  /** Its adaptive lanes' limits, moved by another process of the fleet (this process's own moves are told to the call that made them). */
  get limits$(): Observable<LaneLimitNotice> {
    return (this.limitNews ??= new Subject<LaneLimitNotice>()).asObservable();
  }

  constructor(options: RedisLaneStoreOptions) {
    const settings = storeSettings(options);
    this.connection = settings.connection;
    this.prefix = settings.prefix;
    this.leaseSeconds = settings.leaseSeconds;
    this.timeoutSeconds = settings.timeoutSeconds;
    this.whenUnreachable = settings.whenUnreachable;
    this.leaseMs = settings.leaseMs;
    this.timeoutMs = settings.timeoutMs;
    this.leaseText = settings.leaseText;
    this.keepText = settings.keepText;
    const parts = storeParts(settings, options.meter, this.notices, {
      processId: this.processId,
      closed: () => this.closed,
      sent: () => this.sent,
      occupancy: () => this.occupancy(),
      send: (kind, script, lane, args, subject) => this.send(kind, script, lane, args, subject),
      grant: (permit, fence) => this.grant(permit, fence),
      lose: (permit, error, handBack, reason) => this.lose(permit, error, handBack, reason),
      sendLeave: (permit) => this.sendLeave(permit),
      sendAway: (why) => this.sendAway(why),
      changed: (lane, change, party) => this.changed(lane, change, party),
      relay: (change) => {
        if (this.changes?.observed === true) this.changes.next(change);
      },
      enter: (key, limit, onGrant, party) => this.enter(key, limit, onGrant, party),
      pauseNotice: (notice) => this.pauses?.next(notice),
      limitNotice: (notice) => this.limitNews?.next(notice),
    });
    this.registry = parts.registry;
    this.lanes = parts.registry.byKey;
    this.epoch = parts.epoch;
    this.metrics = parts.metrics;
    this.heartbeat = parts.heartbeat;
    this.outage = parts.outage;
    this.fallback = parts.fallback;
    this.wakeUps = parts.wakeUps;
    this.transport = parts.transport;
    this.kinds = parts.kinds;
  }

  /**
   * Asks adaptive lane `key` for a permit: the lane's limit is the fleet's, kept in Redis and
   * moved within `bounds` by what every process's holders report (adaptive.ts).
   */
  enterAdaptive(key: string, bounds: AdaptiveBounds, onGrant: OnGrant, party = ''): Permit {
    return this.kinds.enterAdaptive(key, bounds, onGrant, party);
  }

  /** The adaptive lanes this process has asked, each with the limit Redis last answered with. */
  limits(): Array<{ readonly key: string; readonly limit: number; readonly min: number; readonly max: number }> {
    return this.kinds.limits();
  }

  /** The budgets this process has asked whose window is open, with what it had spent at Redis's last answer. */
  budgets(): BudgetOccupancy[] {
    return this.kinds.budgetList();
  }

  /**
   * Asks budget `key` to cover `amount`: once Redis answers, granted (and spent from the fleet's
   * window) or lost with a BudgetExceededError (budget.ts). Redis unreachable: lost with a
   * LaneLostError, or asked of the in-process lanes when whenUnreachable is 'in-process'.
   */
  enterBudget(key: string, spec: BudgetSpec, amount: number, onGrant: OnGrant, party = ''): Permit {
    return (
      this.unavailable('budget', key, onGrant, (lanes) => lanes.enterBudget(key, spec, amount, onGrant, party)) ??
      this.kinds.enterBudget(key, spec, amount, onGrant, party)
    );
  }

  /** Every queue, grant, release, withdrawal and loss of this process's requests, as it happens. */
  get changes$(): Observable<LaneChange> {
    return (this.changes ??= new Subject<LaneChange>()).asObservable();
  }

  /**
   * Asks lane `key` (made with `limit` permits if no process has it) for a permit, for `party`.
   * The permit is granted later, once Redis answers: `onGrant` (a function, or an object's
   * `granted()`) is told then, and an object's `lost(error)` if the request is lost instead.
   */
  enter(key: string, limit: number, onGrant: OnGrant, party = ''): Permit {
    checkEntry(key, limit, party);
    const unavailable = this.unavailable('lane', key, onGrant, (lanes) => lanes.enter(key, limit, onGrant, party));
    if (unavailable !== undefined) return unavailable;
    this.epoch.firstContact();
    let lane = this.lanes.get(key);
    if (lane === undefined) {
      lane = this.registry.make(key, limit);
      this.heartbeat.start();
    }
    const now = performance.now();
    const permit = new FleetPermit(this, lane, `${this.processId}:${(++this.made).toString(36)}`, party, onGrant, now, now + this.leaseMs);
    lane.permits.set(permit.id, permit);
    lane.waiters++;
    this.changed(lane, 'queued', party);
    const limitText = limit === Infinity ? '9007199254740991' : String(limit);
    this.send(ACQUIRE, acquireScript, lane, [permit.id, party, limitText, this.leaseText, lane.channel, this.wakeUps.sharded, key], permit);
    return permit;
  }

  /**
   * Asks rate lane `key` for an admission at `rate`, decided across the fleet by one script on
   * Redis's clock; this process's waiters queue here (FIFO within a party, parties round-robin)
   * and its head asks Redis, which may reserve it an admission due shortly (rate.ts): a process
   * that dies holds back at most that one, never a permit.
   */
  enterRate(key: string, rate: Rate | undefined, onGrant: OnGrant, party: string, scheduler: SchedulerLike): Permit {
    if (this.closed) return lostAtOnce(onGrant, new LaneLostError(key, `rate lane ${key} cannot be asked: its RedisLaneStore was closed`));
    return this.kinds.enterRate(key, rate, onGrant, party, scheduler);
  }

  /** Lane `key` admits nothing new for `seconds`, in this process at once and across the fleet (Redis, and a message every process hears). */
  pause(key: string, seconds: number, reason: string, scheduler: SchedulerLike): void {
    if (!this.closed) this.kinds.pause(key, seconds, reason, scheduler);
  }

  /** Has rate lane `key` learn its pace across the fleet (an adaptive tool's `pace: true`; rate.ts). */
  learnRate(key: string, scheduler: SchedulerLike): void {
    if (!this.closed) this.kinds.learnRate(key, scheduler);
  }

  /** True while rate lane `key` is paused, as this process knows (its own pauses and those the fleet published). */
  paused(key: string): boolean {
    return this.closed ? false : this.kinds.paused(key);
  }

  // A request the store cannot send now: lost at once when it is closed; Redis unreachable, asked
  // of the in-process lanes (whenUnreachable: 'in-process') or lost. Undefined: send it.
  private unavailable(what: string, key: string, onGrant: OnGrant, inProcess: (lanes: LaneTable) => Permit): Permit | undefined {
    if (this.closed) return lostAtOnce(onGrant, new LaneLostError(key, `${what} ${key} cannot be asked: its RedisLaneStore was closed`));
    const { down } = this.outage;
    if (down === undefined) return undefined;
    if (this.whenUnreachable === 'in-process') return inProcess(this.fallback.lanes());
    return lostAtOnce(onGrant, new LaneLostError(key, this.outage.why(key, down)));
  }

  /** This process's lanes (busy or waited on), with its own holders and waiters, then its rate lanes that matter. */
  occupancy(): LaneOccupancy[] {
    const lanes = [...this.lanes.values()].map((lane): LaneOccupancy => ({ key: lane.key, limit: lane.limit, holders: lane.holders, waiters: lane.waiters }));
    const all = this.fallback.occupancy(lanes);
    return this.kinds.occupancy(all);
  }

  /**
   * The lanes as the whole fleet holds them now: `keys` (lane keys, `tool:search`), or every
   * lane under this store's prefix (found with SCAN: a standalone server; on a Cluster, name the keys).
   * Idle lanes are left out; expired leases are not counted.
   */
  async snapshot(keys?: readonly string[]): Promise<FleetLaneOccupancy[]> {
    return fleetSnapshot(this.prefix, this.connection, this.transport, keys);
  }

  /**
   * Stops the store: its requests are lost (a caller still waiting fails, never started; a
   * body still running is told its lease is gone), their permits go back to the fleet, and the
   * store's own subscriber connections close. It resolves within `timeoutSeconds` whatever Redis
   * does (down, or hanging): a script still unanswered then is given up, and a subscriber
   * connection that has not said goodbye is dropped. It leaves no timer and no connection of its
   * own behind. The client handed in stays open: closing it is the application's, after this
   * (during an outage, node-redis's `destroy()` or ioredis's `disconnect()`: a polite `close()`
   * or `quit()` waits for Redis).
   */
  close(): Promise<void> {
    if (this.closing !== undefined) return this.closing;
    this.closed = true;
    this.heartbeat.stop();
    this.outage.stopProbing();
    this.transport.close();
    this.eachRequest((permit, lane) => {
      const what = permit.state === HOLDING ? `its lease on ${lane.key}` : `its place in the queue of ${lane.key}`;
      this.lose(permit, new LaneLostError(lane.key, `${what} was lost (the RedisLaneStore was closed)`), true, 'closed');
    });
    this.outage.close();
    this.metrics.close();
    // Every request is lost already: the subscriber connections close beside the last answers,
    // each given what is left of the timeout before it is dropped, so the close ends within
    // timeoutSeconds whatever Redis does (scripts in flight are given up by then too).
    const { timeoutMs } = this;
    this.closing = Promise.all([this.idle(), this.kinds.close(timeoutMs), this.wakeUps.close(timeoutMs)]).then(() => {
      this.notices.complete();
      this.pauses?.complete();
      this.limitNews?.complete();
      this.changes?.complete();
    });
    return this.closing;
  }

  /** @internal Resolves once every script sent to Redis has its reply (or timed out). */
  async idle(): Promise<void> {
    await Promise.all([this.transport.idle(), this.kinds.idle()]);
  }

  /** @internal use `permit.leave()` */
  leave(permit: FleetPermit): void {
    const { lane } = permit;
    const change = permit.quit();
    if (change === undefined) return;
    this.changed(lane, change, permit.party);
    // Not yet answered: the leave goes once Redis answers, so it never overtakes the request.
    if (permit.confirmed) this.sendLeave(permit);
    this.registry.dropIfIdle(lane);
  }

  private changed(lane: FleetLane, change: LaneChange['change'], party: string): void {
    if (this.changes?.observed !== true) return;
    this.changes.next({ key: lane.key, limit: lane.limit, holders: lane.holders, waiters: lane.waiters, change, party });
  }

  // Sending scripts (their replies are taken in replies.ts).

  private send(kind: number, script: Script, lane: FleetLane, args: string[], subject: Op['subject']): void {
    const seq = ++this.sent;
    // The request id (safe to repeat), and how long Redis keeps its reply: twice the timeout
    // within which it may be sent again (replies kept longer would pile up on a busy lane).
    args.unshift(`${this.processId}:r${seq.toString(36)}`, this.keepText);
    this.transport.send(new Op(kind, lane, subject, script, args, performance.now(), seq));
  }

  private grant(permit: FleetPermit, fence: string): void {
    if (!permit.take(fence)) return;
    const { lane } = permit;
    this.changed(lane, 'granted', permit.party);
    this.metrics.granted(lane.key, performance.now() - permit.askedAt);
    tell(permit.onGrant);
  }

  // A request that is no more: its caller is told (a waiting call fails, never started; a
  // running one learns its lease is gone), and what Redis may still hold for it goes back.
  private lose(permit: FleetPermit, error: LaneLostError, handBack: boolean, reason: LaneLossReason): void {
    if (!permit.drop()) return;
    const { lane } = permit;
    this.changed(lane, 'lost', permit.party);
    this.metrics.lost(lane.key, reason);
    if (handBack && permit.confirmed) this.sendLeave(permit);
    this.registry.dropIfIdle(lane);
    tellLost(permit.onGrant, error);
  }

  private sendLeave(permit: FleetPermit): void {
    this.send(LEAVE, leaveScript, permit.lane, [permit.id, permit.lane.channel, this.wakeUps.sharded], permit);
  }

  // Redis unreachable: requests not yet granted go no further in Redis: they fail, or move to the
  // in-process lanes.
  private sendAway(why: string): void {
    this.eachRequest((permit, lane) => {
      if (permit.state !== PENDING && permit.state !== WAITING) return;
      if (this.whenUnreachable === 'in-process') this.fallback.move(permit);
      else this.lose(permit, new LaneLostError(lane.key, this.outage.why(lane.key, why)), true, 'unreachable');
    });
  }

  // Every request of this process, lane by lane (the maps copied first: a loss changes them).
  private eachRequest(visit: (permit: FleetPermit, lane: FleetLane) => void): void {
    for (const lane of [...this.lanes.values()]) for (const permit of [...lane.permits.values()]) visit(permit, lane);
  }
}
