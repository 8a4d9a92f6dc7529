// Interruption at every step: one batch is run once to list its scheduling steps (each
// grant, dispatch and settle), then again once per step, cancelled right after that step.
// Each time, no permit may leak and each call must be classified exactly once, by what it
// had actually done.
import { expect } from 'chai';
import { Subject, timer, map, finalize, Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { runBatch, type BatchCall, type CallActivity, type Outcome, type StopReason } from '../../lib/batch/index.js';
import { ConcurrencyConfig } from '../../lib/config/index.js';
import { LaneTable } from '../../lib/lanes/index.js';

const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2, perTool: { search: 2, charge: 1 }, perTenant: 3 });
const plan = [
  { tool: 'search', latency: 3, idempotent: true },
  { tool: 'charge', latency: 2, idempotent: false },
  { tool: 'search', latency: 1, idempotent: true },
  { tool: 'charge', latency: 4, idempotent: false },
  { tool: 'booking', latency: 2, idempotent: false, parallelSafe: false },
  { tool: 'search', latency: 2, idempotent: true },
];

interface Attempt {
  readonly outcomes: Outcome[];
  readonly started: Set<string>;
  readonly steps: number;
  readonly lanes: LaneTable;
}

/** Runs the batch, cancelling right after scheduling step `stopAfter` (never, if undefined). */
function attempt(stopAfter: number | undefined): Attempt {
  const lanes = new LaneTable();
  const started = new Set<string>();
  const outcomes: Outcome[] = [];
  let steps = 0;
  const stop$ = new Subject<StopReason>();
  const step = (): void => {
    if (steps++ === stopAfter) stop$.next({ kind: 'cancelled', why: `cancelled after step ${stopAfter}` });
  };
  const scheduler = new TestScheduler(() => undefined);
  scheduler.run(({ flush }) => {
    const calls: BatchCall[] = plan.map((p, i) => ({
      callId: `c${i}`,
      tool: p.tool,
      args: { i },
      idempotent: p.idempotent,
      parallelSafe: p.parallelSafe !== false,
      invoke: () =>
        new Observable<string>((subscriber) => {
          started.add(`c${i}`);
          return timer(p.latency).pipe(map(() => `done c${i}`), finalize(() => undefined)).subscribe(subscriber);
        }),
    }));
    const sub = lanes.changes$.subscribe((change) => change.change === 'granted' && step());
    runBatch(calls, {
      concurrency,
      shared: { lanes, concurrency },
      stop$,
      onActivity: (a: CallActivity) => a.type !== 'queued' && step(),
    }).subscribe({ next: (o) => outcomes.push(o), complete: () => sub.unsubscribe() });
    flush();
  });
  return { outcomes, started, steps, lanes };
}

describe('interruption at every scheduling step', () => {
  const total = attempt(undefined).steps;

  it('has steps to interrupt', () => {
    expect(total).to.be.greaterThan(plan.length * 2);
  });

  for (let k = 0; k < total; k++) {
    it(`cancelled after step ${k}: no permit leaks, every call classified once by what it did`, () => {
      const { outcomes, started, lanes } = attempt(k);
      expect(lanes.size, 'lanes left alive').to.equal(0);
      expect(outcomes.map((o) => o.callId)).to.deep.equal(plan.map((_, i) => `c${i}`));
      for (const outcome of outcomes) {
        const ran = started.has(outcome.callId);
        const { idempotent } = plan[outcome.index]!;
        if (outcome.kind === 'result') expect(ran).to.equal(true);
        else if (outcome.kind === 'indeterminate') {
          expect(ran && !idempotent, `${outcome.callId} indeterminate`).to.equal(true);
        } else {
          expect(outcome.stopped, `${outcome.callId} was stopped`).to.not.equal(undefined);
          if (outcome.dispatched) {
            expect(ran && idempotent, `${outcome.callId} safe to call again`).to.equal(true);
            expect(outcome.error.message).to.match(/Safe to call again$/);
          } else {
            expect(ran, `${outcome.callId} never dispatched`).to.equal(false);
            expect(outcome.error.message).to.equal(`never dispatched: cancelled after step ${k}`);
          }
        }
      }
    });
  }
});
