// What the processes of a fleet tell each other beside the lanes' own wake-ups: a rate lane
// paused (rate.ts), an adaptive lane's limit moved (adaptive.ts). One subscriber connection for
// all of it, made when first needed. A connection that cannot subscribe leaves this process to
// what it does itself: Redis's answers still hold every process to the fleet's lanes.
import { closeWithin, type RedisConnection, type RedisSubscriber } from './connection.js';

export class FleetNews {
  private subscriber: RedisSubscriber | undefined = undefined;
  private readonly channels = new Set<string>();
  private closed = false;

  constructor(private readonly connection: RedisConnection) {}

  /** Hears `channel` from now on (once per channel; later calls for it do nothing). */
  listen(channel: string, heard: (text: string) => void): void {
    if (this.closed || this.channels.has(channel)) return;
    this.channels.add(channel);
    try {
      const subscriber = (this.subscriber ??= this.connection.subscriber(() => undefined));
      subscriber.subscribe(channel, false, heard).catch(() => undefined);
    } catch {
      // A connection that cannot subscribe: this process keeps to its own news.
    }
  }

  /** Hears nothing more; the subscriber connection closes (dropped if it has not closed within `ms`). */
  async close(ms: number): Promise<void> {
    this.closed = true;
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    if (subscriber !== undefined) await closeWithin(subscriber, ms);
  }
}
