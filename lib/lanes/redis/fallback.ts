// The fleet store's fall back (whenUnreachable: 'in-process'): while Redis is unreachable, calls
// on shared lanes run in this process's own lanes, with the same limits per process; requests
// that were waiting in Redis move there.
import type { LaneChange, LaneOccupancy } from '../Lane.js';
import { LaneTable } from '../LaneTable.js';
import { LOCAL, type FleetLane, type FleetPermit } from './requests.js';

/** What the fall back needs of its store. */
export interface FallbackHost {
  /** Tells the store's watchers of a change in the in-process lanes. */
  relay(change: LaneChange): void;
  changed(lane: FleetLane, change: LaneChange['change'], party: string): void;
  sendLeave(permit: FleetPermit): void;
  dropIfIdle(lane: FleetLane): void;
}

export class InProcessFallback {
  private local: LaneTable | undefined = undefined;

  constructor(private readonly host: FallbackHost) {}

  /** The in-process lanes, made when first needed. */
  lanes(): LaneTable {
    if (this.local === undefined) {
      this.local = new LaneTable();
      // The in-process lanes' changes are this store's, for whoever watches it.
      this.local.changes$.subscribe((change) => this.host.relay(change));
    }
    return this.local;
  }

  /** This process's fleet lanes, with the in-process lanes' holders and waiters added. */
  occupancy(lanes: LaneOccupancy[]): LaneOccupancy[] {
    if (this.local === undefined || this.local.size === 0) return lanes;
    const byKey = new Map(lanes.map((lane) => [lane.key, lane]));
    for (const lane of this.local.occupancy()) {
      const fleet = byKey.get(lane.key);
      byKey.set(lane.key, fleet === undefined ? lane : { ...fleet, holders: fleet.holders + lane.holders, waiters: fleet.waiters + lane.waiters });
    }
    return [...byKey.values()];
  }

  /** A request waiting in Redis moves to the in-process lanes. */
  move(permit: FleetPermit): void {
    const { lane } = permit;
    lane.waiters--;
    permit.state = LOCAL;
    lane.permits.delete(permit.id);
    this.host.changed(lane, 'withdrawn', permit.party);
    if (permit.confirmed) this.host.sendLeave(permit);
    this.host.dropIfIdle(lane);
    const local = this.lanes().enter(lane.key, lane.limit, permit, permit.party);
    if (permit.state === LOCAL) permit.local = local;
    else local.leave();
  }
}
