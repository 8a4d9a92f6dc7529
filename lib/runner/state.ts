// What a run keeps, as it keeps it: its state (deeply frozen JSON-like data, replaced as each
// batch's deltas are merged), the deltas its calls record (frozen copies), and the tool message the
// model reads for each call's outcome. Plain functions over data, for the run, its turns, and a run
// rebuilt from its journal alike.
import type { Delta, Outcome } from '../batch/index.js';
import { ConfigError, toErrorInfo } from '../errors.js';
import { tooDeep } from '../nesting.js';
import { frozenPlainCopy, jsonLike, NotPlainDataError, type RunState } from '../tools/index.js';
import type { Message } from './model/model.js';

/** The state of a run that has none: one frozen object, shared. */
export const emptyState: RunState = Object.freeze({});

/**
 * A run's starting state as the run keeps it: a deeply frozen copy of JSON-like data, so the
 * caller's object is never read again and every turn can hand the same object to its tools.
 * Anything else is a ConfigError naming the path of the first value that is not.
 */
export function startingState(state: Readonly<Record<string, unknown>>): RunState {
  if (Object.keys(state).length === 0) return emptyState;
  try {
    return frozenPlainCopy(state, 'state') as RunState;
  } catch (error) {
    if (error instanceof NotPlainDataError) throw new ConfigError(error.path, error.found === tooDeep ? error.message : `state must hold JSON-like data (${jsonLike}): ${error.message}`);
    throw new ConfigError('state', `state cannot be read (${toErrorInfo(error).message})`);
  }
}

// A delta as the run keeps it: a deeply frozen copy, so neither the state nor a cassette
// changes when the body goes on changing its own object. JSON-like data only, as the state.
export function recordable(delta: Delta): Delta {
  try {
    return frozenPlainCopy(delta, 'delta') as Delta;
  } catch (error) {
    if (error instanceof NotPlainDataError) throw new TypeError(`record(delta) takes JSON-like data (${jsonLike}): ${error.message}`);
    throw error;
  }
}

/** What the model reads for an outcome: the result as JSON (a string as itself), or the failure. */
export function toolMessage(outcome: Outcome, content: string | undefined): Message {
  switch (outcome.kind) {
    case 'result':
      return { role: 'tool', toolCallId: outcome.callId, content: content ?? '' };
    case 'error':
      return { role: 'tool', toolCallId: outcome.callId, content: `${outcome.error.name}: ${outcome.error.message}`, isError: true };
    case 'indeterminate':
      return { role: 'tool', toolCallId: outcome.callId, content: outcome.message, isError: true };
  }
}
