// The in-process adaptive lanes of a LaneTable: a lane whose limit an AdaptiveLimit moves, told
// by each holder how its work went. The limit outlives the lane (a lane is dropped when idle;
// what its limit learned is kept, one per adaptive key, which the config bounds).
import { AdaptiveLimit, type AdaptiveBounds, type LaneSignal } from './AdaptiveLimit.js';
import { grant, type Lane, type LanePermit, type OnGrant } from './Lane.js';
import type { Permit } from './LaneTable.js';

/** What an adaptive permit needs of the table it came from. */
export interface AdaptiveHome {
  /** The live lane under `key`, if any. */
  live(key: string): Lane | undefined;
  /** Now, in ms (the table's clock). */
  now(): number;
}

/**
 * A request for a permit of an adaptive lane. It stands between the lane and the caller: told
 * of the grant first (to note when, and in which generation of the limit), it passes the grant
 * on; its `report(signal)` feeds the limit, once.
 */
export class AdaptivePermit implements Permit {
  // The lane's own request, set once `enter` returns (a grant may come before).
  inner: LanePermit | undefined = undefined;
  // When it was granted (the table's clock), and the limit's generation then; -1 until granted.
  private grantedAt = -1;
  private generation = 0;
  private reported = false;

  constructor(
    private readonly home: AdaptiveHome,
    private readonly state: AdaptiveLimit,
    private readonly onGrant: OnGrant,
  ) {}

  get holding(): boolean {
    return this.inner?.holding ?? this.grantedAt >= 0;
  }

  granted(): void {
    this.grantedAt = this.home.now();
    this.generation = this.state.generation;
    grant(this.onGrant);
  }

  leave(): void {
    this.inner?.leave();
  }

  /** How the work under this permit went: the limit may move (the lane is resized, the holder told). */
  report(signal: LaneSignal): void {
    if (this.reported || this.grantedAt < 0) return;
    this.reported = true;
    const { state, home } = this;
    const change = state.observe(signal, home.now() - this.grantedAt, this.generation);
    if (change === undefined) return;
    home.live(state.key)?.resize(change.limit);
    const { limitChanged } = this.onGrant as { limitChanged?: unknown };
    if (typeof limitChanged === 'function') limitChanged.call(this.onGrant, change);
  }
}

/** The adaptive limits of one table, by lane key. */
export class AdaptiveLimits {
  private readonly limits = new Map<string, AdaptiveLimit>();

  /** The limit of lane `key`, made with `bounds` on first use. */
  of(key: string, bounds: AdaptiveBounds): AdaptiveLimit {
    let state = this.limits.get(key);
    if (state === undefined) {
      state = new AdaptiveLimit(key, bounds);
      this.limits.set(key, state);
    }
    return state;
  }

  /** Every adaptive lane's limit now. */
  list(): Array<{ readonly key: string; readonly limit: number; readonly min: number; readonly max: number }> {
    return [...this.limits.values()].map(({ key, limit, bounds }) => ({ key, limit, min: bounds.min, max: bounds.max }));
  }
}
