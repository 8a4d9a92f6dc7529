// What a call holds in its lanes (CallLanes): its permits taken in order, grants that come later,
// leaving, keeping them for an overrunning body until it settles or its grace runs out, lending
// them to nested work, their fencing tokens, and entering again after a partner's "slow down".
import { expect } from 'chai';
import { TestScheduler } from 'rxjs/testing';
import { BatchScope, type CallActivity, type LaneStep } from '../../lib/batch/index.js';
import { LaneTable, Loan, type LaneStore, type Permit } from '../../lib/lanes/index.js';
import { RateLimitedError } from '../../lib/errors.js';
import { Entry, step } from './entry.js';
import { call } from './helpers.js';

const holders = (table: LaneTable, key: string): number => table.get(key)?.holders ?? 0;

describe('CallLanes', () => {
  it('takes its lanes in order, each permit held before the next is asked, then starts the body', () => {
    const table = new LaneTable();
    const asked: string[] = [];
    const store: LaneStore = {
      enter: (key, limit, onGrant, party) => {
        asked.push(`${key} (holding ${['t', 'u'].filter((k) => holders(table, k) > 0).join(',') || 'none'})`);
        return table.enter(key, limit, onGrant, party);
      },
      occupancy: () => table.occupancy(),
      changes$: table.changes$,
    };
    const batch = new BatchScope();
    const record = batch.record(call('a', () => 'a'), 0);
    const entry = new Entry([step('t', 1, store), step('u', 1, store)]);
    record.enter(entry);
    expect(asked).to.deep.equal(['t (holding none)', 'u (holding t)']);
    expect(entry.heard).to.deep.equal(['a>', 'a=a', 'a.']);
    // Its answer came at once: both permits are back.
    expect([holders(table, 't'), holders(table, 'u'), record.lanes.held]).to.deep.equal([0, 0, 0]);
  });

  it('carries on from the next lane when a grant comes later, reported queued on the lane it waited for', () => {
    const table = new LaneTable();
    const other = table.enter('u', 1, () => undefined);
    const activity: CallActivity[] = [];
    const batch = new BatchScope({ onActivity: (event) => activity.push(event) });
    let resolve: (value: string) => void = () => undefined;
    const record = batch.record(call('a', () => new Promise<string>((r) => (resolve = r))), 0);
    const entry = new Entry([step('t', 1, table), step('u', 1, table)]);
    record.enter(entry);
    expect([record.state, record.lanes.held, entry.heard]).to.deep.equal(['queued', 2, []]);
    expect(activity.map((event) => (event.type === 'queued' ? `queued ${event.lane}` : event.type))).to.deep.equal(['queued u']);
    other.leave();
    expect([record.state, entry.heard]).to.deep.equal(['awaiting', ['a>']]);
    resolve('a');
    return Promise.resolve().then(() => {
      expect(entry.heard).to.deep.equal(['a>', 'a=a', 'a.']);
      expect([holders(table, 't'), holders(table, 'u')]).to.deep.equal([0, 0]);
    });
  });

  it('leaves every permit, a second time doing nothing', () => {
    const table = new LaneTable();
    const batch = new BatchScope();
    const record = batch.record(call('a', () => new Promise(() => undefined)), 0);
    record.enter(new Entry([step('t', 2, table), step('u', 2, table)]));
    expect([holders(table, 't'), holders(table, 'u')]).to.deep.equal([1, 1]);
    record.lanes.leave();
    record.lanes.leave();
    expect([holders(table, 't'), holders(table, 'u'), record.lanes.held]).to.deep.equal([0, 0, 0]);
  });

  it('fails a call whose store cannot take its request, never started, leaving the lanes it took', () => {
    const table = new LaneTable();
    const broken: LaneStore = {
      enter: () => {
        throw new Error('store unreachable');
      },
      occupancy: () => [],
      changes$: table.changes$,
    };
    const batch = new BatchScope();
    let invoked = false;
    const record = batch.record(call('a', () => (invoked = true)), 0);
    record.enter(new Entry([step('t', 1, table), step('x', 1, broken)]));
    expect(invoked).to.equal(false);
    expect(record.outcome).to.deep.include({ kind: 'error', dispatched: false, error: { name: 'Error', message: 'store unreachable' } });
    expect(holders(table, 't')).to.equal(0);
  });

  it('fails a queued call whose lane a fleet store lost, never started', () => {
    let target: { lost?(error: Error): void } | undefined;
    const table = new LaneTable();
    const store: LaneStore = {
      enter: (_key, _limit, onGrant): Permit => {
        target = typeof onGrant === 'function' ? undefined : onGrant;
        return { holding: false, leave: () => undefined };
      },
      occupancy: () => [],
      changes$: table.changes$,
    };
    const record = new BatchScope().record(call('a', () => 'a'), 0);
    record.enter(new Entry([step('tool:lookup', 1, store)]));
    // The lanes part is the grant target: no closure was made for the request.
    expect(target).to.equal(record.lanes);
    target!.lost!(Object.assign(new Error('its lease on tool:lookup was lost'), { name: 'LaneLostError' }));
    expect(record.outcome).to.deep.include({ kind: 'error', dispatched: false });
    expect((record.outcome as { error: { message: string } }).error.message).to.equal('never dispatched: its lease on tool:lookup was lost');
  });

  describe('an overrunning body', () => {
    let testScheduler: TestScheduler;
    beforeEach(() => {
      testScheduler = new TestScheduler((actual, expected) => {
        expect(actual).to.deep.equal(expected);
      });
    });

    for (const c of [
      { title: 'keeps its permits until it settles, then reports them released', grace: undefined, settlesAt: 5, released: [5, false], heldAt3: 1 },
      { title: 'keeps its permits until its grace runs out, reported abandoned', grace: 0.002, settlesAt: 5, released: [2, true], heldAt3: 0 },
      { title: 'clears its grace timer when it settles first', grace: 0.01, settlesAt: 5, released: [5, false], heldAt3: 1 },
    ] as const) {
      it(c.title, () => {
        testScheduler.run(({ flush }) => {
          const table = new LaneTable();
          const activity: CallActivity[] = [];
          const batch = new BatchScope({ scheduler: testScheduler, onActivity: (event) => activity.push(event) });
          let resolve: (value: string) => void = () => undefined;
          const record = batch.record(call('a', () => new Promise<string>((r) => (resolve = r))), 0);
          record.enter(new Entry([step('t', 1, table)], c.grace));
          record.teardown();
          expect([record.state, holders(table, 't')]).to.deep.equal(['overrun', 1]);
          let heldAt3 = -1;
          testScheduler.schedule(() => (heldAt3 = holders(table, 't')), 3);
          testScheduler.schedule(() => {
            resolve('late');
            // A Promise settles a microtask later; the body's answer is heard then.
            record.answered('late');
          }, c.settlesAt);
          flush();
          expect(heldAt3).to.equal(c.heldAt3);
          const released = activity.filter((event) => event.type === 'released');
          expect(released.map((event) => [event.at, event.type === 'released' && event.abandoned])).to.deep.equal([c.released]);
          expect([record.state, holders(table, 't')]).to.deep.equal(['over', 0]);
          // Nothing left armed: the scheduler has no action waiting.
          expect(testScheduler.actions).to.have.length(0);
        });
      });
    }
  });

  it('lends the permits of its shared lanes to nested work only while its body runs, its callers\' loans with them', () => {
    const shared = new LaneTable();
    const own = new LaneTable();
    const batch = new BatchScope();
    let lent: ReadonlyMap<string, unknown> | undefined;
    const record = batch.record(call('a', (context) => ((lent = context.lent), new Promise(() => undefined))), 0);
    const entry = new Entry([step('turn', 1, own), step('tool:lookup', 1, shared)], undefined, shared);
    entry.lent = new Map([['tenant:acme', new Loan('tenant:acme')]]);
    record.enter(entry);
    // The turn lane is the batch's own: not lent.
    expect([...lent!.keys()]).to.deep.equal(['tenant:acme', 'tool:lookup']);
    // Asked again, the same lanes.
    expect(record.lanes.lend()).to.equal(lent);
    const idle = batch.record(call('b', () => 'b'), 1);
    expect(idle.lanes.lend().size).to.equal(0);
  });

  it('gives the fencing token of its narrowest fleet lane, and every token by lane key', () => {
    const table = new LaneTable();
    const fenced = (fence: string): LaneStore => ({
      enter: (key, limit, onGrant, party): Permit => {
        const permit = table.enter(key, limit, onGrant, party);
        return { fence, leave: () => permit.leave(), get holding() { return permit.holding; } };
      },
      occupancy: () => [],
      changes$: table.changes$,
    });
    const record = new BatchScope().record(call('a', () => new Promise(() => undefined)), 0);
    record.enter(new Entry([step('tenant:acme', 5, fenced('1')), step('tool:lookup', 5, fenced('2')), step('mcp:files', 5, fenced('3'))]));
    expect(record.lanes.fence()).to.equal('2');
    expect(record.lanes.fences()).to.deep.equal({ 'tenant:acme': '1', 'tool:lookup': '2', 'mcp:files': '3' });
    expect(Object.isFrozen(record.lanes.fences())).to.equal(true);
  });
  it('enters again after a "slow down": leaves what it held, takes its lanes again from the first, its body told on once', async () => {
    const table = new LaneTable();
    const pause = table.enter('pause', 1, () => undefined);
    const answers: Array<{ resolve: (value: string) => void; reject: (error: unknown) => void }> = [];
    const body = () => new Promise<string>((resolve, reject) => answers.push({ resolve, reject }));
    const batch = new BatchScope();
    const record = batch.record(call('a', body, { idempotent: true }), 0);
    let again = false;
    // A stand-in that lets the call enter again once, behind a lane held like a paused rate lane.
    class Again extends Entry {
      override lanesOf(): readonly LaneStep[] {
        return again ? [step('pause', 1, table), step('t', 1, table)] : [step('t', 1, table)];
      }
      takeAgain(): boolean {
        again = true;
        return true;
      }
    }
    const entry = new Again();
    record.enter(entry);
    expect([record.state, holders(table, 't')]).to.deep.equal(['awaiting', 1]);
    answers[0]!.reject(new RateLimitedError('slow down', 1));
    await Promise.resolve();
    await Promise.resolve();
    expect([record.state, record.starts, holders(table, 't'), entry.heard]).to.deep.equal(['queued', 1, 0, ['a>']]);
    pause.leave();
    expect([record.state, record.starts, holders(table, 't'), answers.length, entry.heard]).to.deep.equal(['awaiting', 2, 1, 2, ['a>']]);
    answers[1]!.resolve('ok');
    await Promise.resolve();
    await Promise.resolve();
    expect(entry.heard).to.deep.equal(['a>', 'a=ok', 'a.']);
    expect([holders(table, 'pause'), holders(table, 't'), record.lanes.held]).to.deep.equal([0, 0, 0]);
  });
});
