// The fleet store's heartbeat, outage and acquire replies, each on its own with a store stand-in
// and fake timers (no Redis): which requests a beat refreshes, when it stops, the refresh due when
// a holder's lease ends, and none for a request granted at once; an outage told once, probed one
// probe at a time while the client is connected, and ended by Redis's reply.
import { expect } from 'chai';
import sinon from 'sinon';
import { Subject } from 'rxjs';
import type { LaneStoreNotice } from '../../../lib/lanes/index.js';
import { Heartbeat, type HeartbeatHost } from '../../../lib/lanes/redis/heartbeat.js';
import { LaneMetrics } from '../../../lib/lanes/redis/metrics.js';
import { Outage, type OutageHost } from '../../../lib/lanes/redis/outage.js';
import { ScriptReplies, type ReplyHost } from '../../../lib/lanes/redis/replies.js';
import { acquireScript } from '../../../lib/lanes/redis/scripts.js';
import { ACQUIRE, FleetLane, FleetPermit, HOLDING, Op, PENDING, PROBE, REFRESH, WAITING } from '../../../lib/lanes/redis/requests.js';
import type { RedisLaneStore } from '../../../lib/lanes/redis/RedisLaneStore.js';

interface Sent {
  readonly kind: number;
  readonly lane: string;
  readonly ids: readonly string[];
}

const store = { leave: () => undefined } as unknown as RedisLaneStore;

function lane(key: string): FleetLane {
  return new FleetLane(key, 2, [`{${key}}:h`], `{${key}}:g`);
}

function permit(on: FleetLane, id: string, state: number, confirmed: boolean): FleetPermit {
  const made = new FleetPermit(store, on, id, '', () => undefined, 0, 0);
  made.state = state;
  made.confirmed = confirmed;
  on.permits.set(id, made);
  if (state === HOLDING) on.holders++;
  else on.waiters++;
  return made;
}

describe('the fleet store heartbeat', () => {
  let clock: sinon.SinonFakeTimers;
  let sent: Sent[];
  let lanes: Map<string, FleetLane>;
  let down: boolean;
  let probes: number;
  let listening: boolean;
  let heartbeat: Heartbeat;

  beforeEach(() => {
    clock = sinon.useFakeTimers();
    sent = [];
    lanes = new Map();
    down = false;
    probes = 0;
    listening = false;
    const host: HeartbeatHost = {
      lanes,
      send: (kind, _script, on, args, subject: Op['subject']) => {
        expect(args.slice(0, 3)).to.deep.equal(['3000', on.channel, '1']);
        sent.push({ kind, lane: on.key, ids: (subject as readonly FleetPermit[]).map((one) => one.id) });
      },
      sharded: () => '1',
      pruneWakeUps: () => undefined,
      listening: () => listening,
      down: () => down,
      probe: () => probes++,
      closed: () => false,
    };
    heartbeat = new Heartbeat(1000, '3000', host);
  });

  afterEach(() => {
    heartbeat.stop();
    clock.restore();
  });

  it('refreshes, every period, the waiting and holding requests Redis has replied for, one script per lane', () => {
    const search = lane('tool:search');
    const fetch = lane('tool:fetch');
    lanes.set(search.key, search).set(fetch.key, fetch);
    permit(search, 'a', HOLDING, true);
    permit(search, 'b', WAITING, true);
    permit(search, 'c', PENDING, false);
    permit(fetch, 'd', WAITING, false);
    heartbeat.start();
    clock.tick(999);
    expect(sent).to.deep.equal([]);
    clock.tick(1);
    expect(sent).to.deep.equal([{ kind: REFRESH, lane: 'tool:search', ids: ['a', 'b'] }]);
    clock.tick(1000);
    expect(sent).to.have.length(2);
  });

  it('stops once no lane, no wake-up subscription and no outage remain, and not before', () => {
    listening = true;
    heartbeat.start();
    clock.tick(1000);
    expect(clock.countTimers()).to.equal(1);
    listening = false;
    down = true;
    clock.tick(1000);
    expect(clock.countTimers()).to.equal(1);
    down = false;
    clock.tick(1000);
    expect(clock.countTimers()).to.equal(0);
  });

  it('probes an unreachable Redis at a beat that refreshed nothing, and only then', () => {
    const search = lane('tool:search');
    lanes.set(search.key, search);
    down = true;
    heartbeat.start();
    clock.tick(1000);
    expect(probes).to.equal(1);
    permit(search, 'a', HOLDING, true);
    clock.tick(1000);
    expect(probes).to.equal(1);
  });

  it("refreshes a lane with someone waiting when its earliest holder's lease ends, keeping the earlier of two due times", () => {
    const search = lane('tool:search');
    lanes.set(search.key, search);
    permit(search, 'a', WAITING, true);
    heartbeat.watchLeases(search, '100', '600'); // due in 501 ms
    heartbeat.watchLeases(search, '100', '900'); // later: the earlier stands
    clock.tick(500);
    expect(sent).to.deep.equal([]);
    clock.tick(1);
    expect(sent).to.deep.equal([{ kind: REFRESH, lane: 'tool:search', ids: ['a'] }]);
    clock.tick(1000);
    expect(sent).to.have.length(1);
    expect(clock.countTimers()).to.equal(0);
  });

  it("arms no refresh for a request Redis granted at once (its own lease is the earliest), and one for a request it queued", () => {
    const search = lane('tool:search');
    lanes.set(search.key, search);
    const host = {
      lanes,
      leaseMs: 3000,
      heartbeat,
      outage: { down: undefined },
      wakeUps: { listen: () => undefined },
      grant: (granted: FleetPermit, fence: string) => granted.take(fence),
    } as unknown as ReplyHost;
    const replies = new ScriptReplies(host);
    const ask = (id: string, answer: unknown[]) => {
      const asked = permit(search, id, PENDING, false);
      replies.replied(new Op(ACQUIRE, search, asked, acquireScript, [], 0, 1), answer);
      return asked;
    };
    // Redis's time 100, the earliest lease end 3100 (the request's own), no grants for others.
    const first = ask('a', ['100', '3100', 0, 'h', '7']);
    expect(first.holding).to.equal(true);
    expect(clock.countTimers()).to.equal(0);
    const second = ask('b', ['110', '3100', 0, 'w', '']);
    expect(second.state).to.equal(WAITING);
    expect(clock.countTimers()).to.equal(1);
  });

  it('sets no refresh for a lane nobody waits on, or one whose holders have no lease end', () => {
    const search = lane('tool:search');
    lanes.set(search.key, search);
    permit(search, 'a', HOLDING, true);
    heartbeat.watchLeases(search, '100', '600');
    search.waiters = 1;
    heartbeat.watchLeases(search, '100', '');
    expect(clock.countTimers()).to.equal(0);
  });
});

