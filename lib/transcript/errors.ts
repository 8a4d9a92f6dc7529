// The ways a cassette refuses: a file that is not a cassette, an agent or tools that are
// not the ones it was recorded with, a replay asking for what it does not hold, entries
// a replay left unused, and a replayed transcript that differs. Each carries its facts as fields.
import { AgentLanesError } from '../errors.js';
import { describeDifference, type Difference } from './differences.js';

/** Where in a cassette: a turn, and (for a tool call) the call's index in that turn, its id and tool. */
export interface CassetteEntryRef {
  readonly turn: number;
  /** The call's position in the model's response (0-based, as the batch numbers calls). */
  readonly index?: number;
  readonly callId?: string;
  readonly tool?: string;
}

/** `turn 2` or `turn 1, call c3 (lookup, index 2)`. */
export function describeEntry(ref: CassetteEntryRef): string {
  if (ref.callId === undefined) return `turn ${ref.turn}`;
  return `turn ${ref.turn}, call ${ref.callId} (${ref.tool ?? '?'}, index ${ref.index ?? '?'})`;
}

abstract class CassetteError extends AgentLanesError {}

/** Text that is not a cassette this library can read; `path` is where it went wrong. */
export class CassetteFormatError extends CassetteError {
  readonly path: string;
  constructor(path: string, detail: string) {
    super(`not a cassette: ${detail}`);
    this.path = path;
  }
}

/** Replay refused: the agent or its tools are not the ones the cassette was recorded with. */
export class FingerprintMismatchError extends CassetteError {
  /** The cassette's fingerprint hash. */
  readonly recorded: string;
  /** The fingerprint hash of the agent and tools offered for replay. */
  readonly current: string;
  /** What changed, one entry per path (`tools.lookup.description`, `agent.model`). */
  readonly changes: readonly Difference[];
  constructor(recorded: string, current: string, changes: readonly Difference[]) {
    super(
      `the cassette was recorded with a different agent or tools (fingerprint ${recorded.slice(0, 12)}, now ${current.slice(0, 12)}): ` +
        `${changes.map(describeDifference).join('; ')}. Record the cassette again`,
    );
    this.recorded = recorded;
    this.current = current;
    this.changes = changes;
  }
}

/** The replayed run asked for something the cassette does not hold (or not at that point). */
export class CassetteMissError extends CassetteError {
  readonly turn: number;
  readonly index: number | undefined;
  readonly callId: string | undefined;
  readonly tool: string | undefined;
  /** The recorded entry nearest to what was asked, when there is one. */
  readonly closest: CassetteEntryRef | undefined;
  /** Where the request differs from the closest recorded one, for a request that differs. */
  readonly difference: Difference | undefined;
  constructor(at: CassetteEntryRef, detail: string, closest?: CassetteEntryRef, difference?: Difference) {
    const pointer = closest === undefined ? '' : `; the closest recorded entry is ${describeEntry(closest)}`;
    super(`cassette miss at ${describeEntry(at)}: ${detail}${pointer}`);
    this.turn = at.turn;
    this.index = at.index;
    this.callId = at.callId;
    this.tool = at.tool;
    this.closest = closest;
    this.difference = difference;
  }
}

/** The replayed run ended without using every recorded entry. */
export class CassetteUnusedError extends CassetteError {
  readonly unused: readonly CassetteEntryRef[];
  constructor(unused: readonly CassetteEntryRef[]) {
    super(
      `the replay ended with ${unused.length} recorded ${unused.length === 1 ? 'entry' : 'entries'} unused: ` +
        `${unused.map(describeEntry).join('; ')}. The run did less than the recorded one`,
    );
    this.unused = unused;
  }
}

/** The replayed run's transcript differs from the recorded one. */
export class TranscriptMismatchError extends CassetteError {
  /** The position of the first event that differs. */
  readonly index: number;
  readonly difference: Difference;
  constructor(index: number, difference: Difference) {
    super(`the replayed transcript differs from the recorded one at event ${index}: ${describeDifference(difference)}`);
    this.index = index;
    this.difference = difference;
  }
}
