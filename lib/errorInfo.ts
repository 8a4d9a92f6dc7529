// What anything thrown looks like in events and messages: `toErrorInfo` reads a thrown value (an
// Error, a string, a hostile object) into a plain name and message, never throwing itself.
// Imports nothing, so errors.ts and every other module may import it.

/**
 * The plain shape an error takes in events and messages: a name and a message, and the facts
 * a provider's error carries (`status`, `code`, `attempts`) when it carries them as plain values.
 */
export interface ErrorInfo {
  readonly name: string;
  readonly message: string;
  /** The HTTP status, when the error had one (a provider's ProviderHttpError, wrapped in a ProviderError). */
  readonly status?: number;
  /** The vendor's or system's error code (`rate_limit_error`, `ECONNRESET`), when the error had one. */
  readonly code?: string | number;
  /** How many requests were sent, when the error counted them. */
  readonly attempts?: number;
  /** Whether the request is worth repeating, when the provider's client said (the AI SDK's `isRetryable`). */
  readonly isRetryable?: boolean;
  /** The wait the vendor asked for before another request (its Retry-After), in seconds, when it asked. */
  readonly retryAfterSeconds?: number;
}

/**
 * Turns anything thrown (an Error, a string, an object, undefined) into an ErrorInfo. It never
 * throws itself: a value whose reading throws (a Proxy, an Error whose `message` getter throws)
 * gives an ErrorInfo that says so. `status`, `code`, `attempts`, `isRetryable` and
 * `retryAfterSeconds` are copied when they are the error's own data properties holding a number
 * (a string or a number for `code`, a boolean for `isRetryable`); an error without them gives
 * exactly `{ name, message }`.
 */
export function toErrorInfo(reason: unknown): ErrorInfo {
  if (typeof reason === 'string') return { name: 'Error', message: reason };
  if (reason === null || (typeof reason !== 'object' && typeof reason !== 'function')) return nonError(reason);
  let name: string;
  let message: string;
  try {
    if (reason instanceof Error) {
      name = nameOf(reason);
      message = messageOf(reason);
    } else {
      const { message: text } = reason as { message?: unknown };
      if (typeof text !== 'string') return nonError(reason);
      name = nameOf(reason);
      message = text;
    }
  } catch (unreadable) {
    // Even `instanceof` can throw, through a Proxy's getPrototypeOf trap.
    return { name: 'Error', message: `a value was thrown that cannot be read as an error (${unreadableWhy(unreadable)})` };
  }
  return withFacts(reason, name, message);
}

function nonError(reason: unknown): ErrorInfo {
  return { name: 'Error', message: `a non-Error value was thrown: ${describeThrown(reason)}` };
}

// A name that is not a non-empty string, or that cannot be read, is 'Error'.
function nameOf(reason: object): string {
  try {
    const { name } = reason as { name?: unknown };
    return typeof name === 'string' && name !== '' ? name : 'Error';
  } catch {
    return 'Error';
  }
}

// An Error's message; one that is not a string is described, and one whose getter throws says so.
function messageOf(reason: Error): string {
  let message: unknown;
  try {
    message = reason.message;
  } catch (unreadable) {
    return `the error's message cannot be read (${unreadableWhy(unreadable)})`;
  }
  return typeof message === 'string' ? message : describeThrown(message);
}

// The ErrorInfo, with the facts the error holds as its own plain data. Only own data properties
// are read: no getter runs, and a DOMException's inherited legacy `code` is not one of them.
function withFacts(reason: object, name: string, message: string): ErrorInfo {
  let status: unknown;
  let code: unknown;
  let attempts: unknown;
  let isRetryable: unknown;
  let retryAfterSeconds: unknown;
  try {
    status = ownData(reason, 'status');
    code = ownData(reason, 'code');
    attempts = ownData(reason, 'attempts');
    isRetryable = ownData(reason, 'isRetryable');
    retryAfterSeconds = ownData(reason, 'retryAfterSeconds');
  } catch {
    return { name, message };
  }
  const hasStatus = isCount(status);
  const hasCode = isCount(code) || (typeof code === 'string' && code !== '');
  const hasAttempts = isCount(attempts);
  const hasRetryable = typeof isRetryable === 'boolean';
  const hasRetryAfter = isCount(retryAfterSeconds) && retryAfterSeconds >= 0;
  if (!hasStatus && !hasCode && !hasAttempts && !hasRetryable && !hasRetryAfter) return { name, message };
  return {
    name,
    message,
    ...(hasStatus ? { status: status as number } : {}),
    ...(hasCode ? { code: code as string | number } : {}),
    ...(hasAttempts ? { attempts: attempts as number } : {}),
    ...(hasRetryable ? { isRetryable: isRetryable as boolean } : {}),
    ...(hasRetryAfter ? { retryAfterSeconds: retryAfterSeconds as number } : {}),
  };
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function ownData(target: object, key: string): unknown {
  const descriptor = Object.getOwnPropertyDescriptor(target, key);
  return descriptor !== undefined && 'value' in descriptor ? descriptor.value : undefined;
}

// What reading a thrown value threw, for the message; itself read with care, once.
function unreadableWhy(thrown: unknown): string {
  try {
    if (typeof thrown === 'string') return thrown;
    if (thrown instanceof Error) {
      const { message } = thrown;
      if (typeof message === 'string') return message;
    }
  } catch {
    // A failure while reading a failure: nothing more can be said about it.
  }
  return 'reading it threw';
}

function describeThrown(reason: unknown): string {
  if (reason === undefined) return 'undefined';
  if (typeof reason === 'bigint') return `${reason}n`;
  try {
    return JSON.stringify(reason) ?? String(reason);
  } catch {
    // A getter, a toJSON or a proxy trap that throws; a BigInt inside.
  }
  try {
    return Object.prototype.toString.call(reason);
  } catch {
    // A revoked Proxy, or a Symbol.toStringTag getter that throws.
    return 'a value that cannot be read';
  }
}
