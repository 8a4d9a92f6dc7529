// What the fleet store makes of Redis's replies to its scripts (the transport's listener): a
// request queued or granted, grants made for others, leases refreshed or found gone, a script that
// failed for good, and the first reply after an outage.
import { describeValue } from '../../config/index.js';
import { LaneLostError } from '../../errors.js';
import type { RedisEpoch } from './epoch.js';
import type { Heartbeat } from './heartbeat.js';
import type { LaneLossReason, LaneMetrics } from './metrics.js';
import type { Outage } from './outage.js';
import { ACQUIRE, HOLDING, PENDING, PROBE, REFRESH, WAITING, type FleetLane, type FleetPermit, type Op } from './requests.js';
import { isUnreachable, messageOf, type TransportListener } from './transport.js';
import type { WakeUps } from './wakeUps.js';

/** What the replies need of their store. */
export interface ReplyHost {
  /** This process's lanes, by key. */
  readonly lanes: ReadonlyMap<string, FleetLane>;
  readonly leaseMs: number;
  readonly leaseSeconds: number;
  readonly epoch: RedisEpoch;
  readonly metrics: LaneMetrics;
  readonly heartbeat: Heartbeat;
  readonly outage: Outage;
  readonly wakeUps: WakeUps;
  closed(): boolean;
  grant(permit: FleetPermit, fence: string): void;
  lose(permit: FleetPermit, error: LaneLostError, handBack: boolean, reason: LaneLossReason): void;
  sendLeave(permit: FleetPermit): void;
}

export class ScriptReplies implements TransportListener {
  constructor(private readonly host: ReplyHost) {}

  /** An attempt failed on the way; the transport sends it again. */
  retried(op: Op): void {
    this.host.metrics.retried(op.lane.key);
  }

  /** The reply to a script. */
  replied(op: Op, reply: unknown): void {
    if (this.host.outage.down !== undefined) this.host.outage.restored();
    if (op.kind === PROBE) {
      this.host.outage.probed();
      return;
    }
    if (!Array.isArray(reply) || reply.length < 3) {
      this.failed(op, new Error(`Redis answered a lane script with ${describeValue(reply)}`));
      return;
    }
    const count = Number(reply[2]);
    const out = 3 + count;
    switch (op.kind) {
      case ACQUIRE: {
        // Grants made before this request was queued come first, as they did in Redis.
        this.granted(op.lane, reply, count);
        const permit = op.subject as FleetPermit;
        const state = String(reply[out]);
        permit.confirmed = true;
        if (permit.state === PENDING || permit.state === WAITING || permit.state === HOLDING) {
          permit.validUntil = op.sentAt + this.host.leaseMs;
          if (state === 'h') this.host.grant(permit, String(reply[out + 1]));
          else if (permit.state === PENDING) {
            permit.state = WAITING;
            this.host.wakeUps.listen(permit.lane, op);
          }
        } else if (state !== '') this.host.sendLeave(permit); // left, lost or moved before Redis answered
        // The leases are watched once this request is settled: granted at once, it waits for nothing.
        this.watch(op.lane, reply);
        break;
      }
      case REFRESH: {
        const permits = op.subject as readonly FleetPermit[];
        const gone: FleetPermit[] = [];
        for (let i = 0; i < permits.length; i++) {
          const permit = permits[i]!;
          if (permit.state !== WAITING && permit.state !== HOLDING) continue;
          const state = String(reply[out + i]);
          if (state === '') {
            gone.push(permit);
            continue;
          }
          permit.validUntil = op.sentAt + this.host.leaseMs;
          // A grant whose wake-up never came.
          if (state[0] === 'h' && permit.state === WAITING) this.host.grant(permit, state.slice(1));
        }
        if (gone.length > 0) this.expired(gone);
        this.news(op.lane, reply, count);
        break;
      }
      default:
        this.news(op.lane, reply, count);
    }
  }

