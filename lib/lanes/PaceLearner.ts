// What a rate lane that learns its partner's pace knows (RateLane.learn, an adaptive tool's
// `pace: true`): the calls it admitted since its last pause ended, and the pace they give at the
// next one. A partner that counts requests per window refuses once a window is full and says when
// the next begins, so what went through between the ends of two pauses, over the time between
// them, is its quota. Plain numbers, so the fleet's script (redis/rate.ts) applies the same rule.

/** A learning rate lane's pace, and what it counts to learn it. */
export class PaceLearner {
  /** Calls a second; 0 until a pause followed another. */
  perSecond = 0;
  /** How many pauses it has seen: the calls admitted since the last one are this cycle's. */
  cycle = 0;
  private admittedSince = 0;
  // When the last pause ends (ms; NaN before any), and when the pace last grew.
  private since = Number.NaN;
  private grewAt = Number.NaN;
  // The last cycle's count and length (ms), which calls it admitted that never started take back.
  private lastThrough = 0;
  private lastMs = 0;
  // The pace before the last cycle's: what a cycle with nothing through halves.
  private before = 0;

  /** A call admitted at `now`: the pace, grown by one for each whole second since it last changed. */
  admitted(now: number): number {
    this.admittedSince++;
    if (this.perSecond > 0 && now - this.grewAt >= 1000) {
      this.perSecond += Math.floor((now - this.grewAt) / 1000);
      this.grewAt = now;
    }
    return this.perSecond;
  }

  /**
   * A new pause, until `until`: the pace is what went through since the last pause ended (what
   * was admitted, less the call refused, which set off this pause), over the time from then to `until`.
   */
  paused(until: number): number {
    const { since } = this;
    if (!Number.isNaN(since) && until > since) {
      this.lastThrough = this.admittedSince - 1;
      this.lastMs = until - since;
      this.before = this.perSecond;
      this.perSecond = this.paceOfLast();
    }
    this.since = until;
    this.grewAt = until;
    this.admittedSince = 0;
    this.cycle++;
    return this.perSecond;
  }

  /**
   * A call admitted in `cycle` never started (held by a pause, stopped): it is not counted; a call
   * of the cycle the last pause ended takes back its part of the pace learned from it (it is
   * often told only after that pause began). True if the pace changed.
   */
  notThrough(cycle: number): boolean {
    if (cycle === this.cycle) {
      if (this.admittedSince > 0) this.admittedSince--;
      return false;
    }
    if (cycle !== this.cycle - 1 || this.lastMs === 0) return false;
    this.lastThrough--;
    this.perSecond = this.paceOfLast();
    return true;
  }

  // The pace the last cycle gives; nothing through in it halves the one before (it was too fast
  // even for what little went), and never below one call a cycle (0 would mean no pace at all).
  private paceOfLast(): number {
    return this.lastThrough > 0 ? (this.lastThrough * 1000) / this.lastMs : Math.max(this.before / 2, 1000 / this.lastMs);
  }
}
