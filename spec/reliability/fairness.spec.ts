// Fairness: tenants sharing a tool lane are served round-robin, so a tenant with 10,000
// queued calls holds back another tenant's single call for at most one round of the lane.
import { expect } from 'chai';
import { timer, map } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { runBatch, type BatchCall, type Outcome } from '../../lib/batch/index.js';
import { ConcurrencyConfig } from '../../lib/config/index.js';
import { LaneTable } from '../../lib/lanes/index.js';

describe('fairness between tenants in a shared lane', () => {
  it('serves a late tenant\'s one call within one round, behind 10,000 queued calls of another', () => {
    const lanes = new LaneTable();
    const concurrency = new ConcurrencyConfig({ perTool: { search: 2 } });
    const shared = { lanes, concurrency };
    const settledAt = new Map<string, number>();
    const scheduler = new TestScheduler(() => undefined);
    scheduler.run(({ flush }) => {
      const call = (id: string): BatchCall => ({ callId: id, tool: 'search', invoke: () => timer(1).pipe(map(() => id)) });
      const record = (o: Outcome) => settledAt.set(o.callId, scheduler.now());
      runBatch(Array.from({ length: 10_000 }, (_, i) => call(`big${i}`)), { shared, tenant: 'big' }).subscribe(record);
      // The small tenant asks once the big one has its 10,000 calls queued.
      runBatch([call('small')], { shared, tenant: 'small' }).subscribe(record);
      flush();
    });
    // The lane has 2 permits; the round at time 0 went to big0 and big1. The next round
    // has one permit for each tenant waiting, so small runs at once in it.
    expect(settledAt.get('small')).to.equal(2);
    expect(settledAt.size).to.equal(10_001);
    expect(lanes.size).to.equal(0);
  });
});
