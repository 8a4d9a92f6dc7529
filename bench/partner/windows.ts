// The simulated partner's limiter (bench/partner/server.ts): fixed one-second windows of its own
// clock, each admitting R requests and refusing the rest until the next window; the latency of an
// admitted request grows with the admitted requests still in flight. It also keeps, per second,
// what it admitted (per tenant) and refused: the figures of the partner bench.

/** What the partner saw in one second of its clock. */
export interface PartnerSecond {
  accepted: number;
  limited: number;
  /** Of `limited`, the requests refused because `maxInFlight` were in flight already. */
  busy: number;
  /** The most admitted requests in flight at once during the second. */
  peak: number;
  /** Accepted requests per tenant. */
  readonly byTenant: Record<string, number>;
}

export interface PartnerLimits {
  /** Requests accepted in each second of the partner's clock; above it, 429. */
  readonly rate: number;
  /** How long an accepted request takes with nobody else in flight, in ms. */
  readonly baseLatencyMs: number;
  /** What each other accepted request in flight adds to that, in ms. */
  readonly perInFlightMs: number;
  /** Accepted requests in flight at once; above it, 429 too (as a pool that is full). Default: no limit. */
  readonly maxInFlight?: number;
}

/** A request admitted, to be answered after `latencyMs`; or refused, to be asked again after `retryAfterMs`. */
export type Admission = { readonly admitted: true; readonly latencyMs: number } | { readonly admitted: false; readonly retryAfterMs: number };

export class PartnerWindows {
  // Admitted requests not yet answered: what slows the next one.
  private inFlight = 0;
  // Per epoch second, what came in.
  private counted = new Map<number, PartnerSecond>();

  constructor(private readonly limits: PartnerLimits) {
    if (!Number.isInteger(limits.rate) || limits.rate < 1) throw new TypeError(`rate must be a whole number of requests per second from 1, got ${limits.rate}`);
  }

  /** A request arriving at `now` (epoch ms) for `tenant`. An admitted one must be `answered()` once answered. */
  admit(now: number, tenant: string): Admission {
    const epochSecond = Math.floor(now / 1000);
    const second = this.secondOf(epochSecond);
    if (second.accepted >= this.limits.rate) {
      second.limited++;
      return { admitted: false, retryAfterMs: (epochSecond + 1) * 1000 - now };
    }
    if (this.limits.maxInFlight !== undefined && this.inFlight >= this.limits.maxInFlight) {
      second.limited++;
      second.busy++;
      return { admitted: false, retryAfterMs: 100 };
    }
    second.accepted++;
    second.byTenant[tenant] = (second.byTenant[tenant] ?? 0) + 1;
    const latencyMs = this.limits.baseLatencyMs + this.limits.perInFlightMs * this.inFlight;
    this.inFlight++;
    if (this.inFlight > second.peak) second.peak = this.inFlight;
    return { admitted: true, latencyMs };
  }

  /** An admitted request was answered. */
  answered(): void {
    this.inFlight--;
  }

  /** The seconds seen since the last `reset`, keyed by epoch second. */
  seconds(): ReadonlyMap<number, PartnerSecond> {
    return this.counted;
  }

  /** Forgets every second counted so far (between scenarios). */
  reset(): void {
    this.counted = new Map();
  }

  private secondOf(epochSecond: number): PartnerSecond {
    let second = this.counted.get(epochSecond);
    if (second === undefined) {
      second = { accepted: 0, limited: 0, busy: 0, peak: 0, byTenant: {} };
      this.counted.set(epochSecond, second);
    }
    return second;
  }
}
