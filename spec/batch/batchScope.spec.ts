// The batch's stop: one holder (BatchScope.stopped, set by stop() alone, the first stop winning)
// and FAIL_RUN decided in one step (stopIfFailed), whichever stage lets a failure go on.
import { expect } from 'chai';
import { BatchScope, batchStop, failedBy, failsFast, stopOf, type Outcome, type StopReason } from '../../lib/batch/index.js';

const failure: Outcome = { index: 0, callId: 'f', tool: 'charge', kind: 'error', dispatched: true, error: { name: 'Error', message: 'partner down' } };
const other: Outcome = { index: 1, callId: 'g', tool: 'charge', kind: 'error', dispatched: true, error: { name: 'Error', message: 'also down' } };
const cancel: StopReason = { kind: 'cancelled', why: 'the user pressed stop' };
const stoppedCall: Outcome = { index: 2, callId: 's', tool: 'search', kind: 'error', dispatched: false, error: { name: 'CallStoppedError', message: 'never dispatched: x' }, stopped: cancel };
const result: Outcome = { index: 3, callId: 'r', tool: 'search', kind: 'result', dispatched: true, result: 1, delta: undefined };

describe('BatchScope', () => {
  describe('its stop', () => {
    it('holds the first stop, and tells its listener once', () => {
      const batch = new BatchScope();
      const heard: StopReason[] = [];
      batch.onStop((reason) => heard.push(reason));
      batch.stop(cancel);
      batch.stop({ kind: 'deadline', why: 'late', error: { name: 'DeadlineExceededError', message: 'late' } });
      expect(batch.stopped).to.equal(cancel);
      expect(heard).to.deep.equal([cancel]);
    });

    it('cannot be written but through stop()', () => {
      const batch = new BatchScope();
      expect(() => ((batch as unknown as { stopped: StopReason }).stopped = cancel)).to.throw(TypeError);
      expect(batch.stopped).to.equal(undefined);
    });

    it('keeps a stop at once, and defers telling it while a call is mid-bookkeeping', () => {
      const batch = new BatchScope();
      const heard: StopReason[] = [];
      batch.onStop((reason) => heard.push(reason));
      batch.deferStop();
      batch.stop(cancel);
      expect([batch.stopped, heard.length]).to.deep.equal([cancel, 0]);
      batch.allowStop();
      expect(heard).to.deep.equal([cancel]);
    });
  });

  describe('FAIL_RUN in one step (stopIfFailed)', () => {
    it('stops a batch that fails fast at a failure of the call\'s own, naming the call', () => {
      const batch = new BatchScope({ failFast: true });
      batch.stopIfFailed(failure);
      expect(batch.stopped).to.deep.equal(failedBy(failure, { name: 'Error', message: 'partner down' }));
      expect(batch.stopped?.why).to.equal('call f (charge) failed: partner down');
    });

    it('stops it once: a second failure, or the same one seen again by the next stage, changes nothing', () => {
      const batch = new BatchScope({ failFast: true });
      batch.stopIfFailed(failure);
      const first = batch.stopped;
      batch.stopIfFailed(failure);
      batch.stopIfFailed(other);
      expect(batch.stopped).to.equal(first);
    });

    it('reads FAIL_RUN by the one rule the run reads it by (failsFast)', () => {
      for (const outcome of [failure, stoppedCall, result]) {
        expect(new BatchScope({ failFast: true }).failsOn(outcome)).to.equal(failsFast(true, outcome));
      }
      expect([failsFast(true, failure), failsFast(false, failure), failsFast(true, stoppedCall), failsFast(true, result)]).to.deep.equal([true, false, false, false]);
    });

    const keeps: Array<[string, boolean, Outcome]> = [
      ['a failure when the batch does not fail fast', false, failure],
      ['a call the batch itself stopped', true, stoppedCall],
      ['a result', true, result],
    ];
    for (const [title, failFast, outcome] of keeps) {
      it(`does not stop the batch for ${title}`, () => {
        const batch = new BatchScope({ failFast });
        expect(batch.failsOn(outcome)).to.equal(false);
        batch.stopIfFailed(outcome);
        expect(batch.stopped).to.equal(undefined);
      });
    }
  });

  describe('the stop an outcome carries (stopOf, batchStop)', () => {
    it('reads the stop of the batch from a call it stopped, and none from a result or a failure of its own', () => {
      expect([stopOf(stoppedCall), stopOf(failure), stopOf(result)]).to.deep.equal([cancel, undefined, undefined]);
    });

    it('reads the stop that ended a batch from the first outcome carrying one', () => {
      expect(batchStop([result, failure, stoppedCall])).to.equal(cancel);
      expect(batchStop([result, failure])).to.equal(undefined);
    });
  });
});
