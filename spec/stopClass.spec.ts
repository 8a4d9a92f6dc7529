// The stop classes: the class read from each kind of outcome a stopped or cut-off call ends in,
// and the one set of words every such message is built from.
import { expect } from 'chai';
import { CallInterruptedError, LaneLostError, McpConnectionLostError, ProcessStoppedError, StopClasses, stopClassOf, ToolTimedOutError, type StopClass } from '../lib/index.js';
import { failedBy, stoppedOutcome, type BatchCall, type Outcome, type StopReason } from '../lib/batch/index.js';
import { lostBeforeDispatch, lostOutcome } from '../lib/batch/stops.js';
import { afterStop, batchStopped, inFlightClause, inFlightMessage, inFlightWhen, journalCouldNotRecord, neverDispatchedMessage, processStopped, stopClass, stoppedByItsBatch } from '../lib/stopClass.js';
import { toErrorInfo } from '../lib/errors.js';

const cancel: StopReason = { kind: 'cancelled', why: 'the user pressed stop' };
const call = (idempotent: boolean): BatchCall => ({ callId: 'c1', tool: 'book', idempotent });

describe('stop classes', () => {
  it('names the three classes by the words a call span carries', () => {
    expect(StopClasses).to.deep.equal({ NEVER_DISPATCHED: 'never_dispatched', SAFE_TO_CALL_AGAIN: 'safe_to_call_again', INDETERMINATE: 'indeterminate' });
  });

  const given: Array<[string, boolean, boolean, StopClass]> = [
    ['a call whose body never started', false, false, 'never_dispatched'],
    ['an idempotent call whose body never started', false, true, 'never_dispatched'],
    ['an idempotent call in flight', true, true, 'safe_to_call_again'],
    ['a call in flight, not idempotent', true, false, 'indeterminate'],
  ];
  for (const [title, dispatched, idempotent, expected] of given) {
    it(`classes ${title} stopped by its batch as ${expected}, and reads the same class back from its outcome`, () => {
      expect(stopClass(dispatched, idempotent)).to.equal(expected);
      expect(stopClassOf(stoppedOutcome(call(idempotent), 0, dispatched, cancel))).to.equal(expected);
    });
  }

  it('reads safe_to_call_again from an idempotent call cut off alone (its request, its fleet lease)', () => {
    const interrupted = lostOutcome(call(true), 0, toErrorInfo(new CallInterruptedError('its request to MCP server files got no answer in time')));
    const lease = lostOutcome(call(true), 0, toErrorInfo(new LaneLostError('tool:book', 'its lease on tool:book was lost (Redis lost its data)')));
    expect(interrupted.kind).to.equal('error');
    expect(interrupted).to.not.have.property('stopped');
    expect([stopClassOf(interrupted), stopClassOf(lease)]).to.deep.equal(['safe_to_call_again', 'safe_to_call_again']);
  });

  it('reads indeterminate from a call cut off alone that is not idempotent, and never_dispatched from one still queued', () => {
    const lost = toErrorInfo(new LaneLostError('tool:book', 'its place in the queue of tool:book was lost (Redis lost its data)'));
    const queued: Outcome = { index: 0, callId: 'c1', tool: 'book', kind: 'error', dispatched: false, error: lostBeforeDispatch(lost) };
    expect(stopClassOf(lostOutcome(call(false), 0, lost))).to.equal('indeterminate');
    expect(stopClassOf(queued)).to.equal('never_dispatched');
    expect(queued.kind === 'error' && queued.error.message).to.equal('never dispatched: its place in the queue of tool:book was lost (Redis lost its data)');
  });

  it('classes a call in flight when the process running it stopped, read back from a run journal, by whether its tool is idempotent', () => {
    const crash = toErrorInfo(new ProcessStoppedError(processStopped()));
    const [idempotent, not] = [lostOutcome(call(true), 0, crash), lostOutcome(call(false), 0, crash)];
    expect([stopClassOf(idempotent), stopClassOf(not)]).to.deep.equal(['safe_to_call_again', 'indeterminate']);
    expect(not.kind === 'indeterminate' && not.message).to.equal('book was in flight when the process running it stopped. The side effect may have landed');
    expect(idempotent.kind === 'error' && idempotent.error).to.deep.equal({ name: 'ProcessStoppedError', message: 'book was in flight when the process running it stopped. Safe to call again' });
    expect(neverDispatchedMessage(journalCouldNotRecord('ECONNREFUSED'))).to.equal('never dispatched: the journal could not record it (ECONNREFUSED)');
  });

  it('gives no class to a call that ended by itself: a result, its own failure, its own ceiling, the failure that stopped the batch', () => {
    const result: Outcome = { index: 0, callId: 'c1', tool: 'book', kind: 'result', dispatched: true, result: 1, delta: undefined };
    const error = toErrorInfo(new ToolTimedOutError('book', 2, true));
    const failure: Outcome = { index: 0, callId: 'c1', tool: 'book', kind: 'error', dispatched: true, error };
    expect([stopClassOf(result), stopClassOf(failure)]).to.deep.equal([undefined, undefined]);
    // Under FAIL_RUN the failing call is not stopped: its siblings are.
    expect(failedBy(failure, error).kind).to.equal('failed');
  });

  it('builds every in-flight and never-dispatched message from one set of words', () => {
    expect(afterStop(true)).to.equal('Safe to call again');
    expect(afterStop(false)).to.equal('The side effect may have landed');
    expect(inFlightMessage('book was in flight when the batch stopped (x)', false)).to.equal('book was in flight when the batch stopped (x). The side effect may have landed');
    expect(neverDispatchedMessage('the user pressed stop')).to.equal('never dispatched: the user pressed stop');
    expect(new ToolTimedOutError('book', 2, true).message).to.equal('book timed out after 2s (its perToolSeconds ceiling). Safe to call again');
    expect(new McpConnectionLostError('book', 'files', false, 'EPIPE').message).to.equal(
      'the connection to MCP server files was lost while book was in flight (EPIPE). The side effect may have landed',
    );
    const stopped = stoppedOutcome(call(false), 0, true, cancel);
    expect(stopped.kind === 'indeterminate' && stopped.message).to.equal(inFlightMessage('book was in flight when the batch stopped (the user pressed stop)', false));
  });

  it('reads the clause back out of an indeterminate message, and tells a stop of the batch from a call cut off alone', () => {
    const byBatch = stoppedOutcome(call(false), 0, true, cancel);
    const alone = lostOutcome(call(false), 0, toErrorInfo(new CallInterruptedError('its request got no answer')));
    const text = (outcome: Outcome): string => (outcome.kind === 'indeterminate' ? outcome.message : '');
    expect(inFlightClause('book', text(alone))).to.equal('its request got no answer');
    expect(inFlightClause('book', text(byBatch))).to.equal(batchStopped('the user pressed stop'));
    expect(inFlightClause('book', 'something else')).to.equal('something else');
    expect([stoppedByItsBatch('book', text(byBatch)), stoppedByItsBatch('book', text(alone))]).to.deep.equal([true, false]);
    expect(text(alone)).to.equal(inFlightMessage(inFlightWhen('book', 'its request got no answer'), false));
  });
});
