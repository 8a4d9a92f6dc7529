// What an AI SDK model's failure becomes: the SDK's APICallError (an HTTP error status, or no
// reply at all) a ProviderHttpError with the facts the fetch adapters' errors carry (`status`,
// `code`, `attempts`, `isRetryable`, `retryAfterSeconds`), and a vendor's error sent mid-stream
// (an `error` part holding the vendor's own error object) a ProviderStreamError. Read from the
// error's own fields and the SDK's marker symbol: nothing of the SDK is imported.
import { clip, retryAfterMs } from './http.js';
import { ProviderHttpError, ProviderStreamError } from './errors.js';

// The AI SDK marks each of its errors with a symbol of the registry (`isInstance` reads it), so
// an APICallError of either major, or of a second copy of the package, is known without importing it.
const API_CALL_ERROR = Symbol.for('vercel.ai.error.AI_APICallError');

/** The fields of the SDK's APICallError the adapter reads. */
interface ApiCallError {
  readonly message: string;
  readonly statusCode?: number | undefined;
  readonly isRetryable?: boolean | undefined;
  readonly responseHeaders?: Record<string, string> | undefined;
  readonly data?: unknown;
}

function isApiCallError(error: unknown): error is ApiCallError {
  if (error === null || typeof error !== 'object') return false;
  try {
    return (error as Record<symbol, unknown>)[API_CALL_ERROR] === true && typeof (error as { message?: unknown }).message === 'string';
  } catch {
    return false;
  }
}

const record = (value: unknown): Record<string, unknown> | undefined =>
  value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
const nonEmpty = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

// The vendor's error type or code from its error body as the SDK parsed it: `{error:{type|code}}`
// (OpenAI, Anthropic), or `{type|code}` for an error object sent on its own.
function vendorCode(body: unknown): string | undefined {
  const outer = record(body);
  const inner = record(outer?.['error']) ?? outer;
  return nonEmpty(inner?.['type']) === 'error' ? undefined : (nonEmpty(inner?.['type']) ?? nonEmpty(inner?.['code']));
}

/**
 * `error` as the run should see it: an APICallError as a ProviderHttpError naming the model
 * (`provider`), its status, the vendor's code, one attempt (the adapter does not retry; the SDK's
 * retries live in `generateText` and `streamText`), whether the SDK judged it worth repeating
 * and the Retry-After it was sent. Anything else is returned as it is.
 */
export function fromAiSdkError(error: unknown, provider: string, now: () => number = Date.now): unknown {
  if (!isApiCallError(error)) return error;
  const status = typeof error.statusCode === 'number' ? error.statusCode : undefined;
  const headers = record(error.responseHeaders);
  let retryAfterSeconds: number | undefined;
  if (headers !== undefined) {
    try {
      const ms = retryAfterMs(new Headers(headers as Record<string, string>), now());
      if (ms !== undefined) retryAfterSeconds = ms / 1000;
    } catch {
      // Headers the Fetch API refuses (a bad name or value) say nothing about waiting.
    }
  }
  const http = new ProviderHttpError(provider, status, vendorCode(error.data), clip(error.message), 1, {
    ...(typeof error.isRetryable === 'boolean' ? { isRetryable: error.isRetryable } : {}),
    ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
  });
  (http as { cause?: unknown }).cause = error;
  return http;
}

/**
 * An `error` part's error as the run should see it: an APICallError as above; the vendor's own
 * error object sent mid-stream (`{ message, type }`, as the SDK's OpenAI and Anthropic models
 * pass it on) as a ProviderStreamError with its code; anything else as it is.
 */
export function fromAiSdkStreamError(error: unknown, provider: string): unknown {
  if (isApiCallError(error)) return fromAiSdkError(error, provider);
  if (error instanceof Error) return error;
  const body = record(error);
  const inner = record(body?.['error']) ?? body;
  const message = nonEmpty(inner?.['message']);
  return message === undefined ? error : new ProviderStreamError(provider, vendorCode(body), clip(message));
}
