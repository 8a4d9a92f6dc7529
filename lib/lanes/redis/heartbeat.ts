// The fleet store's heartbeat: every third of a lease the leases of this process's requests are
// refreshed in Redis (a refresh also reports grants whose wake-up never came), and a lane with
// someone waiting is refreshed again when its earliest holder's lease ends, so a dead holder's
// permit comes back then rather than a heartbeat later.
import { REFRESH, HOLDING, WAITING, type FleetLane, type FleetPermit, type Op } from './requests.js';
import { refreshScript, type Script } from './scripts.js';
import { unref } from './transport.js';

/** What the heartbeat needs of its store. */
export interface HeartbeatHost {
  /** This process's lanes, by key. */
  readonly lanes: ReadonlyMap<string, FleetLane>;
  send(kind: number, script: Script, lane: FleetLane, args: string[], subject: Op['subject']): void;
  /** Whether wake-ups are sharded ('1') or not ('0'), as scripts take it. */
  sharded(): string;
  /** Ends the wake-up subscriptions of lanes this process left. */
  pruneWakeUps(): void;
  /** Whether any wake-up subscription remains. */
  listening(): boolean;
  /** Whether Redis counts as unreachable. */
  down(): boolean;
  /** Asks Redis whether it answers again. */
  probe(): void;
  closed(): boolean;
}

export class Heartbeat {
  private timer: ReturnType<typeof setInterval> | undefined = undefined;

  constructor(
    /** Its period, in milliseconds: a third of the lease. */
    readonly period: number,
    private readonly leaseText: string,
    private readonly host: HeartbeatHost,
  ) {}

  /** Beats from now on, if it does not already. */
  start(): void {
    this.timer ??= unref(setInterval(() => this.beat(), this.period));
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Refreshes the lane's requests now, if it is still this process's and someone waits. */
  sync(lane: FleetLane): void {
    if (this.host.lanes.get(lane.key) === lane && lane.waiters > 0) this.refresh(lane, this.confirmedOf(lane));
  }

  // One script per lane, and per 500 requests of it: a script holds Redis while it runs.
  private refresh(lane: FleetLane, permits: readonly FleetPermit[]): void {
    for (let from = 0; from === 0 || from < permits.length; from += 500) {
      const some = permits.length <= 500 ? permits : permits.slice(from, from + 500);
      const args = [this.leaseText, lane.channel, this.host.sharded()];
      for (const permit of some) args.push(permit.id);
      this.host.send(REFRESH, refreshScript, lane, args, some);
    }
  }

  // The requests of a lane whose leases the heartbeat keeps: those Redis has answered for.
  private confirmedOf(lane: FleetLane): FleetPermit[] {
    const permits: FleetPermit[] = [];
    for (const permit of lane.permits.values()) if (permit.confirmed && (permit.state === WAITING || permit.state === HOLDING)) permits.push(permit);
    return permits;
  }

  // Every third of a lease: the leases of this process's requests are extended (and missed
  // wake-ups caught), subscriptions of lanes it left end, and an unreachable Redis is probed.
  private beat(): void {
    let asked = false;
    for (const lane of this.host.lanes.values()) {
      const permits = this.confirmedOf(lane);
      if (permits.length === 0) continue;
      this.refresh(lane, permits);
      asked = true;
    }
    this.host.pruneWakeUps();
    if (this.host.down() && !asked) this.host.probe();
    if (this.host.lanes.size === 0 && !this.host.listening() && !this.host.down() && this.timer !== undefined) this.stop();
  }

  /**
   * When the earliest holder's lease ends, a process with someone waiting runs a refresh: if
   * that holder is dead, its permit comes back then, not a heartbeat later.
   */
  watchLeases(lane: FleetLane, redisNow: string, firstEnd: string): void {
    if (lane.waiters === 0 || firstEnd === '' || this.host.closed()) return;
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
        this.sync(lane);
      }, delay),
    );
  }
}
