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
      const at = (name: string) => () => fired.push(`${name}@${scheduler.now()}`);
      ceilings.arm(5, at('a'));
      scheduler.schedule(() => ceilings.arm(5, at('b')), 2);
      scheduler.schedule(() => ceilings.arm(3, at('c')), 1);
    });
    expect(fired).to.deep.equal(['c@4', 'a@5', 'b@7']);
  });

  it('skips a cancelled ceiling and still fires the ones behind it', () => {
    const fired = inVirtualTime((scheduler, fired) => {
      const ceilings = new Ceilings(scheduler);
      const first = ceilings.arm(5, () => fired.push('first'));
      scheduler.schedule(() => ceilings.arm(5, () => fired.push(`second@${scheduler.now()}`)), 1);
      scheduler.schedule(() => first.cancel(), 2);
    });
    expect(fired).to.deep.equal(['second@6']);
  });

  it('lets a ceiling that fires arm another of the same duration', () => {
    const fired = inVirtualTime((scheduler, fired) => {
      const ceilings = new Ceilings(scheduler);
      ceilings.arm(4, () => {
        fired.push(`a@${scheduler.now()}`);
        ceilings.arm(4, () => fired.push(`b@${scheduler.now()}`));
      });
    });
    expect(fired).to.deep.equal(['a@4', 'b@8']);
  });

  it('fires nothing after close, and leaves no scheduled action', () => {
    let actions = -1;
    const fired = inVirtualTime((scheduler, fired) => {
      const ceilings = new Ceilings(scheduler);
      ceilings.arm(5, () => fired.push('late'));
      scheduler.schedule(() => {
        ceilings.close();
        actions = scheduler.actions.length;
      }, 1);
    });
    expect(fired).to.deep.equal([]);
    expect(actions).to.equal(0);
  });
});
