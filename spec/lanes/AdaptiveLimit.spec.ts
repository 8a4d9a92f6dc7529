import { expect } from 'chai';
import fc from 'fast-check';
import { AdaptiveLimit, LaneTable, type LaneSignal, type LimitChange } from '../../lib/lanes/index.js';

describe('AdaptiveLimit', () => {
  it('starts at initial, or at max when none is given', () => {
    expect(new AdaptiveLimit('tool:x', { min: 1, max: 8 }).limit).to.equal(8);
    expect(new AdaptiveLimit('tool:x', { min: 1, max: 8, initial: 3 }).limit).to.equal(3);
  });

  it('halves on overload, never below min', () => {
    const limit = new AdaptiveLimit('tool:x', { min: 3, max: 8 });
    expect(limit.observe('overload', 10, 0)).to.deep.equal({ key: 'tool:x', limit: 4, previous: 8, cause: 'overload' });
    expect(limit.observe('overload', 10, 1)).to.deep.equal({ key: 'tool:x', limit: 3, previous: 4, cause: 'overload' });
    expect(limit.observe('overload', 10, 2)).to.equal(undefined);
    expect(limit.limit).to.equal(3);
  });

  it('falls once for a burst of overloads of work granted before the fall', () => {
    const limit = new AdaptiveLimit('tool:x', { min: 1, max: 8 });
    const generation = limit.generation;
    expect(limit.observe('overload', 10, generation)?.limit).to.equal(4);
    expect(limit.observe('overload', 10, generation)).to.equal(undefined);
    expect(limit.observe('overload', 10, generation)).to.equal(undefined);
    expect(limit.limit).to.equal(4);
  });

  it('grows by one after a whole limit of successes, up to max', () => {
    const limit = new AdaptiveLimit('tool:x', { min: 1, max: 3, initial: 2 });
    expect(limit.observe('ok', 10, 0)).to.equal(undefined);
    expect(limit.observe('ok', 10, 0)).to.deep.equal({ key: 'tool:x', limit: 3, previous: 2, cause: 'success' });
    for (let i = 0; i < 9; i++) expect(limit.observe('ok', 10, 0)).to.equal(undefined);
    expect(limit.limit).to.equal(3);
  });

  it('falls when work takes more than twice its usual time', () => {
    const limit = new AdaptiveLimit('tool:x', { min: 1, max: 4 });
    limit.observe('ok', 100, 0);
    expect(limit.observe('ok', 150, 0)).to.equal(undefined);
    expect(limit.observe('ok', 400, 0)).to.deep.equal({ key: 'tool:x', limit: 2, previous: 4, cause: 'latency' });
  });

  it('is not moved by failures of the work itself, stops, or work that never started', () => {
    const limit = new AdaptiveLimit('tool:x', { min: 1, max: 4, initial: 2 });
    for (const signal of ['failed', 'stopped', 'unstarted'] as const) expect(limit.observe(signal, 5, 0)).to.equal(undefined);
    expect(limit.limit).to.equal(2);
  });

  it('stays within min..max whatever its holders report', () => {
    const signal = fc.constantFrom<LaneSignal>('ok', 'overload', 'failed', 'stopped', 'unstarted');
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 0, max: 20 }), fc.array(fc.tuple(signal, fc.nat(1000), fc.boolean())), (min, extra, reports) => {
        const limit = new AdaptiveLimit('tool:x', { min, max: min + extra });
        for (const [s, ms, stale] of reports) {
          limit.observe(s, ms, stale ? limit.generation - 1 : limit.generation);
          if (limit.limit < min || limit.limit > min + extra) return false;
        }
        return true;
      }),
    );
  });
});

describe('LaneTable adaptive lanes', () => {
  it('takes the limit from its bounds and resizes its lane as holders report', () => {
    let now = 0;
    const table = new LaneTable({ now: () => now });
    const changes: LimitChange[] = [];
    const onGrant = { granted() {}, limitChanged: (change: LimitChange) => changes.push(change) };
    const bounds = { min: 1, max: 2 };
    const a = table.enterAdaptive('tool:x', bounds, onGrant);
    const b = table.enterAdaptive('tool:x', bounds, onGrant);
    const c = table.enterAdaptive('tool:x', bounds, onGrant);
    expect([a.holding, b.holding, c.holding]).to.deep.equal([true, true, false]);
    now = 10;
    a.report!('overload');
    a.leave();
    // The limit fell to one: b still holds, so c waits.
    expect(changes).to.deep.equal([{ key: 'tool:x', limit: 1, previous: 2, cause: 'overload' }]);
    expect(table.get('tool:x')).to.deep.equal({ key: 'tool:x', limit: 1, holders: 1, waiters: 1 });
    expect(c.holding).to.equal(false);
    b.report!('ok');
    b.leave();
    expect(c.holding).to.equal(true);
    // One success at a limit of one grows it back to two, and the lane with it.
    c.report!('ok');
    expect(table.get('tool:x')?.limit).to.equal(2);
    c.leave();
    expect(table.limits()).to.deep.equal([{ key: 'tool:x', limit: 2, min: 1, max: 2 }]);
    expect(table.size).to.equal(0);
  });

  it('keeps what the limit learned after its lane went idle', () => {
    const table = new LaneTable({ now: () => 0 });
    const bounds = { min: 1, max: 8 };
    const a = table.enterAdaptive('tool:x', bounds, () => undefined);
    a.report!('overload');
    a.leave();
    expect(table.size).to.equal(0);
    const b = table.enterAdaptive('tool:x', bounds, () => undefined);
    expect(table.get('tool:x')?.limit).to.equal(4);
    b.leave();
  });

  it('reports once per permit', () => {
    const table = new LaneTable({ now: () => 0 });
    const a = table.enterAdaptive('tool:x', { min: 1, max: 8 }, () => undefined);
    a.report!('overload');
    a.report!('overload');
    expect(table.limits()[0]!.limit).to.equal(4);
    a.leave();
  });
});
