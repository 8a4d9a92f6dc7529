import { expect } from 'chai';
import { TestScheduler } from 'rxjs/testing';
import { runBatch, type Outcome, type StopReason } from '../../lib/batch/index.js';
import { ConcurrencyConfig } from '../../lib/config/index.js';
import { briefly, call } from './helpers.js';

// A call whose outcome is known already (a resumed run) is neither gated nor dispatched: it
// goes on with that outcome, in call order, and keeps it whatever stops the batch.
const known = (index: number, callId: string, result: unknown): Outcome => ({ index, callId, tool: 'lookup', kind: 'result', dispatched: true, result, delta: undefined });

describe('runBatch with calls whose outcome is known', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('never subscribes to a known call\'s body and emits its outcome in call order', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const a = cold('---(x|)');
      const b = cold('-(y|)');
      const c = cold('--(z|)');
      const calls = [call('a', a), call('b', b, { outcome: known(1, 'b', 'old') }), call('c', c)];
      expectObservable(runBatch(calls).pipe(briefly)).toBe('---(abc|)', { a: 'a=x', b: 'b=old', c: 'c=z' });
      expectSubscriptions(a.subscriptions).toBe('^--!');
      expectSubscriptions(b.subscriptions).toBe([]);
      expectSubscriptions(c.subscriptions).toBe('^-!');
    });
  });

  it('takes no permit for a known call: the others fill the turn lane', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 1 });
      const calls = [call('a', cold('x'), { outcome: known(0, 'a', 'old') }), call('b', cold('----(y|)')), call('c', cold('----(z|)'))];
      expectObservable(runBatch(calls, { concurrency }).pipe(briefly)).toBe('a---b---(c|)', { a: 'a=old', b: 'b=y', c: 'c=z' });
    });
  });

  it('does not ask the gate about a known call', () => {
    const asked: string[] = [];
    testScheduler.run(({ cold, expectObservable }) => {
      const calls = [call('a', cold('(x|)'), { outcome: known(0, 'a', 'old') }), call('b', cold('(y|)'))];
      const gate = (c: { callId: string }) => void asked.push(c.callId);
      expectObservable(runBatch(calls, { gate }).pipe(briefly)).toBe('(ab|)', { a: 'a=old', b: 'b=y' });
    });
    expect(asked).to.deep.equal(['b']);
  });

  it('keeps a known outcome when the batch stops, and classifies the rest', () => {
    testScheduler.run(({ cold, hot, expectObservable }) => {
      const stop$ = hot<StopReason>('-s', { s: { kind: 'cancelled', why: 'enough' } });
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 1 });
      // The known call comes after one that holds the only permit; the third never starts.
      const calls = [call('a', cold('----(x|)')), call('b', cold('x'), { outcome: known(1, 'b', 'old') }), call('c', cold('(z|)'))];
      expectObservable(runBatch(calls, { concurrency, stop$ }).pipe(briefly)).toBe('-(abc|)', { a: 'a?', b: 'b=old', c: 'c!CallStoppedError' });
    });
  });

  it('takes a known outcome a gate step gave the call on its way through', () => {
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const held = cold('(x|)');
      const calls = [call('a', cold('-(y|)')), { ...call('b', held), outcome: undefined as Outcome | undefined }];
      const gate = (c: { callId: string }, index: number) => {
        if (c.callId === 'b') (calls[1] as { outcome: Outcome | undefined }).outcome = known(index, 'b', 'given');
      };
      expectObservable(runBatch(calls, { gate }).pipe(briefly)).toBe('-(ab|)', { a: 'a=y', b: 'b=given' });
      expectSubscriptions(held.subscriptions).toBe([]);
    });
  });
});
