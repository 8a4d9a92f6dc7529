// A process's requests on fleet lanes, as RedisLaneStore keeps them: each request (its permit),
// the lanes it has requests on, the scripts sent and not yet answered, and how a request's
// caller is told of a grant or a loss.
import type { LaneLostError } from '../../errors.js';
import { reportUnhandled } from '../../unhandled.js';
import { grant, type OnGrant } from '../Lane.js';
import type { Permit } from '../LaneTable.js';
import type { Script } from './scripts.js';
import { keysOf, laneBase } from './keys.js';

// Where a request stands. PENDING: sent, Redis has not answered (it counts as waiting).
export const PENDING = 0;
export const WAITING = 1;
export const HOLDING = 2;
export const LEFT = 3;
export const LOST = 4;
// Moved to the in-process lanes while Redis was unreachable (whenUnreachable: 'in-process').
export const LOCAL = 5;

// What a script sent to Redis was for.
export const ACQUIRE = 0;
export const LEAVE = 1;
export const REFRESH = 2;
export const PROBE = 3;

/** Where a permit goes when its holder leaves: the store that asked for it (RedisLaneStore). */
export interface LeftBy {
  leave(permit: FleetPermit): void;
}

/** A request for a permit of a fleet lane: `leave()` gives the permit back, or withdraws the request. */
export class FleetPermit implements Permit {
  state = PENDING;
  /** Redis answered the request: its lease may be refreshed, and its leave be sent. */
  confirmed = false;
  /** The fencing token of its grant. */
  fence: string | undefined = undefined;
  /** Until when (performance.now()) its lease is known to run. */
  validUntil: number;
  /** Its permit in the in-process lanes, once it moved there, and whether they granted it. */
  local: Permit | undefined = undefined;
  localGranted = false;
  /** When it was asked for (performance.now()): its wait, for the lane metrics. */
  readonly askedAt: number;

  constructor(
    private readonly store: LeftBy,
    readonly lane: FleetLane,
    readonly id: string,
    readonly party: string,
    readonly onGrant: OnGrant,
    askedAt: number,
    validUntil: number,
  ) {
    this.askedAt = askedAt;
    this.validUntil = validUntil;
  }

  get holding(): boolean {
    return this.state === HOLDING || (this.state === LOCAL && this.localGranted);
  }

  leave(): void {
    this.store.leave(this);
  }

  /** @internal The in-process lane it moved to granted it. */
  granted(): void {
    this.localGranted = true;
    tell(this.onGrant);
  }

  /** @internal Redis granted it with `fence`: its lane counts it a holder. False if it no longer waits. */
  take(fence: string): boolean {
    if (this.state !== PENDING && this.state !== WAITING) return false;
    const { lane } = this;
    this.state = HOLDING;
    this.fence = fence;
    lane.waiters--;
    lane.holders++;
    return true;
  }

  /**
   * @internal Its caller left it: its lane counts it no more and forgets it. What that was (a
   * permit given back, a request withdrawn), or undefined when there is nothing more to do here
   * (it was over already, or lives in the in-process lanes, which give it back themselves).
   */
  quit(): 'released' | 'withdrawn' | undefined {
    const { lane, state } = this;
    if (state === LOCAL) {
      this.state = LEFT;
      // Left inside its in-process grant, before the permit was stored: the fall back's move gives it back (fallback.ts).
      this.local?.leave();
      return undefined;
    }
    if (state === HOLDING) lane.holders--;
    else if (state === PENDING || state === WAITING) lane.waiters--;
    else return undefined;
    this.state = LEFT;
    lane.permits.delete(this.id);
    return state === HOLDING ? 'released' : 'withdrawn';
  }

  /** @internal It is lost: its lane counts it no more and forgets it. False if it was over already. */
  drop(): boolean {
    const { lane, state } = this;
    if (state === HOLDING) lane.holders--;
    else if (state === PENDING || state === WAITING) lane.waiters--;
    else return false;
    this.state = LOST;
    lane.permits.delete(this.id);
    return true;
  }
}