  /**
   * A reply that came after its script was given up for lost: a request Redis took after all
   * is handed back. (Leases would free it within one anyway.)
   */
  late(op: Op, reply: unknown): void {
    if (op.kind !== ACQUIRE || !Array.isArray(reply)) return;
    const permit = op.subject as FleetPermit;
    const state: unknown = reply[3 + Number(reply[2])];
    if (permit.state === HOLDING) permit.confirmed = true;
    else if ((state === 'h' || state === 'w') && permit.state !== PENDING && permit.state !== WAITING) this.host.sendLeave(permit);
  }

  /** A script failed for good: an error reply, or none within the timeout. */
  failed(op: Op, error: unknown): void {
    if (op.kind === PROBE) this.host.outage.probed();
    if (!this.host.closed() && isUnreachable(error)) this.host.outage.unreachable(messageOf(error));
    switch (op.kind) {
      case ACQUIRE: {
        const permit = op.subject as FleetPermit;
        // Granted by a wake-up before the reply failed: Redis took the request after all.
        if (permit.state === HOLDING) permit.confirmed = true;
        else if (permit.state === PENDING || permit.state === WAITING) {
          this.host.lose(permit, new LaneLostError(permit.lane.key, `lane ${permit.lane.key} could not be asked for a permit (${messageOf(error)})`), false, reasonOf(error));
        }
        break;
      }
      case REFRESH: {
        // A lease that runs out before the next heartbeat can try again is lost now.
        const horizon = performance.now() + this.host.heartbeat.period;
        for (const permit of op.subject as readonly FleetPermit[]) {
          if (permit.state === HOLDING && permit.validUntil <= horizon) {
            this.host.lose(permit, new LaneLostError(permit.lane.key, `its lease on ${permit.lane.key} was lost (it could not be refreshed before it ran out: ${messageOf(error)})`), true, reasonOf(error));
          } else if (permit.state === WAITING && !isUnreachable(error)) {
            this.host.lose(permit, new LaneLostError(permit.lane.key, `its place in the queue of ${permit.lane.key} was lost (${messageOf(error)})`), true, 'error');
          }
        }
        break;
      }
    }
  }

  // Grants a script made (its reply, or a wake-up): this process's requests among them are told,
  // then the earliest lease end is watched.
  private news(lane: FleetLane, reply: readonly unknown[], count: number): void {
    this.granted(lane, reply, count);
    this.watch(lane, reply);
  }

  private granted(lane: FleetLane, reply: readonly unknown[], count: number): void {
    const current = this.host.lanes.get(lane.key);
    if (current === undefined) return;
    for (let i = 3; i < 3 + count; i += 2) {
      const permit = current.permits.get(String(reply[i]));
      if (permit !== undefined) this.host.grant(permit, String(reply[i + 1]));
    }
  }

  // A refresh when the earliest holder's lease ends, if this process still has someone waiting on the lane.
  private watch(lane: FleetLane, reply: readonly unknown[]): void {
    const current = this.host.lanes.get(lane.key);
    if (current !== undefined) this.host.heartbeat.watchLeases(current, String(reply[0]), String(reply[1]));
  }

  // Requests a refresh found gone: their lease ran out and went to others (this process was
  // paused, or cut off, past it), or Redis lost its data; the epoch tells which.
  private expired(permits: readonly FleetPermit[]): void {
    void this.host.epoch.check().then((verdict) => {
      for (const permit of permits) {
        const { key } = permit.lane;
        const what = permit.state === HOLDING ? `its lease on ${key}` : `its place in the queue of ${key}`;
        const why =
          verdict === 'data-lost'
            ? 'Redis lost its data (it restarted without persistence, was flushed, or failed over to a replica that had not caught up): every lane in it was gone'
            : `the lease ran out before it was refreshed and went to another request: this process was paused, or could not reach Redis, for longer than the ${this.host.leaseSeconds} s lease`;
        this.host.lose(permit, new LaneLostError(key, `${what} was lost (${why})`), false, verdict === 'data-lost' ? 'data_lost' : 'lease_expired');
      }
    });
  }
}

// A loss's reason for the metrics: Redis out of reach, or an error it answered.
function reasonOf(error: unknown): LaneLossReason {
  return isUnreachable(error) ? 'unreachable' : 'error';
}
