// The fleet lanes' wake-ups: a script that grants permits publishes each grant on the lane's
// channel of the process that asked for it (`<lane>:g:<process id>`, so a grant wakes that process
// alone, however many wait on the lane), and a process subscribes to its channel of a lane while
// it has someone waiting there, on one connection of its own for every lane (sharded pub/sub on
// Redis 7, classic channels before). A wake-up that may
// have gone by unheard (sent before the subscription was confirmed, or while the subscriber
// reconnected) is made up for by one refresh of the lane, which reports grants missed.
import { closeWithin, type RedisConnection, type RedisSubscriber } from './connection.js';
import type { FleetLane, FleetPermit, Op } from './requests.js';
import { messageOf } from './transport.js';

// A subscription asked for and not yet confirmed.
const ASKING = -1;

/** What the wake-ups need of their store. */
export interface WakeUpHost {
  /** This process's lane on `channel`, if it has one. */
  laneOn(channel: string): FleetLane | undefined;
  /** This process's lanes. */
  lanes(): Iterable<FleetLane>;
  /** How many scripts were ever sent. */
  sent(): number;
  closed(): boolean;
  grant(permit: FleetPermit, fence: string): void;
  /** Redis's time and the earliest lease end of the lane, as a grant's message carries them. */
  watchLeases(lane: FleetLane, redisNow: string, firstEnd: string): void;
  /** Refreshes the lane's requests now, if it is still this process's and someone waits. */
  sync(lane: FleetLane): void;
}

export class WakeUps {
  /** '1' while sharded pub/sub works (Redis 7); '0' once the server refused it. */
  sharded = '1';
  // Subscribed channels: the send count when Redis confirmed (a request sent before then may
  // have missed its wake-up), or ASKING.
  private readonly subscriptions = new Map<string, number>();
  private subscriber: RedisSubscriber | undefined = undefined;

  constructor(
    private readonly connection: RedisConnection,
    private readonly host: WakeUpHost,
  ) {}

  /** Whether any channel is subscribed (or asked for). */
  get active(): boolean {
    return this.subscriptions.size > 0;
  }

  /** A request of `lane` (sent by `op`) waits: its wake-ups must reach this process. */
  listen(lane: FleetLane, op: Op): void {
    const heard = this.subscriptions.get(lane.heardOn);
    if (heard === undefined) this.subscribe(lane.heardOn);
    // Sent before the subscription was confirmed: its wake-up may have gone by unheard.
    else if (heard !== ASKING && op.seq < heard) this.syncSoon(lane);
  }

  /** Subscriptions of lanes this process no longer has end (at the heartbeat). */
  prune(): void {
    for (const [channel, heard] of this.subscriptions) {
      if (heard !== ASKING && this.host.laneOn(channel) === undefined) {
        this.subscriptions.delete(channel);
        this.subscriber?.unsubscribe(channel, this.sharded === '1').catch(() => undefined);
      }
    }
  }

  /** Closes the subscriber connection: dropped if it has not closed within `ms`. */
  async close(ms: number): Promise<void> {
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    this.subscriptions.clear();
    if (subscriber !== undefined) await closeWithin(subscriber, ms);
  }

  private subscribe(channel: string): void {
    if (this.host.closed()) return;
    this.subscriptions.set(channel, ASKING);
    const subscriber = (this.subscriber ??= this.connection.subscriber(() => this.resync()));
    const sharded = this.sharded === '1';
    subscriber.subscribe(channel, sharded, (message) => this.heard(channel, message)).then(
      () => {
        if (this.subscriptions.get(channel) !== ASKING) return;
        this.subscriptions.set(channel, this.host.sent());
        const lane = this.host.laneOn(channel);
        if (lane !== undefined) this.syncSoon(lane);
      },
      (error: unknown) => {
        this.subscriptions.delete(channel);
        // A server without sharded pub/sub (before Redis 7): classic channels from now on.
        if (sharded && /unknown command/i.test(messageOf(error))) {
          this.sharded = '0';
          this.subscribe(channel);
        }
        // Otherwise wake-ups for the lane come from the heartbeat, and a later wait asks again.
      },
    );
  }

  private heard(channel: string, message: string): void {
    const lane = this.host.laneOn(channel);
    if (lane === undefined) return;
    const fields = message.split(' ');
    for (let i = 2; i + 1 < fields.length; i += 2) {
      const permit = lane.permits.get(fields[i]!);
      if (permit !== undefined) this.host.grant(permit, fields[i + 1]!);
    }
    this.host.watchLeases(lane, fields[0]!, fields[1]!);
  }

  /** One refresh soon for a lane, however many requests asked for it. */
  syncSoon(lane: FleetLane): void {
    if (lane.syncing) return;
    lane.syncing = true;
    queueMicrotask(() => {
      lane.syncing = false;
      this.host.sync(lane);
    });
  }

  // The subscriber reconnected: wake-ups sent meanwhile were lost.
  private resync(): void {
    for (const lane of this.host.lanes()) if (lane.waiters > 0) this.syncSoon(lane);
  }
}
