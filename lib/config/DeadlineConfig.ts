// DeadlineConfig: ceilings on the run as a whole, as opposed to a tool's own
// perToolSeconds. Passing either ends the run (RUN_FAILED, DeadlineExceededError).
import * as t from 'io-ts';
import { decodeConfig, PositiveSeconds } from './limits.js';

const Options = t.partial({ toolCallSeconds: PositiveSeconds, runSeconds: PositiveSeconds });
const fields = ['toolCallSeconds', 'runSeconds'] as const;

export interface DeadlineOptions {
  /** Any one call in flight longer than this ends the whole run; siblings are stopped and classified. */
  readonly toolCallSeconds?: number | undefined;
  /** The whole run, model turns and batches together, ends after this long. */
  readonly runSeconds?: number | undefined;
}

/** Run-wide ceilings, in seconds. Absent means none. */
export class DeadlineConfig {
  readonly toolCallSeconds: number | undefined;
  readonly runSeconds: number | undefined;

  constructor(options: DeadlineOptions = {}) {
    const decoded = decodeConfig(Options, fields, options, 'DeadlineConfig');
    this.toolCallSeconds = decoded.toolCallSeconds;
    this.runSeconds = decoded.runSeconds;
    Object.freeze(this);
  }
}
