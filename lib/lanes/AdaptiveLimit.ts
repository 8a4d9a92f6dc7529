// An adaptive lane's limit: additive increase, multiplicative decrease (AIMD). It falls by half
// when the work under the lane says "overloaded" (a partner's slow down, a timeout) or takes
// much longer than it usually does, and grows by one permit once a whole limit's worth of work
// went well. Kept apart from the lane (which only counts permits) so the in-process table and
// the fleet store's Lua (redis/adaptive.ts) apply the same rule.

/** An adaptive lane's bounds: its limit stays within `min..max`, starting at `initial` (default `max`). */
export interface AdaptiveBounds {
  readonly min: number;
  readonly max: number;
  readonly initial?: number | undefined;
}

/**
 * How the work held under a permit ended, as its holder tells the lane: `ok`, `overload` (the
 * downstream said slow down, or the work timed out), `failed` (an error of its own, which says
 * nothing of load), `stopped` (cut off while running) or `unstarted` (it never ran: a lane after
 * this one refused it, or it was stopped while waiting).
 */
export type LaneSignal = 'ok' | 'overload' | 'failed' | 'stopped' | 'unstarted';

/** Why an adaptive limit changed. */
export type LimitCause = 'overload' | 'latency' | 'success';

/** A change of an adaptive lane's limit. */
export interface LimitChange {
  readonly key: string;
  readonly limit: number;
  readonly previous: number;
  readonly cause: LimitCause;
}

/** Work that took longer than this many times the lane's usual time counts as overload. */
export const LATENCY_TOLERANCE = 2;
/** How much a new time moves the lane's usual time (an exponentially weighted mean). */
export const LATENCY_WEIGHT = 0.1;
/** A fall keeps this share of the limit (rounded down, never below `min`). */
export const DECREASE_FACTOR = 0.5;

/** The starting limit of `bounds`: `initial`, or `max`. */
export function initialLimit(bounds: AdaptiveBounds): number {
  return bounds.initial ?? bounds.max;
}

/**
 * One adaptive lane's limit and what it has learned. `generation` counts falls: a permit granted
 * before the last fall does not make the limit fall again (its trouble was already answered, as
 * TCP answers one loss per round trip), so a burst of failures of work started together halves
 * the limit once.
 */
export class AdaptiveLimit {
  limit: number;
  generation = 0;
  // Successes since the limit last changed; a limit's worth grows it by one.
  private credit = 0;
  // The usual time of the work under this lane (ms), once anything finished; -1 before.
  private usualMs = -1;

  constructor(
    readonly key: string,
    readonly bounds: AdaptiveBounds,
  ) {
    this.limit = initialLimit(bounds);
  }

  /**
   * What a holder told: the signal of its work, how long it held the permit (ms), and the
   * generation it was granted in. Returns the change it made, if any.
   */
  observe(signal: LaneSignal, heldMs: number, generation: number): LimitChange | undefined {
    if (signal === 'stopped' || signal === 'unstarted') return undefined;
    const usual = this.usualMs;
    const slow = usual >= 0 && heldMs > usual * LATENCY_TOLERANCE && heldMs - usual >= 1;
    if (signal !== 'overload') this.usualMs = usual < 0 ? heldMs : usual + (heldMs - usual) * LATENCY_WEIGHT;
    if (signal === 'overload' || slow) {
      if (generation < this.generation) return undefined;
      return this.fall(signal === 'overload' ? 'overload' : 'latency');
    }
    if (signal !== 'ok') return undefined;
    if (++this.credit < this.limit) return undefined;
    this.credit = 0;
    if (this.limit >= this.bounds.max) return undefined;
    return this.changeTo(this.limit + 1, 'success');
  }

  private fall(cause: LimitCause): LimitChange | undefined {
    this.credit = 0;
    this.generation++;
    const next = Math.max(this.bounds.min, Math.floor(this.limit * DECREASE_FACTOR));
    return next === this.limit ? undefined : this.changeTo(next, cause);
  }

  private changeTo(limit: number, cause: LimitCause): LimitChange {
    const previous = this.limit;
    this.limit = limit;
    return { key: this.key, limit, previous, cause };
  }
}
