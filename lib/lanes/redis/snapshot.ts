// The fleet's lanes as Redis holds them (`RedisLaneStore.snapshot()`): one snapshot script per
// lane, named or found with SCAN.
import type { LaneOccupancy } from '../Lane.js';
import type { RedisConnection } from './connection.js';
import { globEscape, keysOf, laneBase } from './keys.js';
import { snapshotScript } from './scripts.js';
import type { ScriptTransport } from './transport.js';

/** One lane as the whole fleet holds it (`RedisLaneStore.snapshot()`). */
export interface FleetLaneOccupancy extends LaneOccupancy {
  /** The parties with someone waiting, in the order they will be served. */
  readonly parties: readonly string[];
}

/** The busy lanes under `prefix`: `keys`, or every one SCAN finds. */
export async function fleetSnapshot(prefix: string, connection: RedisConnection, transport: ScriptTransport, keys?: readonly string[]): Promise<FleetLaneOccupancy[]> {
  const bases: string[] = [];
  if (keys !== undefined) for (const key of keys) bases.push(laneBase(prefix, key));
  else {
    const { scan } = connection;
    if (scan === undefined) throw new TypeError('RedisLaneStore.snapshot() without lane keys needs SCAN, which this client cannot do across a Cluster: name the lane keys');
    for await (const name of scan.call(connection, `${globEscape(prefix)}{*}:m`)) bases.push(name.slice(0, -2));
  }
  const answers = await Promise.all(bases.map((base) => transport.ask(snapshotScript, keysOf(base), [])));
  const lanes: FleetLaneOccupancy[] = [];
  for (const answer of answers) {
    const [key, limit, holders, waiters, ...parties] = (answer as unknown[]).map(String);
    if (key === '' || key === undefined) continue;
    const lane = { key, limit: Number(limit), holders: Number(holders), waiters: Number(waiters), parties };
    if (lane.holders > 0 || lane.waiters > 0) lanes.push(lane);
  }
  return lanes;
}
