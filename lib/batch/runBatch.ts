// The heart: one model turn's calls -> one outcome per call, in call order. runBatch is the
// pipe of the batch's stages, each an operator of its own (lib/batch/operators/), read as the
// sentence: a turn is an Observable of calls, through phases run one after another, each gated
// in call order and fanned out inside its lanes, timed by per-call ceilings, until stopped,
// reordered into call order, and settled in call order.
import { concat, concatMap, from, identity, isObservable, NEVER, Observable, of, tap, type ObservableInput, type Subscription } from 'rxjs';
import type { Keep } from '../keep.js';
import { ConcurrencyConfig } from '../config/index.js';
import { BatchScope } from './batchScope.js';
import { ceiling } from './operators/ceiling.js';
import { gate } from './operators/gate.js';
import { inCallOrder } from './operators/inCallOrder.js';
import { inLanes } from './operators/inLanes.js';
import { phases } from './operators/phases.js';
import { settle } from './operators/settle.js';
import { Stage } from '../directSubscriber.js';
import { untilStopped } from './operators/untilStopped.js';
import { CallBody } from './callBody.js';
import type { CallNews, CallRecord } from './records.js';
import type { BatchCall, BatchOptions, Outcome } from './types.js';

/**
 * Runs one turn's calls concurrently inside their lanes and emits one outcome per call,
 * in call order, as soon as each and every earlier call have settled.
 *
 * `calls` is an array, or an Observable of calls (a model still writing its turn): a call is
 * gated and enters its lanes as soon as it arrives, a `parallelSafe: false` call still waits for
 * everything before it. Lanes are taken in one fixed order: tenant, turn, turn-tool, tool, the
 * call's own lane if it names one, then the identical-arguments lane of a call that is not
 * parallel-safe. A call's `perToolSeconds` ceiling runs from its start (every lane granted),
 * not from queueing. The Observable is cold: each subscription is
 * a new batch.
 *
 * ## Example
 * ```ts
 * const calls = ['a', 'b', 'c', 'd'].map((q) => ({ callId: q, tool: 'lookup', invoke: () => fetchIt(q) }));
 * runBatch(calls, { concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }) })
 *   .subscribe((o) => console.log(o.callId, o.kind));
 * // a result, b result, c result, d result: in call order, whichever finished first
 * ```
 */
export function runBatch(calls: Observable<BatchCall> | readonly BatchCall[], options: BatchOptions = {}): Observable<Outcome> {
  const turn = options.concurrency ?? new ConcurrencyConfig();
  if (!(turn instanceof ConcurrencyConfig)) throw new TypeError('runBatch: options.concurrency must be a ConcurrencyConfig');
  const given = isObservable(calls);
  if (!given && !Array.isArray(calls)) throw new TypeError('runBatch: calls must be an array or an Observable of calls');
  const limits = { perToolSeconds: turn.perToolSeconds, toolCallSeconds: options.deadline?.toolCallSeconds };
  // The stages that keep nothing of their own between subscriptions are made once per batch Observable.
  const gated = gate(options.gate);
  const laned = inLanes(options);
  const inPhase = (phase$: Observable<CallRecord>): Observable<CallNews> => phase$.pipe(gated, laned);
  const timed = ceiling(limits);
  // A write-ahead that keeps decided outcomes hears each one before the reorder (no step otherwise).
  const writeAhead = options.writeAhead;
  const decided =
    writeAhead?.decided === undefined
      ? identity
      : tap<CallNews>((news) => {
          if (!(news instanceof CallBody) && news.outcome !== undefined) writeAhead.decided!(news.outcome);
        });
  const ordered = inCallOrder();
  const settled = settle(options.settle);
  return new Observable<Outcome>((subscriber) => {
    // One batch per subscription: its records, clock, activity and stop, shared by every stage.
    // A turn given whole says how many calls it has: lanes that cannot bind are not taken.
    const batch = new BatchScope(options, given ? undefined : (calls as readonly BatchCall[]));
    // Registered before the stages are subscribed: a subscriber that leaves while they are still
    // being subscribed (its calls answering synchronously) closes the batch at once, which ends
    // every call in its lanes where it stands (body aborted, permits left) and enters no more.
    // The stages end inside close(), after it stops hearing stops and before it tells watchers
    // how the calls left in flight ended: decided before their teardown, they would keep their
    // bodies running (neither aborted nor unsubscribed).
    let stages: Subscription | undefined;
    subscriber.add(() => batch.close(() => stages?.unsubscribe()));
    const calls$: Observable<BatchCall> = given ? (calls as Observable<BatchCall>) : from(calls as ObservableInput<BatchCall>);
    stages = calls$
      .pipe(phases(() => batch), concatMap(inPhase), timed, untilStopped(batch), decided, ordered, settled)
      .subscribe(new Outcomes(subscriber));
    // A subscriber that already left ends these at once.
    return stages;
  });
}

// The batch's outcomes as its subscriber takes them, from the records of the last stage.
class Outcomes extends Stage<CallRecord, Outcome> {
  protected take(record: CallRecord): void {
    this.out.next(record.outcome!);
  }
}

/**
 * @internal An idle batch, for keepWarmShapes (lib/shapes.ts): one call whose body never answers,
 * in a turn that never ends, timed by a ceiling it has not got, so the hidden classes of a batch,
 * its stages and its records outlive every burst. It holds no timer and no shared lane.
 */
export function keepShapes(keep: Keep): void {
  const idleCall: BatchCall = { callId: 'idle', tool: 'idle', invoke: () => NEVER };
  keep(() => runBatch(concat(of(idleCall), NEVER), { concurrency: new ConcurrencyConfig({ perToolSeconds: { none: 1 } }) }).subscribe());
}
