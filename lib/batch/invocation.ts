// What the batch needs around a body's invocation: telling a Promise from a value, the
// reason a body's signal aborts with, and reporting an error nobody can receive.

/**
 * True for anything with a `then` method: a Promise, or a thenable. It reads `then`, which a
 * hostile value (a getter, a Proxy) can make throw: whoever asks about a value it did not make
 * (a body's answer) guards the call.
 */
export function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/** Why a body's signal aborted: it was torn down before it settled. */
export class InvocationAbortedError extends Error {
  override readonly name = 'AbortError';
}

export { reportUnhandled } from '../unhandled.js';
