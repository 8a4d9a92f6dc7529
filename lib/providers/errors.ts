// What a wire adapter throws: the vendor answered with an HTTP error (after its retries),
// answered 2xx with a body that does not decode, or broke off a streamed reply. The runner
// wraps any of them in a ProviderError naming the turn; these carry the facts as fields.
import { AgentLanesError } from '../errors.js';

/** What a failed request says about repeating it. */
export interface RetryFacts {
  readonly isRetryable?: boolean;
  readonly retryAfterSeconds?: number;
}

/** The vendor could not be reached, or answered with an HTTP error status, on every attempt allowed. */
export class ProviderHttpError extends AgentLanesError {
  /** Which wire and host, e.g. `OpenAI Chat Completions at api.openai.com`. */
  readonly provider: string;
  /** The last HTTP status, or undefined when no reply came at all. */
  readonly status: number | undefined;
  /** The vendor's own error type or code (`rate_limit_error`, `invalid_api_key`), when it gave one. */
  readonly code: string | undefined;
  /** How many requests were sent. */
  readonly attempts: number;
  /** Whether the vendor's client judged the request worth repeating (the AI SDK's `isRetryable`), when it said. */
  readonly isRetryable: boolean | undefined;
  /** The wait the vendor asked for before another request (its Retry-After), in seconds, when it asked. */
  readonly retryAfterSeconds: number | undefined;
  constructor(provider: string, status: number | undefined, code: string | undefined, detail: string, attempts: number, facts: RetryFacts = {}) {
    const what = status === undefined ? 'could not be reached' : `replied ${status}${code === undefined ? '' : ` ${code}`}`;
    super(`${provider} ${what}: ${detail}${attempts > 1 ? ` (after ${attempts} attempts)` : ''}`);
    this.provider = provider;
    this.status = status;
    this.code = code;
    this.attempts = attempts;
    this.isRetryable = facts.isRetryable;
    this.retryAfterSeconds = facts.retryAfterSeconds;
  }
}

/**
 * No whole reply came within the provider's `timeoutSeconds`, on every attempt allowed: the
 * endpoint hung (or was too slow). Each request was aborted at its limit. A ProviderHttpError
 * with no status, so code that handles an unreachable vendor handles this too.
 */
export class ProviderTimeoutError extends ProviderHttpError {
  /** How long each request was given, in seconds. */
  readonly seconds: number;
  constructor(provider: string, seconds: number, attempts: number) {
    super(provider, undefined, undefined, `no reply within ${seconds}s`, attempts);
    this.message = `${provider} did not reply within ${seconds}s (its timeoutSeconds)${attempts > 1 ? ` (after ${attempts} attempts)` : ''}`;
    this.seconds = seconds;
  }
}

/** The vendor answered 2xx, but the body is not JSON or does not have the wire format's shape. */
export class ProviderReplyError extends AgentLanesError {
  readonly provider: string;
  constructor(provider: string, detail: string) {
    super(`${provider} sent a reply that does not decode: ${detail}`);
    this.provider = provider;
  }
}

/**
 * A streamed reply broke off after its 2xx: the vendor sent an error event mid-stream, the
 * connection closed, or the stream ended before the reply was complete. Not retried: calls the
 * stream had completed may already be running.
 */
export class ProviderStreamError extends AgentLanesError {
  readonly provider: string;
  /** The vendor's own error type or code (`overloaded_error`, `server_error`), when it sent one. */
  readonly code: string | undefined;
  constructor(provider: string, code: string | undefined, detail: string) {
    super(`${provider} failed mid-stream: ${code === undefined ? '' : `${code}: `}${detail}`);
    this.provider = provider;
    this.code = code;
  }
}