/** A lane this process has requests on: its keys, its requests, its wake-ups. */
export class FleetLane {
  /** The live requests (pending, waiting, holding) of this process, by id. */
  readonly permits = new Map<string, FleetPermit>();
  holders = 0;
  waiters = 0;
  // The timer that runs a refresh when the earliest holder's lease ends (a dead holder's permit
  // comes back then), while this process has someone waiting; and when it is due.
  reclaimTimer: ReturnType<typeof setTimeout> | undefined = undefined;
  reclaimAt = Infinity;
  // A sync (a refresh that catches grants missed before the subscription) is on its way.
  syncing = false;

  constructor(
    readonly key: string,
    // This process's view of the lane's limit (an adaptive lane's moves: adaptive.ts).
    public limit: number,
    readonly keys: readonly string[],
    /** The lane's wake-up channels start with this (the scripts take it): each process has one of its own. */
    readonly channel: string,
    /** This process's wake-up channel of the lane, `<channel>:<process id>`: grants to its requests come here alone. */
    readonly heardOn: string = channel,
  ) {}
}

/** The lanes a process has requests on, by key and by its wake-up channel: made on a first request, dropped once idle. */
export class FleetLanes {
  readonly byKey = new Map<string, FleetLane>();
  private readonly byChannel = new Map<string, FleetLane>();

  /** `extraKeyOf`: a ninth key the lane's acquire reads (an adaptive lane's learned limit), if any. */
  constructor(
    private readonly prefix: string,
    private readonly processId: string,
    private readonly extraKeyOf: (key: string) => string | undefined,
  ) {}

  onChannel(channel: string): FleetLane | undefined {
    return this.byChannel.get(channel);
  }

  /** Lane `key` of this process, made now with `limit`. */
  make(key: string, limit: number): FleetLane {
    const base = laneBase(this.prefix, key);
    const extra = this.extraKeyOf(key);
    const keys = extra === undefined ? keysOf(base) : [...keysOf(base), extra];
    const lane = new FleetLane(key, limit, keys, `${base}:g`, `${base}:g:${this.processId}`);
    this.byKey.set(key, lane);
    this.byChannel.set(lane.heardOn, lane);
    return lane;
  }

  /** Forgets `lane` once it has no request of this process; its subscription, if any, ends at the next heartbeat unless the lane is back by then. */
  dropIfIdle(lane: FleetLane): void {
    if (lane.permits.size > 0 || this.byKey.get(lane.key) !== lane) return;
    this.byKey.delete(lane.key);
    this.byChannel.delete(lane.heardOn);
    if (lane.reclaimTimer !== undefined) clearTimeout(lane.reclaimTimer);
    lane.reclaimTimer = undefined;
  }
}

/**
 * A script sent to Redis and not yet answered. Its arguments start with its request id: sent
 * again after a failed attempt, the script finds its first answer recorded under that id and
 * gives it back, so a change Redis made once is never made twice (scripts.ts).
 */
export class Op {
  done = false;
  /** How many times it was sent again after a failed attempt. */
  retries = 0;
  /** The timer of its next attempt, while one is due. */
  retryTimer: ReturnType<typeof setTimeout> | undefined = undefined;
  constructor(
    readonly kind: number,
    readonly lane: FleetLane,
    readonly subject: FleetPermit | readonly FleetPermit[] | undefined,
    readonly script: Script,
    readonly args: readonly string[],
    readonly sentAt: number,
    readonly seq: number,
  ) {}
}

// What a request's caller is told. A caller's own exception must not cut the store's work short.
export function tell(onGrant: OnGrant): void {
  try {
    grant(onGrant);
  } catch (error) {
    reportUnhandled(error);
  }
}

// An object's lost(), or a function's lost property: a caller without one is not told.
export function tellLost(onGrant: OnGrant, error: Error): void {
  const { lost } = onGrant as { lost?: unknown };
  if (typeof lost !== 'function') return;
  try {
    lost.call(onGrant, error);
  } catch (thrown) {
    reportUnhandled(thrown);
  }
}

// The permit of a request lost at once (Redis unreachable, the store closed): never holding,
// nothing to give back. The caller is told on the next microtask, as a grant would come: never
// before enter returns.
const lostPermit: Permit = { holding: false, leave: () => undefined };

export function lostAtOnce(onGrant: OnGrant, error: LaneLostError): Permit {
  queueMicrotask(() => tellLost(onGrant, error));
  return lostPermit;
}
