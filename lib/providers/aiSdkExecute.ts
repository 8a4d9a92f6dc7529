// What an AI SDK tool's execute answers, as a tool body's answer, for both ways this package runs
// one (registerAiSdkTools' bodies, withLanes' wrapped executes): a value or a Promise as it is, an
// output that streams (an AsyncIterable that is not a Promise) drained to its last value, the
// SDK's final output; a failure, thrown or rejected, with a 429 made a RateLimitedError.
import { isPromiseLike } from '../batch/index.js';
import { rateLimitedFrom } from '../rateLimited.js';
import { fromAiSdkError } from './aiSdkErrors.js';

/**
 * A failure of an execute as the call's: a 429 the SDK raised (an execute that calls a model or
 * an API through it: APICallError, its Retry-After read) or any error saying HTTP 429 becomes a
 * RateLimitedError, so the tool's rate lane pauses; anything else goes as it is.
 */
export function slowedDown(error: unknown): never {
  throw rateLimitedFrom(fromAiSdkError(error, 'an AI SDK tool')) ?? error;
}

// True for an output that streams: it has an async iterator.
function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function';
}

// The last value of an output that streams: the SDK's final output.
async function lastOf(iterable: AsyncIterable<unknown>): Promise<unknown> {
  let last: unknown;
  for await (const value of iterable) last = value;
  return last;
}

/** Runs `execute` (an execute called with its input and options) and answers as a tool body: see above. */
export function executeAnswer(execute: () => unknown): unknown {
  let output: unknown;
  try {
    output = execute();
  } catch (error) {
    slowedDown(error);
  }
  if (isAsyncIterable(output) && !isPromiseLike(output)) return lastOf(output).catch(slowedDown);
  return isPromiseLike(output) ? Promise.resolve(output).then(undefined, slowedDown) : output;
}
