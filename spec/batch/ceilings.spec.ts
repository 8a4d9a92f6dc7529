// Ceilings: one queue per duration, one scheduler action for its head, in virtual time.
import { expect } from 'chai';
import { TestScheduler } from 'rxjs/testing';
import { Ceilings } from '../../lib/batch/ceilings.js';

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
      const ceilings = new Ceilings(scheduler);
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
      const ceilings = new Ceilings(scheduler, (name) => settled.has(name as string));
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
      const ceilings = new Ceilings(scheduler);
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
      const ceilings = new Ceilings(scheduler);
      ceilings.arm(5, (name) => fired.push(name), 'late');
      scheduler.schedule(() => {
        ceilings.close();
        actions = scheduler.actions.length;
      }, 1);
    });
    expect(fired).to.deep.equal([]);
    expect(actions).to.equal(0);
  });
});
