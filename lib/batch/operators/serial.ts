// The one-at-a-time engine the gate and settling share, as RxJS's concatMap is mergeMap with a
// concurrency of one: records queue in arrival order, and each is handed to its step only once
// the one before it is through. Plain state (a queue and a few flags), no Subscriber and no
// closure per record: only one record is in its step at a time, so whether it is through is
// the engine's to keep.
import type { MonoTypeOperatorFunction, Subscriber, Unsubscribable } from 'rxjs';
import type { CallRecord } from '../records.js';
import { Stage, staged } from '../../directSubscriber.js';

/** What a serial stage does with one record. */
export interface SerialStage {
  /** Records this stage takes; the others go no further (default: all). */
  takes?(record: CallRecord): boolean;
  /** True when the queue must wait where it is (a stopped batch asks nobody): the record stays first. */
  stays?(record: CallRecord): boolean;
  /**
   * Handles `record`, passing it on with `serial.through(record)`, after which the next may go
   * (or failing the stage with `serial.fail`): at once, or later, returning what ends the
   * pending answer if the stage is left meanwhile.
   */
  step(record: CallRecord, serial: Serial): Unsubscribable | undefined;
  /** Told once `record` went on, before the next is handed to its step (settle: FAIL_RUN stops the batch here). */
  wentOn?(record: CallRecord): void;
}

const idle: Unsubscribable = { unsubscribe: () => undefined };

/** One subscription of a serial stage. */
export class Serial extends Stage<CallRecord> {
  // Records waiting for their turn, from `head` on.
  private queue: Array<CallRecord | undefined> = [];
  private head = 0;
  // The record in its step: what ends its awaited answer (or a mark that one is awaited).
  private busy: Unsubscribable | undefined = undefined;
  // True once the source completed.
  private sourceDone = false;
  // True while the queue is being worked through: a re-entered drain returns.
  private draining = false;
  // True while a step runs, and whether it said its record is through before returning.
  private stepping = false;
  private passed = false;

  constructor(
    out: Subscriber<CallRecord>,
    private readonly stage: SerialStage,
  ) {
    super(out);
    // A record still in its step when the source ends is waited for; leaving ends its answer.
    out.add(() => this.leave());
  }

  /** Fails the stage: the step could not do its work. */
  fail(error: unknown): void {
    this.out.error(error);
  }

  /** The record in its step is through: it goes on, and the next may go. */
  through(record: CallRecord): void {
    this.out.next(record);
    this.stage.wentOn?.(record);
    if (this.stepping) {
      this.passed = true;
      return;
    }
    if (this.busy === undefined) return;
    this.busy = undefined;
    this.drain();
  }

  protected take(record: CallRecord): void {
    const { takes } = this.stage;
    if (takes !== undefined && !takes(record)) return;
    // Nothing ahead of it: straight to its step, without a queue (none is made for a stage whose
    // steps all answer at once).
    if (this.head === this.queue.length && this.busy === undefined && !this.draining && this.stage.stays?.(record) !== true) {
      this.draining = true;
      try {
        this.handle(record);
      } finally {
        this.draining = false;
      }
      // Records that came, or the source's end, while it was in its step are seen to now.
      if (this.busy === undefined && (this.head < this.queue.length || this.sourceDone)) this.drain();
      return;
    }
    this.queue.push(record);
    this.drain();
  }

  // Hands `record` to its step; false when the next record must wait for its answer.
  private handle(record: CallRecord): boolean {
    this.stepping = true;
    this.passed = false;
    let pending: Unsubscribable | undefined;
    try {
      pending = this.stage.step(record, this);
    } finally {
      this.stepping = false;
    }
    if (this.passed) return true;
    this.busy = pending ?? idle;
    return false;
  }

  protected override sourceCompleted(): void {
    this.sourceDone = true;
    this.drain();
  }

  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    const { out, stage } = this;
    try {
      while (this.busy === undefined && this.head < this.queue.length && !out.closed) {
        const record = this.queue[this.head]!;
        if (stage.stays?.(record) === true) return;
        this.queue[this.head++] = undefined;
        if (!this.handle(record)) return;
      }
      if (this.head === this.queue.length) {
        if (this.head > 0) {
          this.queue = [];
          this.head = 0;
        }
        if (this.sourceDone && this.busy === undefined && !out.closed) out.complete();
      }
    } finally {
      this.draining = false;
    }
  }

  private leave(): void {
    const { busy } = this;
    this.busy = undefined;
    this.queue = [];
    busy?.unsubscribe();
  }
}

/** The operator whose subscriptions run `stage` one record at a time, in arrival order. */
export function serial(stage: SerialStage): MonoTypeOperatorFunction<CallRecord> {
  return staged((out) => new Serial(out, stage));
}
