// Ceilings: one queue per duration, one scheduler action for its head, in virtual time.
import { expect } from 'chai';
import { asyncScheduler } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { Ceilings } from '../../lib/batch/ceilings.js';
import { MAX_TIMER_MS } from '../../lib/time.js';
import { NodeTimers, overflowWarnings, THIRTY_DAYS_MS } from '../nodeTimers.js';

describe('Ceilings', () => {
  function inVirtualTime(body: (scheduler: TestScheduler, fired: string[]) => void): string[] {
    const scheduler = new TestScheduler(() => undefined);
    const fired: string[] = [];
    scheduler.run(({ flush }) => {
      body(scheduler, fired);
      flush();
    });
    return fired;
  }

  it('fires each ceiling its duration after it was armed, in order', () => {
    const fired = inVirtualTime((scheduler, fired) => {
      const ceilings = new Ceilings<string>(scheduler);
      const expire = (name: string) => fired.push(`${name}@${scheduler.now()}`);
      ceilings.arm(5, expire, 'a');
      scheduler.schedule(() => ceilings.arm(5, expire, 'b'), 2);
      scheduler.schedule(() => ceilings.arm(3, expire, 'c'), 1);
    });
    expect(fired).to.deep.equal(['c@4', 'a@5', 'b@7']);
  });

  it('passes over targets that no longer care, waking for the next one that does', () => {
    const settled = new Set<string>();
    let actions: number[] = [];
    const fired = inVirtualTime((scheduler, fired) => {
      const ceilings = new Ceilings<string>(scheduler, (name) => settled.has(name));
      const expire = (name: string) => fired.push(`${name}@${scheduler.now()}`);
      ceilings.arm(5, expire, 'a');
      scheduler.schedule(() => ceilings.arm(5, expire, 'b'), 1);
      scheduler.schedule(() => ceilings.arm(5, expire, 'c'), 3);
      // b settles before a's ceiling fires: once a fires, b is passed over and the next wake is c's.
      scheduler.schedule(() => settled.add('b'), 2);
      scheduler.schedule(() => (actions = scheduler.actions.map((action) => action.delay)), 5);
    });
    expect(fired).to.deep.equal(['a@5', 'c@8']);
    expect(actions, 'one action, for c (due at 8), after a fired').to.deep.equal([8]);
  });

  it('lets a ceiling that fires arm another of the same duration', () => {
    const fired = inVirtualTime((scheduler, fired) => {
      const ceilings = new Ceilings<string>(scheduler);
      const expire = (name: string) => fired.push(`${name}@${scheduler.now()}`);
      ceilings.arm(4, (name) => {
        expire(name);
        ceilings.arm(4, expire, 'b');
      }, 'a');
    });
    expect(fired).to.deep.equal(['a@4', 'b@8']);
  });

  it('fires nothing after close, and leaves no scheduled action', () => {
    let actions = -1;
    const fired = inVirtualTime((scheduler, fired) => {
      const ceilings = new Ceilings<string>(scheduler);
      ceilings.arm(5, (name) => fired.push(name), 'late');
      scheduler.schedule(() => {
        ceilings.close();
        actions = scheduler.actions.length;
      }, 1);
    });
    expect(fired).to.deep.equal([]);
    expect(actions).to.equal(0);
  });

  describe('longer than a Node timer holds (2^31-1 ms)', () => {
    it('fires a 30-day ceiling at 30 days, waking once in between, never with a delay Node would cut', () => {
      let timers!: NodeTimers;
      const fired = inVirtualTime((scheduler, fired) => {
        timers = new NodeTimers(scheduler);
        const ceilings = new Ceilings<string>(timers);
        const expire = (name: string) => fired.push(`${name}@${scheduler.now()}`);
        ceilings.arm(THIRTY_DAYS_MS, expire, 'a');
        scheduler.schedule(() => ceilings.arm(THIRTY_DAYS_MS, expire, 'b'), 1000);
      });
      expect(fired).to.deep.equal([`a@${THIRTY_DAYS_MS}`, `b@${THIRTY_DAYS_MS + 1000}`]);
      expect(timers.overflows).to.equal(0);
      expect(timers.asked, 'one wake at the limit, one for the rest, one for b').to.deep.equal([MAX_TIMER_MS, THIRTY_DAYS_MS - MAX_TIMER_MS, 1000]);
    });

    it('passes over a settled head when it wakes early, and lets the queue go', () => {
      let actions = -1;
      const fired = inVirtualTime((scheduler, fired) => {
        const timers = new NodeTimers(scheduler);
        const settled = new Set(['a']);
        const ceilings = new Ceilings<string>(timers, (name) => settled.has(name));
        ceilings.arm(THIRTY_DAYS_MS, (name) => fired.push(name), 'a');
        scheduler.schedule(() => (actions = scheduler.actions.length), MAX_TIMER_MS + 1);
      });
      expect(fired).to.deep.equal([]);
      expect(actions, 'no wake left once the only ceiling was passed over').to.equal(0);
    });

    it('neither fires nor spins on asyncScheduler: no TimeoutOverflowWarning', async () => {
      const fired: string[] = [];
      let ceilings: Ceilings<string> | undefined;
      const warnings = await overflowWarnings(() => {
        ceilings = new Ceilings<string>(asyncScheduler);
        ceilings.arm(THIRTY_DAYS_MS, (name: string) => fired.push(name), 'a');
      });
      ceilings!.close();
      expect(warnings).to.deep.equal([]);
      expect(fired).to.deep.equal([]);
    });
  });
});
