// What the fleet store makes of Redis's answers to its scripts (the transport's listener): a
// request queued or granted, grants made for others, leases refreshed or found gone, a script that
// failed for good, and the first answer after an outage.
import { describeValue } from '../../config/index.js';
import { LaneLostError } from '../../errors.js';
import type { RedisEpoch } from './epoch.js';
import type { Heartbeat } from './heartbeat.js';
import type { LaneLossReason, LaneMetrics } from './metrics.js';
import type { Outage } from './outage.js';
import { ACQUIRE, HOLDING, PENDING, PROBE, REFRESH, WAITING, type FleetLane, type FleetTicket, type Op } from './requests.js';
import { isUnreachable, messageOf, type TransportListener } from './transport.js';
import type { WakeUps } from './wakeUps.js';

/** What the answers need of their store. */
export interface AnswerHost {
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
  grant(ticket: FleetTicket, fence: string): void;
  lose(ticket: FleetTicket, error: LaneLostError, handBack: boolean, reason: LaneLossReason): void;
  sendLeave(ticket: FleetTicket): void;
}

export class ScriptAnswers implements TransportListener {
  constructor(private readonly host: AnswerHost) {}

  /** An attempt failed on the way; the transport sends it again. */
  retried(op: Op): void {
    this.host.metrics.retried(op.lane.key);
  }

  /** The answer to a script. */
  answered(op: Op, answer: unknown): void {
    if (this.host.outage.down !== undefined) this.host.outage.restored();
    if (op.kind === PROBE) {
      this.host.outage.probed();
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
          ticket.validUntil = op.sentAt + this.host.leaseMs;
          if (state === 'h') this.host.grant(ticket, String(answer[out + 1]));
          else if (ticket.state === PENDING) {
            ticket.state = WAITING;
            this.host.wakeUps.listen(ticket.lane, op);
          }
        } else if (state !== '') this.host.sendLeave(ticket); // left, lost or moved before Redis answered
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
          ticket.validUntil = op.sentAt + this.host.leaseMs;
          // A grant whose wake-up never came.
          if (state[0] === 'h' && ticket.state === WAITING) this.host.grant(ticket, state.slice(1));
        }
        if (gone.length > 0) this.expired(gone);
        this.news(op.lane, answer, count);
        break;
      }
      default:
        this.news(op.lane, answer, count);
    }
  }

  /**
   * An answer that came after its script was given up for lost: a request Redis took after all
   * is handed back. (Leases would free it within one anyway.)
   */
  late(op: Op, answer: unknown): void {
    if (op.kind !== ACQUIRE || !Array.isArray(answer)) return;
    const ticket = op.subject as FleetTicket;
    const state: unknown = answer[3 + Number(answer[2])];
    if (ticket.state === HOLDING) ticket.confirmed = true;
    else if ((state === 'h' || state === 'w') && ticket.state !== PENDING && ticket.state !== WAITING) this.host.sendLeave(ticket);
  }

  /** A script failed for good: an error answer, or none within the timeout. */
  failed(op: Op, error: unknown): void {
    if (op.kind === PROBE) this.host.outage.probed();
    if (!this.host.closed() && isUnreachable(error)) this.host.outage.unreachable(messageOf(error));
    switch (op.kind) {
      case ACQUIRE: {
        const ticket = op.subject as FleetTicket;
        // Granted by a wake-up before the answer failed: Redis took the request after all.
        if (ticket.state === HOLDING) ticket.confirmed = true;
        else if (ticket.state === PENDING || ticket.state === WAITING) {
          this.host.lose(ticket, new LaneLostError(ticket.lane.key, `lane ${ticket.lane.key} could not be asked for a permit (${messageOf(error)})`), false, reasonOf(error));
        }
        break;
      }
      case REFRESH: {
        // A lease that runs out before the next heartbeat can try again is lost now.
        const horizon = performance.now() + this.host.heartbeat.period;
        for (const ticket of op.subject as readonly FleetTicket[]) {
          if (ticket.state === HOLDING && ticket.validUntil <= horizon) {
            this.host.lose(ticket, new LaneLostError(ticket.lane.key, `its lease on ${ticket.lane.key} was lost (it could not be refreshed before it ran out: ${messageOf(error)})`), true, reasonOf(error));
          } else if (ticket.state === WAITING && !isUnreachable(error)) {
            this.host.lose(ticket, new LaneLostError(ticket.lane.key, `its place in the queue of ${ticket.lane.key} was lost (${messageOf(error)})`), true, 'error');
          }
        }
        break;
      }
    }
  }

  // Grants a script made (its answer, or a wake-up): this process's requests among them are told.
  private news(lane: FleetLane, answer: readonly unknown[], count: number): void {
    const current = this.host.lanes.get(lane.key);
    if (current === undefined) return;
    for (let i = 3; i < 3 + count; i += 2) {
      const ticket = current.tickets.get(String(answer[i]));
      if (ticket !== undefined) this.host.grant(ticket, String(answer[i + 1]));
    }
    this.host.heartbeat.watchLeases(current, String(answer[0]), String(answer[1]));
  }

  // Requests a refresh found gone: their lease ran out and went to others (this process was
  // paused, or cut off, past it), or Redis lost its data; the epoch tells which.
  private expired(tickets: readonly FleetTicket[]): void {
    void this.host.epoch.check().then((verdict) => {
      for (const ticket of tickets) {
        const { key } = ticket.lane;
        const what = ticket.state === HOLDING ? `its lease on ${key}` : `its place in the queue of ${key}`;
        const why =
          verdict === 'data-lost'
            ? 'Redis lost its data (it restarted without persistence, was flushed, or failed over to a replica that had not caught up): every lane in it was gone'
            : `the lease ran out before it was refreshed and went to another request: this process was paused, or could not reach Redis, for longer than the ${this.host.leaseSeconds} s lease`;
        this.host.lose(ticket, new LaneLostError(key, `${what} was lost (${why})`), false, verdict === 'data-lost' ? 'data_lost' : 'lease_expired');
      }
    });
  }
}

// A loss's reason for the metrics: Redis out of reach, or an error it answered.
function reasonOf(error: unknown): LaneLossReason {
  return isUnreachable(error) ? 'unreachable' : 'error';
}
