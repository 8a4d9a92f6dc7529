// RedisLaneStore: the runner's shared lanes (per tool, per tenant, identical arguments) shared by
// a fleet of processes through Redis, with the in-process lanes' rules: never more than `limit`
// permits of a lane held across the fleet, FIFO within a party, round-robin between parties.
// Every change is one Lua script (scripts.ts); waiters live in Redis with leases of their own;
// grants wake waiters by pub/sub (sharded where the server has it), and a heartbeat that keeps
// the leases also catches a missed wake-up. A dead process's permits and places come back within
// one lease. Here is the process's side: what it asks of Redis, what it tells the engine, and
// when (its requests, as it keeps them, are in requests.ts; how scripts reach Redis, and are sent
// again after a failed attempt, in transport.ts; the wake-ups in wakeUps.ts; what explains a
// lost lease in epoch.ts; the metrics in metrics.ts).
import { createHash, randomBytes } from 'node:crypto';
import { Subject, type Observable } from 'rxjs';
import { describeValue } from '../../config/index.js';
import { ConfigError, LaneLostError } from '../../errors.js';
import type { LaneChange, LaneOccupancy, OnGrant } from '../Lane.js';
import { LaneTable, type LaneStore, type LaneStoreNotice, type Permit } from '../LaneTable.js';
import { redisConnection, type RedisConnection, type RedisLaneClient } from './connection.js';
import { RedisEpoch } from './epoch.js';
import { LaneMetrics, type LaneLossReason, type LaneMeter } from './metrics.js';
import { ACQUIRE, FleetLane, FleetTicket, HOLDING, LEAVE, LEFT, LOCAL, LOST, Op, PENDING, PROBE, REFRESH, refused, tell, tellLost, WAITING } from './requests.js';
import { acquireScript, leaveScript, refreshScript, snapshotScript, type Script } from './scripts.js';
import { isUnreachable, messageOf, ScriptTransport, unref } from './transport.js';
import { WakeUps } from './wakeUps.js';

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
   * fail, never dispatched, with the reason), or `'in-process'`: they run in this process's own
   * lanes, with the same limits per process, until Redis answers again (reported on `activity$`).
   */
  readonly whenUnreachable?: 'fail' | 'in-process';
  /**
   * An OpenTelemetry meter (`metrics.getMeter(...)` from `@opentelemetry/api`): the lanes' waits,
   * holders, waiters, grants, losses, retries and time unreachable (docs/fleet.md). A meter that
   * throws is switched off for the store.
   */
  readonly meter?: LaneMeter;
}

/** One lane as the whole fleet holds it (`RedisLaneStore.snapshot()`). */
export interface FleetLaneOccupancy extends LaneOccupancy {
  /** The parties with someone waiting, in the order they will be served. */
  readonly parties: readonly string[];
}

const optionFields = ['client', 'prefix', 'leaseSeconds', 'timeoutSeconds', 'whenUnreachable', 'meter'];

