// The first stage of a batch: each call becomes its record (numbered in the order it arrived),
// and the records are grouped into phases, one Observable each. Consecutive parallel-safe calls
// share a phase; a parallelSafe:false call is a phase alone. A phase may still be receiving calls
// (a model still writing its turn) while it runs: `concatMap` runs the phases one after another.
import { Observable, type OperatorFunction, type Subscriber } from 'rxjs';
import type { BatchCall } from '../types.js';
import { BatchScope, type BatchScopeOptions } from '../batchScope.js';
import { CallRecord } from '../records.js';
import { Stage, staged } from '../../directSubscriber.js';

// One phase: its records, kept until `concatMap` subscribes (the phase before it may still run),
// then passed on as they come. One of these per phase, never per call.
class Phase {
  // Records that arrived before anyone subscribed.
  private early: CallRecord[] = [];
  // Who reads the phase, once subscribed.
  private reader: Subscriber<CallRecord> | undefined = undefined;
  // True once no more records will come.
  private closed = false;
  // True once the reader left: later records go nowhere.
  private left = false;

  constructor(readonly parallelSafe: boolean) {}

  push(record: CallRecord): void {
    if (this.left) return;
    if (this.reader === undefined) this.early.push(record);
    else this.reader.next(record);
  }

  close(): void {
    this.closed = true;
    this.reader?.complete();
  }

  read(reader: Subscriber<CallRecord>): () => void {
    if (this.reader !== undefined) {
      reader.error(new Error('a phase can be read once'));
      return () => undefined;
    }
    this.reader = reader;
    const early = this.early;
    this.early = [];
    for (const record of early) {
      if (reader.closed) break;
      reader.next(record);
    }
    if (this.closed) reader.complete();
    return () => {
      this.left = true;
      this.reader = undefined;
    };
  }
}

/**
 * Turns a stream of calls into a stream of phases: consecutive parallel-safe calls share one
 * phase, a call with `parallelSafe: false` is a phase alone. Each call becomes its `CallRecord`,
 * the one object every later stage reads and writes, numbered in arrival (call) order.
 *
 * Run the phases one after another with `concatMap`: a phase starts when the one before it is
 * done, and a phase can start while its calls are still arriving.
 *
 * ## Example
 * ```ts
 * from(calls).pipe(
 *   phases(),
 *   concatMap((phase$) => phase$.pipe(inLanes({ concurrency }))),
 *   untilStopped(stop$),
 *   inCallOrder(),
 *   settle(),
 * ).subscribe((record) => console.log(record.outcome));
 * ```
 *
 * @param options the batch every record belongs to (a runner passes its own), or what to make one
 *   with: the clock, an activity sink, the stop from outside. One batch per subscription.
 */
export function phases(options: BatchScopeOptions | (() => BatchScope) = {}): OperatorFunction<BatchCall | CallRecord, Observable<CallRecord>> {
  return staged((out) => new Phasing(out, typeof options === 'function' ? options() : new BatchScope(options)));
}

// One subscription of phases: the phase receiving calls now, and the next call's index.
class Phasing extends Stage<BatchCall | CallRecord, Observable<CallRecord>> {
  private current: Phase | undefined = undefined;
  private index = 0;

  constructor(
    out: Subscriber<Observable<CallRecord>>,
    private readonly batch: BatchScope,
  ) {
    super(out);
  }

  protected take(value: BatchCall | CallRecord): void {
    const record = value instanceof CallRecord ? value : this.batch.record(value, this.index);
    this.index++;
    const safe = record.parallelSafe;
    const { current } = this;
    const phase = current !== undefined && safe && current.parallelSafe ? current : this.open(safe);
    phase.push(record);
    // A call that is not parallel-safe is alone in its phase: the next call opens another.
    if (!safe) {
      phase.close();
      this.current = undefined;
    }
  }

  protected override sourceCompleted(): void {
    this.batch.arrived(this.index);
    this.current?.close();
    this.current = undefined;
    this.out.complete();
  }

  override unsubscribe(): void {
    this.current = undefined;
    super.unsubscribe();
  }

  private open(parallelSafe: boolean): Phase {
    this.current?.close();
    const phase = new Phase(parallelSafe);
    this.current = phase;
    this.out.next(new Observable<CallRecord>((reader) => phase.read(reader)));
    return phase;
  }
}
