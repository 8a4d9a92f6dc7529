// The stop classes: the class read from each kind of outcome a stopped or cut-off call ends in,
// and the one set of words every such message is built from.
import { expect } from 'chai';
import {
  CallInterruptedError,
  LaneLostError,
  ProcessStoppedError,
  StopClasses,
  stopClassOf,
  ToolTimedOutError,
  type StopClass,
  type ToolOutcomeEvent,
} from '../lib/index.js';
import { McpConnectionLostError } from '../lib/mcp.js';
import { toOutcomeEvent } from '../lib/runner/events.js';
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

  it('gives no class to a call that ended by itself: a result, its own failure, the failure that stopped the batch', () => {
    const result: Outcome = { index: 0, callId: 'c1', tool: 'book', kind: 'result', dispatched: true, result: 1, delta: undefined };
    const error = toErrorInfo(new Error('no room 7'));
    const failure: Outcome = { index: 0, callId: 'c1', tool: 'book', kind: 'error', dispatched: true, error };
    expect([stopClassOf(result), stopClassOf(failure)]).to.deep.equal([undefined, undefined]);
    // Under FAIL_RUN the failing call is not stopped: its siblings are.
    expect(failedBy(failure, error).kind).to.equal('failed');
  });

  it('classes a call cut off in flight by its own ceiling or its lost MCP connection by whether its tool is idempotent, as its error says', () => {
    const ended = (error: Error): Outcome => ({ index: 0, callId: 'c1', tool: 'book', kind: 'error', dispatched: true, error: toErrorInfo(error) });
    expect([
      stopClassOf(ended(new ToolTimedOutError('book', 2, true))),
      stopClassOf(ended(new ToolTimedOutError('book', 2, false))),
      stopClassOf(ended(new McpConnectionLostError('book', 'files', true, 'EPIPE'))),
      stopClassOf(ended(new McpConnectionLostError('book', 'files', false, 'EPIPE'))),
    ]).to.deep.equal(['safe_to_call_again', 'indeterminate', 'safe_to_call_again', 'indeterminate']);
    // Read back as JSON (a journal, a snapshot): the same.
    expect(stopClassOf(JSON.parse(JSON.stringify(ended(new ToolTimedOutError('book', 2, true)))) as Outcome)).to.equal('safe_to_call_again');
  });

  describe('read from an event', () => {
    const cases: Array<{ title: string; event: ToolOutcomeEvent; expected: StopClass | undefined }> = [
      { title: 'a result', event: { type: 'TOOL_RESULT', turn: 1, callId: 'c1', tool: 'book', result: 1 }, expected: undefined },
      { title: 'a failure of its own', event: { type: 'TOOL_ERROR', turn: 1, callId: 'c1', tool: 'book', error: { name: 'Error', message: 'no room' } }, expected: undefined },
      {
        title: 'a call stopped before it started',
        event: { type: 'TOOL_ERROR', turn: 1, callId: 'c1', tool: 'book', error: { name: 'CallStoppedError', message: 'never dispatched: x' }, stopClass: 'never_dispatched' },
        expected: 'never_dispatched',
      },
      {
        title: 'a recovered call, by its field and not its message',
        event: { type: 'TOOL_ERROR', turn: 1, callId: 'c1', tool: 'book', error: { name: 'ProcessStoppedError', message: 'anything at all' }, stopClass: 'safe_to_call_again' },
        expected: 'safe_to_call_again',
      },
      { title: 'an indeterminate call', event: { type: 'TOOL_INDETERMINATE', turn: 1, callId: 'c1', tool: 'book', message: 'm', stopClass: 'indeterminate' }, expected: 'indeterminate' },
      { title: 'an indeterminate call told without the field', event: { type: 'TOOL_INDETERMINATE', turn: 1, callId: 'c1', tool: 'book', message: 'm' }, expected: 'indeterminate' },
    ];
    for (const c of cases) {
      it(`reads ${c.title} as ${String(c.expected)}`, () => {
        expect(stopClassOf(c.event)).to.equal(c.expected);
      });
    }

    it('is the class of the outcome the event was made from, for every kind of ending', () => {
      const crash = toErrorInfo(new ProcessStoppedError(processStopped()));
      const outcomes: Outcome[] = [
        { index: 0, callId: 'c1', tool: 'book', kind: 'result', dispatched: true, result: 1, delta: undefined },
        { index: 0, callId: 'c1', tool: 'book', kind: 'error', dispatched: true, error: toErrorInfo(new Error('no room')) },
        ...[false, true].flatMap((dispatched) => [true, false].map((idempotent) => stoppedOutcome(call(idempotent), 0, dispatched, cancel))),
        lostOutcome(call(true), 0, crash),
        lostOutcome(call(false), 0, crash),
        { index: 0, callId: 'c1', tool: 'book', kind: 'error', dispatched: true, error: toErrorInfo(new ToolTimedOutError('book', 2, false)) },
      ];
      for (const outcome of outcomes) {
        const event = toOutcomeEvent(1, outcome);
        expect(stopClassOf(event), JSON.stringify(outcome)).to.equal(stopClassOf(outcome));
        expect('stopClass' in event, JSON.stringify(outcome)).to.equal(stopClassOf(outcome) !== undefined);
      }
    });
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
