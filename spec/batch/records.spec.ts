// The record itself (CallRecord): where the call stands, the gate's refusal, its outcome decided
// once, and the stop's classification by whether its body was invoked.
import { expect } from 'chai';
import { BatchScope, type CallActivity, type StopReason } from '../../lib/batch/index.js';
import { LaneTable } from '../../lib/lanes/index.js';
import { Entry, step } from './entry.js';
import { brief, call } from './helpers.js';

const cancel: StopReason = { kind: 'cancelled', why: 'the user pressed stop' };

describe('CallRecord', () => {
  it('stands arrived, queued, invoking, then over, its parts made with it', () => {
    const table = new LaneTable();
    const other = table.enter('t', 1, () => undefined);
    const seen: string[] = [];
    const record = new BatchScope().record(call('a', () => (seen.push(record.state), 'a')), 0);
    expect([record.state, record.outcome, record.lanes.held]).to.deep.equal(['arrived', undefined, 0]);
    record.enter(new Entry([step('t', 1, table)]));
    expect(record.state).to.equal('queued');
    other.leave();
    expect(seen).to.deep.equal(['invoking']);
    expect([record.state, brief(record.outcome!)]).to.deep.equal(['over', 'a=a']);
  });

  it('is refused by the gate through refuse(), and then ends never started without its lanes', () => {
    const table = new LaneTable();
    let invoked = false;
    const record = new BatchScope().record(call('a', () => (invoked = true)), 0);
    record.refuse({ name: 'ToolRejectedError', message: 'not approved' });
    const entry = new Entry([step('t', 1, table)]);
    record.enter(entry);
    expect(invoked).to.equal(false);
    expect(table.get('t')).to.equal(undefined);
    expect(record.outcome).to.deep.equal({ index: 0, callId: 'a', tool: 'lookup', kind: 'error', dispatched: false, error: { name: 'ToolRejectedError', message: 'not approved' } });
    expect(entry.heard).to.deep.equal(['a!ToolRejectedError', 'a.']);
  });

  it('takes no refusal once it entered its lanes', () => {
    const record = new BatchScope().record(call('a', () => new Promise(() => undefined)), 0);
    record.enter(new Entry());
    record.refuse({ name: 'ToolRejectedError', message: 'too late' });
    expect(record.refused).to.equal(undefined);
  });

  it('tells its entry of a started body and of an ended record apart, by type', () => {
    const record = new BatchScope().record(call('a', () => 'a'), 0);
    const heard: unknown[] = [];
    const entry = new Entry();
    entry.started = (body) => void heard.push(body);
    entry.ended = (ended) => void heard.push(ended);
    record.enter(entry);
    expect(heard).to.deep.equal([record.body, record]);
  });

  describe('classified by a stop', () => {
    it('as never dispatched when its body was not invoked, queued or not yet entered', () => {
      const table = new LaneTable();
      const other = table.enter('t', 1, () => undefined);
      const batch = new BatchScope();
      const queued = batch.record(call('a', () => 'a'), 0);
      const waiting = batch.record(call('b', () => 'b'), 1);
      queued.enter(new Entry([step('t', 1, table)]));
      batch.stop(cancel);
      queued.teardown();
      const open = batch.classify(cancel);
      expect(open).to.deep.equal([queued, waiting]);
      for (const record of open) expect(record.outcome).to.deep.include({ kind: 'error', dispatched: false, stopped: cancel });
      other.leave();
    });

    it('as never dispatched when it was torn down as its body was about to start (its start told, its body not invoked)', () => {
      const batch = new BatchScope();
      let invoked = false;
      const record = batch.record(call('a', () => (invoked = true)), 0);
      const entry = new Entry();
      // The start's notice sets off the stop, as an outside stop met at the first record does.
      entry.started = () => {
        batch.stop(cancel);
        record.teardown();
      };
      record.enter(entry);
      batch.classify(cancel);
      expect(invoked).to.equal(false);
      expect(record.outcome).to.deep.include({ kind: 'error', dispatched: false });
    });

    it('as in flight when its body was invoked: safe to call again if idempotent, else indeterminate', () => {
      const batch = new BatchScope();
      const plain = batch.record(call('a', () => new Promise(() => undefined)), 0);
      const idempotent = batch.record(call('b', () => new Promise(() => undefined), { idempotent: true }), 1);
      for (const record of [plain, idempotent]) record.enter(new Entry());
      batch.stop(cancel);
      batch.teardownEntered();
      batch.classify(cancel);
      expect([plain.outcome!.kind, idempotent.outcome!.kind]).to.deep.equal(['indeterminate', 'error']);
      expect([plain.outcome!.dispatched, idempotent.outcome!.dispatched]).to.deep.equal([true, true]);
    });

    it('keeps an outcome it already had', () => {
      const batch = new BatchScope();
      const record = batch.record(call('a', () => 'a'), 0);
      record.enter(new Entry());
      const had = record.outcome;
      expect(batch.classify(cancel)).to.deep.equal([]);
      record.cutOff(cancel);
      expect(record.outcome).to.equal(had);
    });
  });

  it('is decided from outside (a cache) as ended, its body never to start', () => {
    const activity: CallActivity[] = [];
    const record = new BatchScope({ onActivity: (event) => activity.push(event) }).record(call('a', () => 'a'), 0);
    record.decide({ index: 0, callId: 'a', tool: 'lookup', kind: 'result', dispatched: false, result: 'cached', delta: undefined });
    expect([record.state, record.ended]).to.deep.equal(['over', true]);
    expect(activity.map((event) => event.type === 'ended' && [event.outcome, event.overrun])).to.deep.equal([['result', false]]);
  });

  it('keeps what its body recorded only until the call ended', () => {
    let record$: ((delta: Record<string, unknown>) => void) | undefined;
    const record = new BatchScope().record(
      call('a', (context) => {
        record$ = context.record;
        context.record({ x: 1 });
        return 'a';
      }),
      0,
    );
    record.enter(new Entry());
    record$!({ y: 2 });
    expect(record.outcome).to.deep.include({ delta: { x: 1 } });
  });
});
