// An adaptive tool that learns its partner's pace (perToolAdaptive { pace: true }), in virtual
// time, against a partner that counts requests per window of 100 frames: 4 a window, the rest
// refused with the wait until the next. Once two pauses have shown it the window's quota, the
// tool's calls are spaced so that no window is over-full; without a pace, the adaptive lane's
// concurrency alone is refused in every window.
import { expect } from 'chai';
import { defer, throwError, timer } from 'rxjs';
import { mergeMap } from 'rxjs/operators';
import { TestScheduler } from 'rxjs/testing';
import { runBatch, type BatchCall, type Outcome } from '../../lib/batch/index.js';
import { ConcurrencyConfig } from '../../lib/config/index.js';
import { RateLimitedError } from '../../lib/errors.js';
import { LaneTable } from '../../lib/lanes/index.js';

const WINDOW = 100;
const QUOTA = 4;

describe('an adaptive tool learning its partner\'s pace (virtual time)', () => {
  // Runs 40 calls of the partner's tool, 10 frames each, and counts per window what the partner admitted and refused.
  function run(pace: boolean): { admitted: number[]; refused: number[]; outcomes: Outcome[] } {
    const testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
    const admitted: number[] = [];
    const refused: number[] = [];
    const outcomes: Outcome[] = [];
    const config = new ConcurrencyConfig({ perToolAdaptive: { partner: { min: 1, max: 8, ...(pace ? { pace: true } : {}) } } });
    testScheduler.run(() => {
      const body = (): ReturnType<typeof defer> =>
        defer(() => {
          const now = testScheduler.now();
          const window = Math.floor(now / WINDOW);
          if ((admitted[window] ?? 0) >= QUOTA) {
            refused[window] = (refused[window] ?? 0) + 1;
            return timer(1).pipe(mergeMap(() => throwError(() => new RateLimitedError('full', (WINDOW - (now % WINDOW)) / 1000))));
          }
          admitted[window] = (admitted[window] ?? 0) + 1;
          return timer(10).pipe(mergeMap(() => ['ok']));
        });
      const calls: BatchCall[] = Array.from({ length: 40 }, (_, i) => ({ callId: `c${i}`, tool: 'partner', invoke: body }));
      runBatch(calls, { shared: { lanes: new LaneTable({ now: () => testScheduler.now() }), concurrency: config }, scheduler: testScheduler }).subscribe((o) => outcomes.push(o));
    });
    return { admitted: Array.from(admitted, (n) => n ?? 0), refused: Array.from({ length: admitted.length }, (_, i) => refused[i] ?? 0), outcomes };
  }

  it('fills each window to its quota and is refused no more once two pauses showed the pace', () => {
    const { admitted, refused, outcomes } = run(true);
    expect(outcomes).to.have.length(40);
    // The first two windows teach it (one refusal sets off each pause); from the third on, none.
    expect(refused.slice(2), 'refusals per window, from the third').to.satisfy((counts: number[]) => counts.every((n) => n === 0));
    expect(admitted.slice(2, -1), 'admitted per full window, from the third').to.satisfy((counts: number[]) => counts.every((n) => n === QUOTA));
    expect(outcomes.filter((o) => o.kind === 'error')).to.have.length(refused.reduce((a, b) => a + b, 0));
  });

  it('without a pace, the adaptive lane alone is refused window after window', () => {
    const { refused } = run(false);
    expect(refused.slice(2).filter((n) => n > 0).length, 'windows with refusals, from the third').to.be.at.least(2);
  });
});
