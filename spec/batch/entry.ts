// A stand-in for the stage that enters records in their lanes (inLanes), for the unit specs of a
// record's parts: it takes the lanes it is given, in order, and writes down what it hears.
import { LaneTable, type LaneStore, type Loan } from '../../lib/lanes/index.js';
import type { CallBody, CallRecord, LaneEntry, LaneStep } from '../../lib/batch/index.js';
import type { LoopMonitor } from '../../lib/tools/index.js';
import { brief } from './helpers.js';

/** One lane step of `store` (a fresh table's by default), for `party` ''. */
export function step(key: string, limit: number, store: LaneStore, loan?: Loan): LaneStep {
  return { store, key, limit, party: '', loan };
}

export class Entry implements LaneEntry {
  lent: ReadonlyMap<string, Loan> = new Map();
  readonly monitor: LoopMonitor | undefined;
  closing = false;
  /** What it heard, in order: `a>` a body starting, `a=1` an outcome, `a.` a record over. */
  readonly heard: string[] = [];

  constructor(
    private readonly steps: readonly LaneStep[] = [],
    readonly abandonAfterSeconds: number | undefined = undefined,
    readonly sharedLanes: LaneStore = new LaneTable(),
    monitor?: LoopMonitor,
  ) {
    this.monitor = monitor;
  }

  started(body: CallBody): void {
    this.heard.push(`${body.record.call.callId}>`);
  }

  ended(record: CallRecord): void {
    this.heard.push(brief(record.outcome!));
  }

  done(record: CallRecord): void {
    this.heard.push(`${record.call.callId}.`);
  }

  lanesOf(): readonly LaneStep[] {
    return this.steps;
  }
}
