// How a RedisLaneStore's parts are put together: the lanes it has requests on, the transport and
// what its replies do, the wake-ups, the heartbeat, the outage and the in-process fall back, the
// epoch, the metrics and the other lane kinds, each handed what it needs of the others and of
// the store (which keeps the requests themselves: RedisLaneStore.ts).
import type { Subject } from 'rxjs';
import type { LaneLostError } from '../../errors.js';
import type { LaneChange, LaneOccupancy, OnGrant } from '../Lane.js';
import type { LaneLimitNotice, LanePauseNotice, LaneStoreNotice, Permit } from '../LaneTable.js';
import { RedisEpoch } from './epoch.js';
import { InProcessFallback } from './fallback.js';
import { Heartbeat } from './heartbeat.js';
import { FleetLaneKinds } from './laneKinds.js';
import { LaneMetrics, type LaneLossReason, type LaneMeter } from './metrics.js';
import type { StoreSettings } from './options.js';
import { Outage } from './outage.js';
import { ScriptReplies } from './replies.js';
import { FleetLanes, type FleetLane, type FleetPermit, type Op } from './requests.js';
import type { Script } from './scripts.js';
import { ScriptTransport } from './transport.js';
import { WakeUps } from './wakeUps.js';

/** What the parts need of the store itself: its requests, and what it tells its watchers. */
export interface StoreCore {
  readonly processId: string;
  closed(): boolean;
  /** How many scripts it ever sent. */
  sent(): number;
  occupancy(): LaneOccupancy[];
  send(kind: number, script: Script, lane: FleetLane, args: string[], subject: Op['subject']): void;
  grant(permit: FleetPermit, fence: string): void;
  lose(permit: FleetPermit, error: LaneLostError, handBack: boolean, reason: LaneLossReason): void;
  sendLeave(permit: FleetPermit): void;
  sendAway(why: string): void;
  changed(lane: FleetLane, change: LaneChange['change'], party: string): void;
  /** A change of the in-process lanes used meanwhile, for `changes$`. */
  relay(change: LaneChange): void;
  enter(key: string, limit: number, onGrant: OnGrant, party: string): Permit;
  pauseNotice(notice: LanePauseNotice): void;
  limitNotice(notice: LaneLimitNotice): void;
}

export interface StoreParts {
  readonly registry: FleetLanes;
  readonly epoch: RedisEpoch;
  readonly metrics: LaneMetrics;
  readonly heartbeat: Heartbeat;
  readonly outage: Outage;
  readonly fallback: InProcessFallback;
  readonly wakeUps: WakeUps;
  readonly transport: ScriptTransport;
  readonly kinds: FleetLaneKinds;
}

export function storeParts(settings: StoreSettings, meter: LaneMeter | undefined, notices: Subject<LaneStoreNotice>, core: StoreCore): StoreParts {
  const { connection, prefix } = settings;
  const closed = (): boolean => core.closed();
  const send = core.send.bind(core);
  // Made below; the closures handed out before then read them only once the store runs.
  let kinds: FleetLaneKinds | undefined;
  let transport: ScriptTransport | undefined;
  let wakeUps: WakeUps | undefined;
  let outage: Outage | undefined;
  const epoch = new RedisEpoch(prefix, (script, keys, args) => transport!.ask(script, keys, args));
  const metrics = new LaneMetrics(meter, () => core.occupancy());
  // An adaptive lane's ninth key is its learned limit, which its acquire reads (adaptive.ts).
  const registry = new FleetLanes(prefix, core.processId, (key) => kinds!.extraKeyOf(key));
  const lanes = registry.byKey;
  const heartbeat = new Heartbeat(settings.beatMs, settings.leaseText, {
    lanes,
    send,
    sharded: () => wakeUps!.sharded,
    pruneWakeUps: () => wakeUps!.prune(),
    listening: () => wakeUps!.active,
    down: () => outage!.down !== undefined,
    probe: () => outage!.probe(),
    closed,
  });
  outage = new Outage(prefix, settings.whenUnreachable === 'in-process', notices, metrics, {
    closed,
    startHeartbeat: () => heartbeat.start(),
    send,
    sendAway: (why) => core.sendAway(why),
    clientReady: () => connection.ready?.() !== false,
  });
  const fallback = new InProcessFallback({
    relay: (change) => core.relay(change),
    changed: (lane, change, party) => core.changed(lane, change, party),
    sendLeave: (permit) => core.sendLeave(permit),
    dropIfIdle: (lane) => registry.dropIfIdle(lane),
  });
  wakeUps = new WakeUps(connection, {
    laneOn: (channel) => registry.onChannel(channel),
    lanes: () => lanes.values(),
    sent: () => core.sent(),
    closed,
    grant: (permit, fence) => core.grant(permit, fence),
    watchLeases: (lane, redisNow, firstEnd) => heartbeat.watchLeases(lane, redisNow, firstEnd),
    sync: (lane) => heartbeat.sync(lane),
  });
  const replies = new ScriptReplies({
    lanes,
    leaseMs: settings.leaseMs,
    leaseSeconds: settings.leaseSeconds,
    epoch,
    metrics,
    heartbeat,
    outage,
    wakeUps,
    closed,
    grant: (permit, fence) => core.grant(permit, fence),
    lose: (permit, error, handBack, reason) => core.lose(permit, error, handBack, reason),
    sendLeave: (permit) => core.sendLeave(permit),
  });
  transport = new ScriptTransport(connection, settings.timeoutMs, settings.timeoutSeconds, replies);
  const sharedOutage = outage;
  const sharedWakeUps = wakeUps;
  kinds = new FleetLaneKinds({
    prefix,
    processId: core.processId,
    rateJitterMs: settings.rateJitterMs,
    leaseMs: settings.leaseMs,
    connection,
    keepText: settings.keepText,
    ask: (script, keys, args) => transport!.ask(script, keys, args),
    notice: (notice) => core.pauseNotice(notice),
    limitNotice: (notice) => core.limitNotice(notice),
    down: () => sharedOutage.down !== undefined,
    sharded: () => sharedWakeUps.sharded,
    lane: (key) => lanes.get(key),
    enter: (key, limit, onGrant, party) => core.enter(key, limit, onGrant, party),
  });
  return { registry, epoch, metrics, heartbeat, outage, fallback, wakeUps, transport, kinds };
}
