// Scripts a fleet store's lane kinds (rate, adaptive, budget lanes) sent to Redis and not yet
// answered, so the store's close can wait for them.
import { reportUnhandled } from '../../unhandled.js';

/** Scripts sent and not yet answered; a failure is reported, never thrown. */
export class Pending {
  private readonly sent = new Set<Promise<void>>();

  track(sent: Promise<void>): void {
    const settled = sent.catch(reportUnhandled).finally(() => this.sent.delete(settled));
    this.sent.add(settled);
  }

  /** Resolves once every script sent has its answer. */
  async idle(): Promise<void> {
    while (this.sent.size > 0) await Promise.allSettled([...this.sent]);
  }
}
