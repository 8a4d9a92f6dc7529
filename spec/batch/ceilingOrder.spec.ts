// A ceiling armed while earlier ones expire (a call that started in a permit an expired call gave
// back) must not push back the wake-up of the ceilings already waiting ahead of it.
import { expect } from 'chai';
import { NEVER, Subject } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { runBatch, type BatchCall, type CallActivity } from '../../lib/batch/index.js';
import { ConcurrencyConfig } from '../../lib/config/index.js';

describe('ceilings armed while others expire', () => {
  it('keeps every waiting ceiling on time when an expiry starts another call of the batch', () => {
    const seen: string[] = [];
    const testScheduler = new TestScheduler((a, e) => {
      expect(a).to.deep.equal(e);
    });
    testScheduler.run(({ flush }) => {
      const calls = new Subject<BatchCall>();
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2, perToolSeconds: { slow: 1 } });
      const onActivity = (a: CallActivity) => (a.type === 'started' || a.type === 'ended') && seen.push(`${testScheduler.now()} ${a.type} ${a.callId}`);
      runBatch(calls, { concurrency, onActivity }).subscribe();
      const call = (callId: string): BatchCall => ({ callId, tool: 'slow', invoke: () => NEVER });
      testScheduler.schedule(() => calls.next(call('a')), 0);
      testScheduler.schedule(() => calls.next(call('b')), 500);
      testScheduler.schedule(() => calls.next(call('c')), 600);
      testScheduler.schedule(() => calls.complete(), 700);
      flush();
    });
    expect(seen).to.deep.equal(['0 started a', '500 started b', '1000 ended a', '1000 started c', '1500 ended b', '2000 ended c']);
  });
});