describe('the fleet store outage', () => {
  let clock: sinon.SinonFakeTimers;
  let notices: LaneStoreNotice[];
  let sent: number[];
  let sentAway: string[];
  let heartbeats: number;
  let connected: boolean;
  let outage: Outage;

  beforeEach(() => {
    clock = sinon.useFakeTimers();
    notices = [];
    sent = [];
    sentAway = [];
    heartbeats = 0;
    connected = true;
    const subject = new Subject<LaneStoreNotice>();
    subject.subscribe((notice) => notices.push(notice));
    const host: OutageHost = {
      closed: () => false,
      startHeartbeat: () => heartbeats++,
      send: (kind) => sent.push(kind),
      sendAway: (why) => sentAway.push(why),
      clientReady: () => connected,
    };
    outage = new Outage('spec:', false, subject, new LaneMetrics(undefined, () => []), host);
  });

  afterEach(() => {
    outage.stopProbing();
    clock.restore();
  });

  it('tells once that Redis is unreachable, sends the waiting requests away once, and keeps the heartbeat going', () => {
    outage.unreachable('ECONNREFUSED');
    outage.unreachable('a second failure');
    expect(outage.down).to.equal('ECONNREFUSED');
    expect(notices.map((notice) => notice.status)).to.deep.equal(['unreachable']);
    expect(notices[0]!.reason).to.include('ECONNREFUSED');
    expect(sentAway).to.deep.equal(['ECONNREFUSED']);
    expect(heartbeats).to.equal(1);
    expect(outage.why('tool:search', 'ECONNREFUSED')).to.equal('lane tool:search is shared over Redis, which is unreachable (ECONNREFUSED)');
  });

  it('probes every quarter second, one probe at a time, on a lane no process uses', () => {
    outage.unreachable('ECONNREFUSED');
    clock.tick(250);
    expect(sent).to.deep.equal([PROBE]);
    clock.tick(250);
    expect(sent).to.deep.equal([PROBE]); // the first is still unanswered
    outage.probed();
    clock.tick(250);
    expect(sent).to.deep.equal([PROBE, PROBE]);
  });

  it('sends no probe while the client is reconnecting (it would keep each one until it is back), and probes at the next tick once it is', () => {
    outage.unreachable('ECONNREFUSED');
    connected = false;
    clock.tick(1000);
    outage.probe();
    expect(sent).to.deep.equal([]);
    connected = true;
    clock.tick(250);
    expect(sent).to.deep.equal([PROBE]);
  });

  it('ends at the first reply: tells that Redis is back and probes no more', () => {
    outage.unreachable('ECONNREFUSED');
    clock.tick(250);
    outage.probed();
    outage.restored();
    expect(outage.down).to.equal(undefined);
    expect(notices.map((notice) => notice.status)).to.deep.equal(['unreachable', 'restored']);
    expect(notices[1]!.reason).to.include('ECONNREFUSED');
    clock.tick(1000);
    expect(sent).to.deep.equal([PROBE]);
    expect(clock.countTimers()).to.equal(0);
  });
});
