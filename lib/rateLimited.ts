// A partner's "slow down", whatever shape it came in, as a RateLimitedError: an HTTP 429 (a wire
// adapter's ProviderHttpError, the AI SDK's APICallError once read by fromAiSdkError, an MCP
// transport's HTTP error), with the wait the partner asked for when it gave one. Imports only
// errors.ts, so every layer that meets a partner's refusal can use it.
import { RateLimitedError } from './errors.js';

const TOO_MANY_REQUESTS = 429;

// An own data property's value, never running a getter.
function ownData(target: object, key: string): unknown {
  const descriptor = Object.getOwnPropertyDescriptor(target, key);
  return descriptor !== undefined && 'value' in descriptor ? descriptor.value : undefined;
}

/**
 * `error` as a RateLimitedError when it is one, or says HTTP 429 (its own `status`, `statusCode`
 * or, for an MCP transport's error, numeric `code`); undefined otherwise. The wait is the error's
 * own `retryAfterSeconds` when it has one (0 when the partner gave none); the original error is
 * kept as `cause`.
 *
 * ## Example
 * ```ts
 * try {
 *   return await callPartner();
 * } catch (error) {
 *   throw rateLimitedFrom(error) ?? error; // a 429 pauses the tool's rate lane
 * }
 * ```
 */
export function rateLimitedFrom(error: unknown): RateLimitedError | undefined {
  if (error instanceof RateLimitedError) return error;
  if (error === null || typeof error !== 'object') return undefined;
  try {
    const status = ownData(error, 'status') ?? ownData(error, 'statusCode') ?? ownData(error, 'code');
    if (status !== TOO_MANY_REQUESTS) return undefined;
    const asked = ownData(error, 'retryAfterSeconds');
    const seconds = typeof asked === 'number' && Number.isFinite(asked) && asked >= 0 ? asked : 0;
    const message = ownData(error, 'message');
    const limited = new RateLimitedError(typeof message === 'string' && message !== '' ? message : 'the partner answered 429 Too Many Requests', seconds);
    (limited as { cause?: unknown }).cause = error;
    return limited;
  } catch {
    // A hostile value (a Proxy whose traps throw) says nothing about waiting.
    return undefined;
  }
}
