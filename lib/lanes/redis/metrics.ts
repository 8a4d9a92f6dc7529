// The fleet lanes' metrics, through an OpenTelemetry meter when the store is given one
// (`new RedisLaneStore({ ..., meter })`): how long requests wait, who holds and waits per lane,
// grants, lost leases and places, requests sent again, and how long Redis was unreachable.
// The meter is met by its shape (the library does not import @opentelemetry/api), and a meter
// that throws is switched off for the store: it never changes what a run does.
import type { LaneOccupancy } from '../Lane.js';

/** Attributes of a lane metric: string values only. */
export type LaneMetricAttributes = Readonly<Record<string, string>>;

/** What an observable instrument's callback is handed. */
export interface LaneMetricObservation {
  observe(value: number, attributes?: LaneMetricAttributes): void;
}

/** The options the lane metrics give an instrument. */
export interface LaneMetricOptions {
  readonly description?: string;
  readonly unit?: string;
  readonly advice?: { readonly explicitBucketBoundaries?: number[] };
}

/**
 * What the store needs of a meter: an `@opentelemetry/api` `Meter`
 * (`metrics.getMeter('my-service')`) has this shape.
 */
export interface LaneMeter {
  createHistogram(name: string, options?: LaneMetricOptions): { record(value: number, attributes?: LaneMetricAttributes): void };
  createCounter(name: string, options?: LaneMetricOptions): { add(value: number, attributes?: LaneMetricAttributes): void };
  createObservableGauge(
    name: string,
    options?: LaneMetricOptions,
  ): {
    addCallback(callback: (result: LaneMetricObservation) => void): void;
    removeCallback(callback: (result: LaneMetricObservation) => void): void;
  };
}

/** The lane metrics' names and attributes (documented in docs/fleet.md). */
export const LaneMetricNames = {
  /** Histogram, seconds: from a request to its grant. */
  WAIT: 'agent_lanes.lane.wait',
  /** Gauge, permits this process holds, per lane. */
  HOLDERS: 'agent_lanes.lane.holders',
  /** Gauge, requests of this process waiting, per lane. */
  WAITERS: 'agent_lanes.lane.waiters',
  /** Counter, grants. */
  GRANTS: 'agent_lanes.lane.grants',
  /** Counter, leases and places in a queue lost, by reason. */
  LOST: 'agent_lanes.lane.lost',
  /** Counter, requests sent again after an attempt failed on the way. */
  RETRIES: 'agent_lanes.lane.retries',
  /** Counter, seconds: how long Redis counted as unreachable. */
  UNREACHABLE: 'agent_lanes.lane.unreachable',
  /** Attribute: the lane's key (`tool:search`). */
  KEY: 'agent_lanes.lane.key',
  /** Attribute of a loss: `lease_expired`, `data_lost`, `unreachable`, `closed`, `error`. */
  REASON: 'agent_lanes.lane.lost.reason',
} as const;

/** Why a lease or a place was lost, as the `agent_lanes.lane.lost.reason` attribute says it. */
export type LaneLossReason = 'lease_expired' | 'data_lost' | 'unreachable' | 'closed' | 'error';

// Lane waits run from a tenth of a millisecond (a free lane on a local Redis) to minutes.
const waitBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

type Instruments = {
  readonly wait: ReturnType<LaneMeter['createHistogram']>;
  readonly grants: ReturnType<LaneMeter['createCounter']>;
  readonly lost: ReturnType<LaneMeter['createCounter']>;
  readonly retries: ReturnType<LaneMeter['createCounter']>;
  readonly unreachable: ReturnType<LaneMeter['createCounter']>;
  readonly gauges: ReadonlyArray<ReturnType<LaneMeter['createObservableGauge']>>;
};

/** The metrics of one store; without a meter every method does nothing. */
export class LaneMetrics {
  // The instruments, until the meter is switched off (or when there is none).
  private instruments: Instruments | undefined = undefined;

  constructor(
    meter: LaneMeter | undefined,
    private readonly occupancy: () => LaneOccupancy[],
  ) {
    if (meter === undefined) return;
    this.guard(() => {
      const gauges = [
        meter.createObservableGauge(LaneMetricNames.HOLDERS, { description: 'Permits of a lane this process holds', unit: '{permit}' }),
        meter.createObservableGauge(LaneMetricNames.WAITERS, { description: "Requests of this process waiting in a lane's queue", unit: '{request}' }),
      ];
      this.instruments = {
        wait: meter.createHistogram(LaneMetricNames.WAIT, { description: 'How long a request waited for its permit', unit: 's', advice: { explicitBucketBoundaries: waitBuckets } }),
        grants: meter.createCounter(LaneMetricNames.GRANTS, { description: 'Permits granted to this process', unit: '{grant}' }),
        lost: meter.createCounter(LaneMetricNames.LOST, { description: 'Leases and places in a queue lost', unit: '{request}' }),
        retries: meter.createCounter(LaneMetricNames.RETRIES, { description: 'Requests sent to Redis again after an attempt failed on the way', unit: '{request}' }),
        unreachable: meter.createCounter(LaneMetricNames.UNREACHABLE, { description: 'How long Redis counted as unreachable', unit: 's' }),
        gauges,
      };
      gauges[0]!.addCallback(this.observeHolders);
      gauges[1]!.addCallback(this.observeWaiters);
    });
  }

  granted(key: string, waitedMs: number): void {
    const instruments = this.instruments;
    if (instruments === undefined) return;
    this.guard(() => {
      const attributes = { [LaneMetricNames.KEY]: key };
      instruments.wait.record(Math.max(0, waitedMs) / 1000, attributes);
      instruments.grants.add(1, attributes);
    });
  }

  lost(key: string, reason: LaneLossReason): void {
    const instruments = this.instruments;
    if (instruments !== undefined) this.guard(() => instruments.lost.add(1, { [LaneMetricNames.KEY]: key, [LaneMetricNames.REASON]: reason }));
  }

  retried(key: string): void {
    const instruments = this.instruments;
    if (instruments !== undefined) this.guard(() => instruments.retries.add(1, { [LaneMetricNames.KEY]: key }));
  }

  unreachableFor(ms: number): void {
    const instruments = this.instruments;
    if (instruments !== undefined) this.guard(() => instruments.unreachable.add(Math.max(0, ms) / 1000));
  }

  /** The gauges stop observing (the store closed). */
  close(): void {
    const instruments = this.instruments;
    this.instruments = undefined;
    if (instruments === undefined) return;
    try {
      instruments.gauges[0]!.removeCallback(this.observeHolders);
      instruments.gauges[1]!.removeCallback(this.observeWaiters);
    } catch {
      // A meter that cannot take its callbacks back is dropped all the same.
    }
  }

  private readonly observeHolders = (result: LaneMetricObservation): void => {
    this.guard(() => {
      for (const lane of this.occupancy()) result.observe(lane.holders, { [LaneMetricNames.KEY]: lane.key });
    });
  };

  private readonly observeWaiters = (result: LaneMetricObservation): void => {
    this.guard(() => {
      for (const lane of this.occupancy()) result.observe(lane.waiters, { [LaneMetricNames.KEY]: lane.key });
    });
  };

  // A meter that throws is switched off: its failure stays out of the store's work.
  private guard(record: () => void): void {
    try {
      record();
    } catch {
      this.close();
    }
  }
}
