// A store's rate lanes at one rate, seen as a plain LaneStore: `enter(key, limit, ...)` asks the
// store's `enterRate(key, rate, ...)`, so a call takes a rate lane as one more step in the same
// ordered walk as its concurrency lanes (and `inLane` runs a source in one). Made once per rate
// and scheduler (a batch makes one per tool), never per call.
import type { Observable, SchedulerLike } from 'rxjs';
import { ConfigError } from '../errors.js';
import type { LaneChange, LaneOccupancy, OnGrant } from './Lane.js';
import type { LaneStore, Permit } from './LaneTable.js';
import type { Rate } from './RateLane.js';

export class RatedStore implements LaneStore {
  /**
   * @param store the store whose rate lanes these are
   * @param rate the rate; undefined to take a lane only while it exists (paused)
   * @param scheduler the clock the lanes wait on
   */
  constructor(
    readonly store: LaneStore,
    readonly rate: Rate | undefined,
    readonly scheduler: SchedulerLike,
  ) {}

  /** Asks rate lane `key` for an admission at this store's rate (`limit` is not read: the rate is). */
  enter(key: string, _limit: number, onGrant: OnGrant, party = ''): Permit {
    const { store } = this;
    if (store.enterRate === undefined) {
      throw new ConfigError(key, `${key} is a rate lane, and the runner's lane store has no rate lanes (it has no enterRate)`);
    }
    return store.enterRate(key, this.rate, onGrant, party, this.scheduler);
  }

  occupancy(): LaneOccupancy[] {
    return this.store.occupancy();
  }

  get changes$(): Observable<LaneChange> {
    return this.store.changes$;
  }
}
