// scheduleAfter: any finite wait kept as given, one longer than a Node timer holds chained from
// slices that fit; in virtual time with Node's rule (NodeTimers), and on real timers.
import { expect } from 'chai';
import { asyncScheduler, VirtualAction, VirtualTimeScheduler } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { MAX_TIMER_MS, scheduleAfter } from '../lib/time.js';
import { NodeTimers, overflowWarnings, THIRTY_DAYS_MS } from './nodeTimers.js';

describe('scheduleAfter', () => {
  // Runs `body` in virtual time, on Node's rule, and says when each piece of work ran.
  function inVirtualTime(body: (timers: NodeTimers, ran: (what: string) => void, virtual: TestScheduler) => void): { ran: string[]; timers: NodeTimers } {
    const virtual = new TestScheduler(() => undefined);
    const timers = new NodeTimers(virtual);
    const ran: string[] = [];
    virtual.run(({ flush }) => {
      body(timers, (what) => ran.push(`${what}@${virtual.now()}`), virtual);
      flush();
    });
    return { ran, timers };
  }

  it('is one scheduler.schedule call, with the delay as given, for a wait that fits', () => {
    const { ran, timers } = inVirtualTime((timers, ran) => {
      scheduleAfter(timers, () => ran('a'), 1000);
      scheduleAfter(timers, () => ran('b'), MAX_TIMER_MS);
    });
    expect(ran).to.deep.equal(['a@1000', `b@${MAX_TIMER_MS}`]);
    expect(timers.asked).to.deep.equal([1000, MAX_TIMER_MS]);
  });

  it('hands back the scheduler\'s own action for a wait that fits: no object more', () => {
    const virtual = new VirtualTimeScheduler();
    const subscription = scheduleAfter(virtual, () => undefined, 5);
    expect(subscription).to.be.instanceOf(VirtualAction);
    subscription.unsubscribe();
  });

  it('runs a 30-day wait at 30 days, in slices a Node timer keeps', () => {
    const { ran, timers } = inVirtualTime((timers, ran) => {
      scheduleAfter(timers, () => ran('month'), THIRTY_DAYS_MS);
    });
    expect(ran).to.deep.equal([`month@${THIRTY_DAYS_MS}`]);
    expect(timers.asked).to.deep.equal([MAX_TIMER_MS, THIRTY_DAYS_MS - MAX_TIMER_MS]);
    expect(timers.overflows).to.equal(0);
  });

  it('waits one ms past the limit as two slices, and ten times the limit as ten', () => {
    const { ran, timers } = inVirtualTime((timers, ran) => {
      scheduleAfter(timers, () => ran('over'), MAX_TIMER_MS + 1);
      scheduleAfter(timers, () => ran('ten'), 10 * MAX_TIMER_MS);
    });
    expect(ran).to.deep.equal([`over@${MAX_TIMER_MS + 1}`, `ten@${10 * MAX_TIMER_MS}`]);
    expect(timers.asked.filter((delay) => delay === MAX_TIMER_MS)).to.have.length(1 + 10);
    expect(timers.overflows).to.equal(0);
  });

  it('ends whichever slice is pending when unsubscribed, and leaves no action behind', () => {
    let left = -1;
    const { ran } = inVirtualTime((timers, ran, virtual) => {
      const wait = scheduleAfter(timers, () => ran('month'), THIRTY_DAYS_MS);
      virtual.schedule(() => {
        wait.unsubscribe();
        left = virtual.actions.length;
      }, MAX_TIMER_MS + 5);
    });
    expect(ran).to.deep.equal([]);
    expect(left, 'actions left once the second slice was ended').to.equal(0);
  });

  it('never runs an infinite wait: it only re-arms, once every 2^31-1 ms', () => {
    // A virtual clock that stops at five slices' time.
    const virtual = new VirtualTimeScheduler(VirtualAction, 5 * MAX_TIMER_MS);
    const timers = new NodeTimers(virtual);
    let ran = false;
    const wait = scheduleAfter(timers, () => (ran = true), Infinity);
    virtual.flush();
    expect(ran).to.equal(false);
    expect(timers.asked).to.deep.equal(new Array(6).fill(MAX_TIMER_MS));
    wait.unsubscribe();
  });

  it('keeps a 30-day wait on asyncScheduler: no TimeoutOverflowWarning, nothing run at once', async () => {
    let ran = false;
    let wait: { unsubscribe(): void } | undefined;
    const warnings = await overflowWarnings(() => {
      wait = scheduleAfter(asyncScheduler, () => (ran = true), THIRTY_DAYS_MS);
    });
    wait!.unsubscribe();
    expect(warnings).to.deep.equal([]);
    expect(ran).to.equal(false);
  });

  it('fires a short wait on asyncScheduler as asked', async () => {
    await new Promise<void>((resolve) => scheduleAfter(asyncScheduler, resolve, 1));
  });
});