// A lane's name as a hash tag: the characters that would end the tag (or be read as an escape)
// are escaped, and a very long name (an identical-arguments lane) is hashed.
function tagOf(key: string): string {
  const escaped = key.replace(/[%{}]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return escaped.length <= 120 ? escaped : `sha1:${createHash('sha1').update(key).digest('hex')}`;
}

function keysOf(base: string): string[] {
  return [`${base}:h`, `${base}:w`, `${base}:q`, `${base}:p`, `${base}:r`, `${base}:m`, `${base}:d`, `${base}:e`];
}

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

function positiveSeconds(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || !(value > 0)) {
    throw new ConfigError(field, `${field} must be a positive number of seconds, got ${describeValue(value)}`);
  }
  return value;
}

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
 * await lanes.close(); // at shutdown, before the client is closed
 * ```
 */
export class RedisLaneStore implements LaneStore {
  readonly prefix: string;
  readonly leaseSeconds: number;
  readonly timeoutSeconds: number;
  readonly whenUnreachable: 'fail' | 'in-process';
  private readonly connection: RedisConnection;
  private readonly leaseMs: number;
  private readonly leaseText: string;
  private readonly keepText: string;
  private readonly timeoutMs: number;
  private readonly beatMs: number;
  // This process's name in request ids, and how many requests it made.
  private readonly processId = randomBytes(6).toString('base64url');
  private made = 0;
  // Lanes with requests of this process, by key, and by wake-up channel.
  private readonly lanes = new Map<string, FleetLane>();
  private readonly byChannel = new Map<string, FleetLane>();
  private readonly wakeUps: WakeUps;
  // How scripts reach Redis, and how many were ever sent.
  private readonly transport: ScriptTransport;
  private sent = 0;
  private readonly epoch: RedisEpoch;
  private readonly metrics: LaneMetrics;
  private heartbeat: ReturnType<typeof setInterval> | undefined = undefined;
  // Why Redis counts as unreachable, while it does, and since when (performance.now()).
  private down: string | undefined = undefined;
  private downSince = 0;
  // Meanwhile: the timer of the next probe, and whether one is unanswered.
  private probeTimer: ReturnType<typeof setTimeout> | undefined = undefined;
  private probing = false;
  // The in-process lanes used while Redis is unreachable (whenUnreachable: 'in-process').
  private local: LaneTable | undefined = undefined;
  private changes: Subject<LaneChange> | undefined = undefined;
  private readonly notices = new Subject<LaneStoreNotice>();
  private closed = false;
  private closing: Promise<void> | undefined = undefined;
  // A lane no process uses, for probing Redis while it is unreachable.
  private readonly probeLane: FleetLane;

  /** What the store says of itself: Redis unreachable, the fall back to in-process lanes, Redis back. */
  readonly notices$: Observable<LaneStoreNotice> = this.notices.asObservable();

  constructor(options: RedisLaneStoreOptions) {
    if (options === null || typeof options !== 'object') {
      throw new ConfigError('RedisLaneStore', `RedisLaneStore options must be an object, got ${describeValue(options)}`);
    }
    for (const field of Object.keys(options)) {
      if (!optionFields.includes(field)) throw new ConfigError(field, `RedisLaneStore has no option ${JSON.stringify(field)}; its options: ${optionFields.join(', ')}`);
    }
    const { client, prefix = 'agent-lanes:', whenUnreachable = 'fail' } = options;
    this.connection = redisConnection(client);
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
    this.prefix = prefix;
    this.leaseSeconds = leaseSeconds;
    this.timeoutSeconds = timeoutSeconds;
    this.whenUnreachable = whenUnreachable;
    this.leaseMs = Math.max(1, Math.round(leaseSeconds * 1000));
    this.leaseText = String(this.leaseMs);
    this.keepText = String(2 * Math.max(1, Math.round(timeoutSeconds * 1000)));
    this.timeoutMs = Math.max(1, Math.round(timeoutSeconds * 1000));
    this.beatMs = Math.max(1, Math.floor(this.leaseMs / 3));
    const base = `${prefix}{probe}`;
    this.probeLane = new FleetLane('probe', 1, keysOf(base), `${base}:g`);
    this.transport = new ScriptTransport(this.connection, this.timeoutMs, timeoutSeconds, this);
    this.epoch = new RedisEpoch(prefix, (script, keys, args) => this.transport.ask(script, keys, args));
    this.metrics = new LaneMetrics(options.meter, () => this.occupancy());
    this.wakeUps = new WakeUps(this.connection, {
      laneOn: (channel) => this.byChannel.get(channel),
      lanes: () => this.lanes.values(),
      sent: () => this.sent,
      closed: () => this.closed,
      grant: (ticket, fence) => this.grant(ticket, fence),
      watchLeases: (lane, redisNow, firstEnd) => this.watchLeases(lane, redisNow, firstEnd),
      sync: (lane) => {
        if (this.lanes.get(lane.key) === lane && lane.waiters > 0) this.refresh(lane, this.confirmedOf(lane));
      },
    });
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
    if (typeof key !== 'string' || key === '') throw new TypeError(`RedisLaneStore.enter: key must be a non-empty string, got ${describeValue(key)}`);
    if (!(limit >= 1)) throw new TypeError(`Expected a lane limit from 1 up, got ${limit}`);
    if (typeof party !== 'string') throw new TypeError(`RedisLaneStore.enter: party must be a string, got ${describeValue(party)}`);
    if (this.closed) return refused(onGrant, new LaneLostError(key, `lane ${key} cannot be asked: its RedisLaneStore was closed`));
    if (this.down !== undefined) {
      if (this.whenUnreachable === 'in-process') return this.localLanes().enter(key, limit, onGrant, party);
      return refused(onGrant, new LaneLostError(key, this.unreachableWhy(key, this.down)));
    }
    this.epoch.firstContact();
    const lane = this.lanes.get(key) ?? this.laneFor(key, limit);
    const now = performance.now();
    const ticket = new FleetTicket(this, lane, `${this.processId}:${(++this.made).toString(36)}`, party, onGrant, now, now + this.leaseMs);
    lane.tickets.set(ticket.id, ticket);
    lane.waiters++;
    this.changed(lane, 'queued', party);
    const limitText = limit === Infinity ? '9007199254740991' : String(limit);
    this.send(ACQUIRE, acquireScript, lane, [ticket.id, party, limitText, this.leaseText, lane.channel, this.wakeUps.sharded, key], ticket);
    return ticket;
  }

  /** This process's lanes (busy or waited on), with its own holders and waiters. */
  occupancy(): LaneOccupancy[] {
    const lanes = [...this.lanes.values()].map((lane): LaneOccupancy => ({ key: lane.key, limit: lane.limit, holders: lane.holders, waiters: lane.waiters }));
    if (this.local === undefined || this.local.size === 0) return lanes;
    const byKey = new Map(lanes.map((lane) => [lane.key, lane]));
    for (const lane of this.local.occupancy()) {
      const fleet = byKey.get(lane.key);
      byKey.set(lane.key, fleet === undefined ? lane : { ...fleet, holders: fleet.holders + lane.holders, waiters: fleet.waiters + lane.waiters });
    }
    return [...byKey.values()];
  }

  /**
   * The lanes as the whole fleet holds them now: `keys` (lane keys, `tool:search`), or every
   * lane under this store's prefix (found with SCAN: a standalone server; on a Cluster, name the keys).
   * Idle lanes are left out; expired leases are not counted.
   */
  async snapshot(keys?: readonly string[]): Promise<FleetLaneOccupancy[]> {
    const bases: string[] = [];
    if (keys !== undefined) for (const key of keys) bases.push(`${this.prefix}{${tagOf(key)}}`);
    else {
      const { scan } = this.connection;
      if (scan === undefined) throw new TypeError('RedisLaneStore.snapshot() without lane keys needs SCAN, which this client cannot do across a Cluster: name the lane keys');
      for await (const name of scan.call(this.connection, `${globEscape(this.prefix)}{*}:m`)) bases.push(name.slice(0, -2));
    }
    const answers = await Promise.all(bases.map((base) => this.transport.ask(snapshotScript, keysOf(base), [])));
    const lanes: FleetLaneOccupancy[] = [];
    for (const answer of answers) {
      const [key, limit, holders, waiters, ...parties] = (answer as unknown[]).map(String);
      if (key === '' || key === undefined) continue;
      const lane = { key, limit: Number(limit), holders: Number(holders), waiters: Number(waiters), parties };
      if (lane.holders > 0 || lane.waiters > 0) lanes.push(lane);
    }
    return lanes;
  }

  /**
   * Stops the store: its requests are lost (a caller still waiting fails, never dispatched; a
   * body still running is told its lease is gone), their permits go back to the fleet, and the
   * store's own subscriber connection closes. The client handed in stays open.
   */
  close(): Promise<void> {
    if (this.closing !== undefined) return this.closing;
    this.closed = true;
    if (this.heartbeat !== undefined) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    if (this.probeTimer !== undefined) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    this.transport.close();
    for (const lane of [...this.lanes.values()]) {
      for (const ticket of [...lane.tickets.values()]) {
        const what = ticket.state === HOLDING ? `its lease on ${lane.key}` : `its place in the queue of ${lane.key}`;
        this.lose(ticket, new LaneLostError(lane.key, `${what} was lost (the RedisLaneStore was closed)`), true, 'closed');
      }
    }
    if (this.down !== undefined) this.metrics.unreachableFor(performance.now() - this.downSince);
    this.metrics.close();
    this.closing = this.idle().then(async () => {
      await this.wakeUps.close();
      this.notices.complete();
      this.changes?.complete();
    });
    return this.closing;
  }

  /** @internal Resolves once every script sent to Redis has its answer (or timed out). */
  idle(): Promise<void> {
    return this.transport.idle();
  }

  /** @internal use `permit.leave()` */
  leave(ticket: FleetTicket): void {
    const { lane } = ticket;
    switch (ticket.state) {
      case HOLDING:
        lane.holders--;
        ticket.state = LEFT;
        this.changed(lane, 'released', ticket.party);
        break;
      case PENDING:
      case WAITING:
        lane.waiters--;
        ticket.state = LEFT;
        this.changed(lane, 'withdrawn', ticket.party);
        break;
      case LOCAL:
        ticket.state = LEFT;
        // Left inside its in-process grant, before the permit was stored: moveLocal gives it back.
        ticket.local?.leave();
        return;
      default:
        return;
    }
    lane.tickets.delete(ticket.id);
    // Not yet answered: the leave goes once Redis answers, so it never overtakes the request.
    if (ticket.confirmed) this.sendLeave(ticket);
    this.dropIfIdle(lane);
  }

  // A lane of this process's own, made on its first request.
  private laneFor(key: string, limit: number): FleetLane {
    const base = `${this.prefix}{${tagOf(key)}}`;
    const lane = new FleetLane(key, limit, keysOf(base), `${base}:g`);
    this.lanes.set(key, lane);
    this.byChannel.set(lane.channel, lane);
    this.heartbeat ??= unref(setInterval(() => this.beat(), this.beatMs));
    return lane;
  }

  private dropIfIdle(lane: FleetLane): void {
    if (lane.tickets.size > 0 || this.lanes.get(lane.key) !== lane) return;
    this.lanes.delete(lane.key);
    this.byChannel.delete(lane.channel);
    if (lane.reclaimTimer !== undefined) clearTimeout(lane.reclaimTimer);
    lane.reclaimTimer = undefined;
    // Its subscription, if any, ends at the next heartbeat, unless the lane is back by then.
  }

  private changed(lane: FleetLane, change: LaneChange['change'], party: string): void {
    if (this.changes?.observed !== true) return;
    this.changes.next({ key: lane.key, limit: lane.limit, holders: lane.holders, waiters: lane.waiters, change, party });
  }

  private localLanes(): LaneTable {
    if (this.local === undefined) {
      this.local = new LaneTable();
      // The in-process lanes' changes are this store's, for whoever watches it.
      this.local.changes$.subscribe((change) => {
        if (this.changes?.observed === true) this.changes.next(change);
      });
    }
    return this.local;
  }

  // Sending scripts, and their answers.

  private send(kind: number, script: Script, lane: FleetLane, args: string[], subject: Op['subject']): void {
    const seq = ++this.sent;
    // The request id (safe to repeat), and how long Redis keeps its answer: twice the timeout
    // within which it may be sent again (answers kept longer would pile up on a busy lane).
    args.unshift(`${this.processId}:r${seq.toString(36)}`, this.keepText);
    this.transport.send(new Op(kind, lane, subject, script, args, performance.now(), seq));
  }

  /** @internal An attempt failed on the way; the transport sends it again. */
  retried(op: Op): void {
    this.metrics.retried(op.lane.key);
  }

  /** @internal The answer to a script. */
  answered(op: Op, answer: unknown): void {
    if (this.down !== undefined) this.restored();
    if (op.kind === PROBE) {
      this.probing = false;
      return;
    }
    if (!Array.isArray(answer) || answer.length < 3) {
      this.failed(op, new Error(`Redis answered a lane script with ${describeValue(answer)}`));
      return;
    }
    const count = Number(answer[2]);
    const out = 3 + count;
    switch (op.kind) {
      case ACQUIRE: {
        // Grants made before this request was queued come first, as they did in Redis.
        this.news(op.lane, answer, count);
        const ticket = op.subject as FleetTicket;
        const state = String(answer[out]);
        ticket.confirmed = true;
        if (ticket.state === PENDING || ticket.state === WAITING || ticket.state === HOLDING) {
          ticket.validUntil = op.sentAt + this.leaseMs;
          if (state === 'h') this.grant(ticket, String(answer[out + 1]));
          else if (ticket.state === PENDING) {
            ticket.state = WAITING;
            this.wakeUps.listen(ticket.lane, op);
          }
        } else if (state !== '') this.sendLeave(ticket); // left, lost or moved before Redis answered
        break;
      }
      case REFRESH: {
        const tickets = op.subject as readonly FleetTicket[];
        const gone: FleetTicket[] = [];
        for (let i = 0; i < tickets.length; i++) {
          const ticket = tickets[i]!;
          if (ticket.state !== WAITING && ticket.state !== HOLDING) continue;
          const state = String(answer[out + i]);
          if (state === '') {
            gone.push(ticket);
            continue;
          }
          ticket.validUntil = op.sentAt + this.leaseMs;
          // A grant whose wake-up never came.
          if (state[0] === 'h' && ticket.state === WAITING) this.grant(ticket, state.slice(1));
        }
        if (gone.length > 0) this.expired(gone);
        this.news(op.lane, answer, count);
        break;
      }
      default:
        this.news(op.lane, answer, count);
    }
  }

  // An answer that came after its script was given up for lost: a request Redis took after all
  // is handed back. (Leases would free it within one anyway.)
  /** @internal */
  late(op: Op, answer: unknown): void {
    if (op.kind !== ACQUIRE || !Array.isArray(answer)) return;
    const ticket = op.subject as FleetTicket;
    const state: unknown = answer[3 + Number(answer[2])];
    if (ticket.state === HOLDING) ticket.confirmed = true;
    else if ((state === 'h' || state === 'w') && ticket.state !== PENDING && ticket.state !== WAITING) this.sendLeave(ticket);
  }

  /** @internal A script failed for good: an error answer, or none within the timeout. */
  failed(op: Op, error: unknown): void {
    if (op.kind === PROBE) this.probing = false;
    if (!this.closed && isUnreachable(error)) this.unreachable(messageOf(error));
    switch (op.kind) {
      case ACQUIRE: {
        const ticket = op.subject as FleetTicket;
        // Granted by a wake-up before the answer failed: Redis took the request after all.
        if (ticket.state === HOLDING) ticket.confirmed = true;
        else if (ticket.state === PENDING || ticket.state === WAITING) {
          this.lose(ticket, new LaneLostError(ticket.lane.key, `lane ${ticket.lane.key} could not be asked for a permit (${messageOf(error)})`), false, reasonOf(error));
        }
        break;
      }
      case REFRESH: {
        // A lease that runs out before the next heartbeat can try again is lost now.
        const horizon = performance.now() + this.beatMs;
        for (const ticket of op.subject as readonly FleetTicket[]) {
          if (ticket.state === HOLDING && ticket.validUntil <= horizon) {
            this.lose(ticket, new LaneLostError(ticket.lane.key, `its lease on ${ticket.lane.key} was lost (it could not be refreshed before it ran out: ${messageOf(error)})`), true, reasonOf(error));
          } else if (ticket.state === WAITING && !isUnreachable(error)) {
            this.lose(ticket, new LaneLostError(ticket.lane.key, `its place in the queue of ${ticket.lane.key} was lost (${messageOf(error)})`), true, 'error');
          }
        }
        break;
      }
    }
  }

  // Grants a script made (its answer, or a wake-up): this process's requests among them are told.
  private news(lane: FleetLane, answer: readonly unknown[], count: number): void {
    const current = this.lanes.get(lane.key);
    if (current === undefined) return;
    for (let i = 3; i < 3 + count; i += 2) {
      const ticket = current.tickets.get(String(answer[i]));
      if (ticket !== undefined) this.grant(ticket, String(answer[i + 1]));
    }
    this.watchLeases(current, String(answer[0]), String(answer[1]));
  }

  private grant(ticket: FleetTicket, fence: string): void {
    if (ticket.state !== PENDING && ticket.state !== WAITING) return;
    const { lane } = ticket;
    ticket.state = HOLDING;
    ticket.fence = fence;
    lane.waiters--;
    lane.holders++;
    this.changed(lane, 'granted', ticket.party);
    this.metrics.granted(lane.key, performance.now() - ticket.askedAt);
    tell(ticket.onGrant);
  }

  // A request that is no more: its caller is told (a waiting call fails, never dispatched; a
  // running one learns its lease is gone), and what Redis may still hold for it goes back.
  private lose(ticket: FleetTicket, error: LaneLostError, handBack: boolean, reason: LaneLossReason): void {
    const { lane, state } = ticket;
    if (state === HOLDING) lane.holders--;
    else if (state === PENDING || state === WAITING) lane.waiters--;
    else return;
    ticket.state = LOST;
    lane.tickets.delete(ticket.id);
    this.changed(lane, 'lost', ticket.party);
    this.metrics.lost(lane.key, reason);
    if (handBack && ticket.confirmed) this.sendLeave(ticket);
    this.dropIfIdle(lane);
    tellLost(ticket.onGrant, error);
  }

  // Requests a refresh found gone: their lease ran out and went to others (this process was
  // paused, or cut off, past it), or Redis lost its data; the epoch tells which.
  private expired(tickets: readonly FleetTicket[]): void {
    void this.epoch.check().then((verdict) => {
      for (const ticket of tickets) {
        const { key } = ticket.lane;
        const what = ticket.state === HOLDING ? `its lease on ${key}` : `its place in the queue of ${key}`;
        const why =
          verdict === 'data-lost'
            ? 'Redis lost its data (it restarted without persistence, was flushed, or failed over to a replica that had not caught up): every lane in it was gone'
            : `the lease ran out before it was refreshed and went to another request: this process was paused, or could not reach Redis, for longer than the ${this.leaseSeconds} s lease`;
        this.lose(ticket, new LaneLostError(key, `${what} was lost (${why})`), false, verdict === 'data-lost' ? 'data_lost' : 'lease_expired');
      }
    });
  }

  private sendLeave(ticket: FleetTicket): void {
    this.send(LEAVE, leaveScript, ticket.lane, [ticket.id, ticket.lane.channel, this.wakeUps.sharded], ticket);
  }

  // One script per lane, and per 500 requests of it: a script holds Redis while it runs.
  private refresh(lane: FleetLane, tickets: readonly FleetTicket[]): void {
    for (let from = 0; from === 0 || from < tickets.length; from += 500) {
      const some = tickets.length <= 500 ? tickets : tickets.slice(from, from + 500);
      const args = [this.leaseText, lane.channel, this.wakeUps.sharded];
      for (const ticket of some) args.push(ticket.id);
      this.send(REFRESH, refreshScript, lane, args, some);
    }
  }

  // The requests of a lane whose leases the heartbeat keeps: those Redis has answered for.
  private confirmedOf(lane: FleetLane): FleetTicket[] {
    const tickets: FleetTicket[] = [];
    for (const ticket of lane.tickets.values()) if (ticket.confirmed && (ticket.state === WAITING || ticket.state === HOLDING)) tickets.push(ticket);
    return tickets;
  }

  // Every third of a lease: the leases of this process's requests are extended (and missed
  // wake-ups caught), subscriptions of lanes it left end, and an unreachable Redis is probed.
  private beat(): void {
    let asked = false;
    for (const lane of this.lanes.values()) {
      const tickets = this.confirmedOf(lane);
      if (tickets.length === 0) continue;
      this.refresh(lane, tickets);
      asked = true;
    }
    this.wakeUps.prune();
    if (this.down !== undefined && !asked) this.probe();
    if (this.lanes.size === 0 && !this.wakeUps.active && this.down === undefined && this.heartbeat !== undefined) {
      clearInterval(this.heartbeat);
      this.heartbeat = undefined;
    }
  }

  // When the earliest holder's lease ends, a process with someone waiting runs a refresh: if
  // that holder is dead, its permit comes back then, not a heartbeat later.
  private watchLeases(lane: FleetLane, redisNow: string, firstEnd: string): void {
    if (lane.waiters === 0 || firstEnd === '' || this.closed) return;
    const delay = Math.max(1, Number(firstEnd) - Number(redisNow) + 1);
    if (!Number.isFinite(delay)) return;
    const at = performance.now() + delay;
    if (lane.reclaimTimer !== undefined && lane.reclaimAt <= at) return;
    if (lane.reclaimTimer !== undefined) clearTimeout(lane.reclaimTimer);
    lane.reclaimAt = at;
    lane.reclaimTimer = unref(
      setTimeout(() => {
        lane.reclaimTimer = undefined;
        lane.reclaimAt = Infinity;
        if (this.lanes.get(lane.key) === lane && lane.waiters > 0) this.refresh(lane, this.confirmedOf(lane));
      }, delay),
    );
  }

  // Redis unreachable, and back.

  private unreachableWhy(key: string, why: string): string {
    return `lane ${key} is shared over Redis, which is unreachable (${why})`;
  }

  private unreachable(why: string): void {
    // Only the first failure tells and sweeps: while Redis counts as unreachable, no request
    // waits in it (new ones fail at once, or go to the in-process lanes).
    if (this.down !== undefined) return;
    this.down = why;
    this.downSince = performance.now();
    if (!this.closed) this.probeSoon();
    this.heartbeat ??= unref(setInterval(() => this.beat(), this.beatMs));
    const inProcess = this.whenUnreachable === 'in-process';
    this.notices.next({
      type: 'lane-store',
      status: inProcess ? 'in-process' : 'unreachable',
      reason: inProcess ? `Redis is unreachable (${why}): shared lanes run in this process's own lanes, with the same limits per process` : `Redis is unreachable (${why}): calls on shared lanes fail, never dispatched`,
      at: Date.now(),
    });
    // Requests not yet granted go no further in Redis: they fail, or move to the in-process lanes.
    for (const lane of [...this.lanes.values()]) {
      for (const ticket of [...lane.tickets.values()]) {
        if (ticket.state !== PENDING && ticket.state !== WAITING) continue;
        if (this.whenUnreachable === 'in-process') this.moveLocal(ticket);
        else this.lose(ticket, new LaneLostError(lane.key, this.unreachableWhy(lane.key, why)), true, 'unreachable');
      }
    }
  }

  private moveLocal(ticket: FleetTicket): void {
    const { lane } = ticket;
    lane.waiters--;
    ticket.state = LOCAL;
    lane.tickets.delete(ticket.id);
    this.changed(lane, 'withdrawn', ticket.party);
    if (ticket.confirmed) this.sendLeave(ticket);
    this.dropIfIdle(lane);
    const local = this.localLanes().enter(lane.key, lane.limit, ticket, ticket.party);
    if (ticket.state === LOCAL) ticket.local = local;
    else local.leave();
  }

  // While Redis is unreachable it is asked every quarter second (one probe at a time), not only
  // at the heartbeat: calls are refused for no longer than the outage.
  private probeSoon(): void {
    this.probeTimer = unref(
      setTimeout(() => {
        this.probeTimer = undefined;
        if (this.down === undefined || this.closed) return;
        this.probe();
        this.probeSoon();
      }, 250),
    );
  }

  private probe(): void {
    if (this.probing) return;
    this.probing = true;
    this.send(PROBE, snapshotScript, this.probeLane, [], undefined);
  }

  private restored(): void {
    const was = this.down;
    this.down = undefined;
    if (this.probeTimer !== undefined) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    this.metrics.unreachableFor(performance.now() - this.downSince);
    this.notices.next({ type: 'lane-store', status: 'restored', reason: `Redis answers again (it was unreachable: ${was})`, at: Date.now() });
  }
}

// A loss's reason for the metrics: Redis out of reach, or an error it answered.
function reasonOf(error: unknown): LaneLossReason {
  return isUnreachable(error) ? 'unreachable' : 'error';
}
