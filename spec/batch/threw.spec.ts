import { expect } from 'chai';
import { throwError } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { runBatch, type BatchCall } from '../../lib/batch/index.js';
import { ConcurrencyConfig } from '../../lib/config/index.js';
import { briefly, call } from './helpers.js';

// A call's `threw` hears what its body threw, rejected with or errored with, as it was (not as
// the ErrorInfo its outcome carries), so a caller can reject with the body's own error; an
// ending from outside the body (a ceiling) is not the body's failure and is not told.
describe('runBatch telling a call what its body threw', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  const told = (heard: Map<string, unknown>, callId: string, body: Parameters<typeof call>[1]): BatchCall => ({
    ...call(callId, body),
    threw: (error: unknown) => heard.set(callId, error),
  });

  it('tells each call the very error of a throw, an Observable error and a rejection, and nothing for an answer', async () => {
    const thrown = new RangeError('thrown');
    const errored = new TypeError('errored');
    const rejected = { not: 'an Error' };
    const heard = new Map<string, unknown>();
    const calls = [
      told(heard, 'a', () => {
        throw thrown;
      }),
      told(heard, 'b', throwError(() => errored)),
      told(heard, 'c', () => Promise.reject(rejected)),
      told(heard, 'd', () => 'fine'),
    ];
    const outcomes: string[] = [];
    await new Promise<void>((resolve) => runBatch(calls).pipe(briefly).subscribe({ next: (one) => outcomes.push(one), complete: resolve }));
    expect([...heard]).to.deep.equal([
      ['a', thrown],
      ['b', errored],
      ['c', rejected],
    ]);
    expect(heard.get('a')).to.equal(thrown);
    expect(heard.get('b')).to.equal(errored);
    expect(heard.get('c')).to.equal(rejected);
    expect(outcomes).to.have.length(4);
  });

  it('tells a call nothing when its ceiling, not its body, ends it', () => {
    const heard = new Map<string, unknown>();
    testScheduler.run(({ cold, expectObservable }) => {
      const concurrency = new ConcurrencyConfig({ perToolSeconds: { lookup: 0.002 } });
      expectObservable(runBatch([told(heard, 'a', cold('-----x'))], { concurrency }).pipe(briefly)).toBe('--(a|)', { a: 'a!ToolTimedOutError' });
    });
    expect([...heard]).to.deep.equal([]);
  });
});
