// What a rate lane is given and what it reports (RateLane.ts): a rate, checked, and a rate lane's
// occupancy beside a concurrency lane's.

/** A rate: `limit` admissions per `perSeconds` seconds, up to `burst` (default 1) at once. */
export interface Rate {
  readonly limit: number;
  readonly perSeconds: number;
  readonly burst?: number | undefined;
}

/** What a rate lane reports of itself, beside a concurrency lane's occupancy. */
export interface RateOccupancy {
  readonly key: string;
  /** Admissions per `perSeconds`; 0 for a lane that exists only while it is paused. */
  readonly limit: number;
  readonly perSeconds: number;
  readonly burst: number;
  /** Admissions hold nothing: always 0. */
  readonly holders: 0;
  readonly waiters: number;
  /** Admissions whose calls have not started yet, each holding a slot of the bucket (absent when none; a fleet's are counted in Redis). */
  readonly reserved?: number;
  /** Until when (scheduler ms) the lane admits nothing, when it was paused and the pause runs. */
  readonly pausedUntil?: number;
  /** A lane that learns its pace from its pauses: `limit` per `perSeconds` is what it learned so far (0: nothing yet). */
  readonly learned?: true;
}

/** Refuses a rate that is not one, with a TypeError naming the figure. */
export function checkRate(rate: Rate): void {
  const { limit, perSeconds, burst } = rate;
  if (!(Number.isInteger(limit) && limit > 0)) throw new TypeError(`Expected a rate limit from 1 up, got ${limit}`);
  if (!(Number.isFinite(perSeconds) && perSeconds > 0)) throw new TypeError(`Expected a rate's perSeconds above 0, got ${perSeconds}`);
  if (burst !== undefined && !(Number.isInteger(burst) && burst > 0)) throw new TypeError(`Expected a rate's burst from 1 up, got ${burst}`);
}
