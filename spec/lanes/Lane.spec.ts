import { expect } from 'chai';
import { Lane } from '../../lib/lanes/index.js';

describe('Lane', () => {
  it('grants up to its limit at once and queues the rest', () => {
    const lane = new Lane('tool:search', 2);
    const granted: string[] = [];
    lane.enter(() => granted.push('a'));
    lane.enter(() => granted.push('b'));
    const c = lane.enter(() => granted.push('c'));
    expect(granted).to.deep.equal(['a', 'b']);
    expect(c.holding).to.equal(false);
    expect(lane.occupancy()).to.deep.equal({ key: 'tool:search', limit: 2, holders: 2, waiters: 1 });
  });

  it('grants in FIFO order within a party as permits come back', () => {
    const lane = new Lane('turn', 1);
    const granted: string[] = [];
    const a = lane.enter(() => granted.push('a'));
    const b = lane.enter(() => granted.push('b'));
    const c = lane.enter(() => granted.push('c'));
    a.leave();
    b.leave();
    expect(granted).to.deep.equal(['a', 'b', 'c']);
    c.leave();
    expect(lane.idle).to.equal(true);
  });

  it('serves parties round-robin, so a long queue does not hold back another party', () => {
    const lane = new Lane('tool:search', 1);
    const granted: string[] = [];
    const first = lane.enter(() => granted.push('big-0'), 'big');
    const tickets = [1, 2, 3, 4].map((n) => lane.enter(() => granted.push(`big-${n}`), 'big'));
    const small = lane.enter(() => granted.push('small-0'), 'small');
    first.leave();
    tickets[0]!.leave();
    expect(granted).to.deep.equal(['big-0', 'big-1', 'small-0']);
    small.leave();
    expect(granted).to.deep.equal(['big-0', 'big-1', 'small-0', 'big-2']);
  });

  it('withdraws a waiting request without granting it', () => {
    const lane = new Lane('turn', 1);
    const granted: string[] = [];
    const a = lane.enter(() => granted.push('a'));
    const b = lane.enter(() => granted.push('b'));
    b.leave();
    a.leave();
    expect(granted).to.deep.equal(['a']);
    expect(lane.occupancy()).to.include({ holders: 0, waiters: 0 });
  });

  it('ignores a second leave', () => {
    const lane = new Lane('turn', 1);
    const a = lane.enter(() => undefined);
    a.leave();
    a.leave();
    expect(lane.holders).to.equal(0);
  });

  it('does not recurse when granted waiters release synchronously (100,000 waiters)', () => {
    const lane = new Lane('turn', 1);
    const first = lane.enter(() => undefined);
    let done = 0;
    for (let i = 0; i < 100_000; i++) {
      // Given back inside its own grant, as a body that finishes synchronously does.
      const ticket = lane.enter(() => {
        done++;
        ticket.leave();
      });
    }
    first.leave();
    expect(done).to.equal(100_000);
    expect(lane.idle).to.equal(true);
  });

  it('refuses a limit below one with a precise TypeError', () => {
    expect(() => new Lane('turn', 0)).to.throw(TypeError, 'Expected a lane limit from 1 up, got 0');
  });
});
