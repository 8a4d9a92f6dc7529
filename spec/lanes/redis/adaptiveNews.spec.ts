// What a fleet's adaptive lanes do with what they hear and what they send, without a Redis: a
// change of a limit published by another process moves this process's lane and is told on the
// store's limits$; news it cannot read, its own, or news older than what it knows is left alone;
// and a holder's report is not sent while Redis is known to be unreachable.
import { expect } from 'chai';
import type { LaneLimitNotice } from '../../../lib/lanes/index.js';
import { FleetAdaptiveLanes, FleetAdaptivePermit, type AdaptiveHost } from '../../../lib/lanes/redis/adaptive.js';
import { FleetLane } from '../../../lib/lanes/redis/requests.js';

describe('a fleet adaptive lane hearing and telling', () => {
  function host(down = false) {
    const asked: string[][] = [];
    const notices: LaneLimitNotice[] = [];
    const listeners = new Map<string, (text: string) => void>();
    const lane = new FleetLane('tool:partner', 8, [], 'p:{tool:partner}:g');
    const made: AdaptiveHost = {
      prefix: 'p:',
      keepText: '60',
      processId: 'me',
      ask: (_script, _keys, args) => {
        asked.push([...args]);
        return new Promise(() => undefined);
      },
      listen: (channel, heard) => void listeners.set(channel, heard),
      down: () => down,
      limitNotice: (notice) => void notices.push(notice),
      sharded: () => '0',
      lane: (key) => (key === 'tool:partner' ? lane : undefined),
    };
    return { made, asked, notices, listeners, lane };
  }

  const news = (message: Record<string, unknown>): string => JSON.stringify({ key: 'tool:partner', limit: 4, previous: 8, cause: 'overload', generation: 1, from: 'other', ...message });

  it("takes a limit another process moved: its lane's limit, its limits(), and a lane-limit notice", () => {
    const { made, notices, listeners, lane } = host();
    const lanes = new FleetAdaptiveLanes(made);
    lanes.listen();
    const heard = listeners.get('p:adaptive-limits')!;
    heard(news({}));
    expect(lane.limit).to.equal(4);
    expect(lanes.limitOf('tool:partner', { min: 1, max: 8 })).to.equal(4);
    expect(lanes.generationOf('tool:partner')).to.equal(1);
    expect(notices).to.have.length(1);
    expect(notices[0]).to.include({ type: 'lane-limit', key: 'tool:partner', limit: 4, previous: 8, cause: 'overload' });
  });

  it('leaves alone news it cannot read, its own, and news older than what it knows', () => {
    const { made, notices, listeners, lane } = host();
    const lanes = new FleetAdaptiveLanes(made);
    lanes.listen();
    const heard = listeners.get('p:adaptive-limits')!;
    heard('not json');
    heard(news({ cause: 'whim' }));
    heard(news({ limit: -1 }));
    heard(news({ from: 'me' }));
    expect(notices).to.deep.equal([]);
    expect(lane.limit).to.equal(8);
    heard(news({ limit: 2, previous: 4, generation: 2 }));
    heard(news({ limit: 5, previous: 4, cause: 'success', generation: 1 }));
    expect(lane.limit).to.equal(2);
    expect(notices.map((n) => n.limit)).to.deep.equal([2]);
  });

  it("sends a holder's report to Redis, and none while Redis is known to be unreachable", () => {
    for (const down of [false, true]) {
      const { made, asked } = host(down);
      const lanes = new FleetAdaptiveLanes(made);
      const permit = new FleetAdaptivePermit(lanes, 'tool:partner', { min: 1, max: 8 }, () => undefined);
      permit.granted();
      permit.report('overload');
      expect(asked.length, down ? 'reports sent while Redis is down' : 'reports sent').to.equal(down ? 0 : 1);
      if (!down) expect(asked[0]!.slice(-3)).to.deep.equal(['p:adaptive-limits', 'tool:partner', 'me']);
    }
  });
});
