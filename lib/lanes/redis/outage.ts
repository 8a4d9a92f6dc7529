// The fleet store while Redis cannot be reached: the first failure says so (on `notices$`) and
// sends the requests not yet granted away (they fail, or move to the in-process lanes); Redis is
// then probed every quarter second, one probe at a time while the client is connected, and its
// first answer ends the outage.
import type { Subject } from 'rxjs';
import type { LaneStoreNotice } from '../LaneTable.js';
import { keysOf } from './keys.js';
import type { LaneMetrics } from './metrics.js';
import { FleetLane, PROBE, type Op } from './requests.js';
import { snapshotScript, type Script } from './scripts.js';
import { unref } from './transport.js';

/** What the outage needs of its store. */
export interface OutageHost {
  closed(): boolean;
  startHeartbeat(): void;
  send(kind: number, script: Script, lane: FleetLane, args: string[], subject: Op['subject']): void;
  /** Requests not yet granted go no further in Redis: they fail, or move to the in-process lanes. */
  sendAway(why: string): void;
  /** Whether the client is connected (a client reconnecting keeps a probe until it is, past the probe's timeout). */
  clientReady(): boolean;
}

export class Outage {
  /** Why Redis counts as unreachable, while it does. */
  down: string | undefined = undefined;
  // Since when (performance.now()).
  private downSince = 0;
  // Meanwhile: the timer of the next probe, and whether one is unanswered.
  private probeTimer: ReturnType<typeof setTimeout> | undefined = undefined;
  private probing = false;
  // A lane no process uses, for probing Redis while it is unreachable.
  private readonly probeLane: FleetLane;

  constructor(
    prefix: string,
    private readonly inProcess: boolean,
    private readonly notices: Subject<LaneStoreNotice>,
    private readonly metrics: LaneMetrics,
    private readonly host: OutageHost,
  ) {
    const base = `${prefix}{probe}`;
    this.probeLane = new FleetLane('probe', 1, keysOf(base), `${base}:g`);
  }

  /** Why a call on lane `key` cannot be asked for while Redis is unreachable for `why`. */
  why(key: string, why: string): string {
    return `lane ${key} is shared over Redis, which is unreachable (${why})`;
  }

  unreachable(why: string): void {
    // Only the first failure tells and sweeps: while Redis counts as unreachable, no request
    // waits in it (new ones fail at once, or go to the in-process lanes).
    if (this.down !== undefined) return;
    this.down = why;
    this.downSince = performance.now();
    if (!this.host.closed()) this.probeSoon();
    this.host.startHeartbeat();
    const { inProcess } = this;
    this.notices.next({
      type: 'lane-store',
      status: inProcess ? 'in-process' : 'unreachable',
      reason: inProcess ? `Redis is unreachable (${why}): shared lanes run in this process's own lanes, with the same limits per process` : `Redis is unreachable (${why}): calls on shared lanes fail, never dispatched`,
      at: Date.now(),
    });
    this.host.sendAway(why);
  }

  // While Redis is unreachable it is asked every quarter second (one probe at a time), not only
  // at the heartbeat: calls are refused for no longer than the outage.
  private probeSoon(): void {
    this.probeTimer = unref(
      setTimeout(() => {
        this.probeTimer = undefined;
        if (this.down === undefined || this.host.closed()) return;
        this.probe();
        this.probeSoon();
      }, 250),
    );
  }

  probe(): void {
    // A client still reconnecting would keep the probe, and each one after it, until it is back:
    // the next tick asks once it is.
    if (this.probing || !this.host.clientReady()) return;
    this.probing = true;
    this.host.send(PROBE, snapshotScript, this.probeLane, [], undefined);
  }

  /** The probe has its answer, or failed. */
  probed(): void {
    this.probing = false;
  }

  /** Redis answered: the outage, if there was one, ends. */
  restored(): void {
    const was = this.down;
    this.down = undefined;
    this.stopProbing();
    this.metrics.unreachableFor(performance.now() - this.downSince);
    this.notices.next({ type: 'lane-store', status: 'restored', reason: `Redis answers again (it was unreachable: ${was})`, at: Date.now() });
  }

  stopProbing(): void {
    if (this.probeTimer !== undefined) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
  }

  /** The store closes: the time unreachable so far is counted. */
  close(): void {
    if (this.down !== undefined) this.metrics.unreachableFor(performance.now() - this.downSince);
  }
}
