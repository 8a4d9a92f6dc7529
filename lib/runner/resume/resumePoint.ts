// A resume point: where a run that was left mid-turn (waiting for a person, or its process gone)
// goes on. Its turn's calls are the model's, as its conversation holds them; some have their
// outcome already (never run again: their events go out in call order, among the others'), some
// passed their gate already (dispatched without asking again), the rest run as any call does.
// The run then goes on to its next turns. Snapshots (snapshot.ts) and a run journal both build one;
// the resumed turn itself is turn/resumedTurn.ts.
import type { Outcome } from '../../batch/index.js';
import { describeValue } from '../../config/index.js';
import { ConfigError } from '../../errors.js';
import type { RunState } from '../../tools/index.js';
import type { RunEvent } from '../events.js';
import type { Message, ToolCall, Usage } from '../model/model.js';
import type { NestedResume } from './snapshotFormat.js';

/** One call of the resumed turn, by its place in the model's calls. */
export interface ResumedCall {
  /** Its outcome, when it has one already (a result in its JSON form): it is never run again. */
  readonly outcome?: Outcome;
  /** True when its event went out before (its tool message is in `messages`): it is not told again. */
  readonly told?: boolean;
  /** True when its settle steps (output guardrail, end hook) ran before: its outcome is final. `told` implies it. */
  readonly settled?: boolean;
  /** True when it passed its gate before (start hook, input guardrail, approval): it runs without being asked again. */
  readonly gated?: boolean;
  /** Its body's nested run waited: the body runs again, and its first runAgent goes on from here. */
  readonly nested?: NestedResume;
}

/** Where a run goes on: its turn `turn`, whose batch is left as `calls` say. */
export interface ResumePoint {
  /** The run's id, kept: its calls' idempotency keys stay the same. */
  readonly runId: string;
  /** The turn whose batch goes on; the model answered it already. */
  readonly turn: number;
  /**
   * The conversation: up to the turn's assistant message (whose `toolCalls` are the batch's
   * calls), then the tool messages of the calls told already, in call order.
   */
  readonly messages: readonly Message[];
  /** The run's state when the batch started (the calls' deltas are merged when it ends). */
  readonly state: RunState;
  /** The turn's calls, by index; a call missing here (or past its end) runs from its gate. */
  readonly calls: readonly (ResumedCall | undefined)[];
  /** The tokens of the run's own turns so far, and those its nested runs reported. */
  readonly usage?: Usage;
  readonly nestedUsage?: Usage;
  /** The transcript so far: a resumed `run()` resolves with it followed by what comes next. */
  readonly events?: readonly RunEvent[];
}

/**
 * The model's calls of the point's turn (those of its last assistant message, at `asked` in its
 * messages), checked against `calls`: a ConfigError names the first field that does not fit.
 */
export function resumedCalls(point: ResumePoint): { readonly toolCalls: readonly ToolCall[]; readonly asked: number } {
  const { turn, messages, calls } = point;
  if (!Number.isInteger(turn) || turn < 1) throw new ConfigError('turn', `turn must be a positive integer, got ${describeValue(turn)}`);
  let asked = -1;
  for (let i = messages.length - 1; i >= 0 && asked < 0; i--) if (messages[i]!.role === 'assistant') asked = i;
  const toolCalls = asked < 0 ? undefined : messages[asked]!.toolCalls;
  if (toolCalls === undefined || toolCalls.length === 0) throw new ConfigError('messages', 'messages must end with the turn\'s assistant message asking for calls, then the tool messages of the calls told already');
  if (calls.length > toolCalls.length) throw new ConfigError('calls', `calls has ${calls.length} entries for a turn of ${toolCalls.length} calls`);
  const told = messages.length - asked - 1;
  calls.forEach((call, index) => {
    const field = `calls[${index}]`;
    if (call === undefined) return;
    const { outcome } = call;
    if (outcome !== undefined && (outcome.index !== index || outcome.callId !== toolCalls[index]!.id)) {
      throw new ConfigError(`${field}.outcome`, `${field}.outcome must be call #${index + 1}'s (${toolCalls[index]!.id}), got index ${describeValue(outcome.index)} and callId ${describeValue(outcome.callId)}`);
    }
    if (call.told === true && (outcome === undefined || index >= told)) throw new ConfigError(`${field}.told`, `${field} is told, but only a call with an outcome whose tool message is in messages can be (${told} are)`);
  });
  for (let index = 0; index < told; index++) {
    if (calls[index]?.told !== true) throw new ConfigError(`calls[${index}].told`, `the first ${told} calls are answered in messages: calls[${index}] must be told, with its outcome`);
  }
  return { toolCalls, asked };
}
