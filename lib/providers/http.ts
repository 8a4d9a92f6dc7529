// The one HTTP step both wire adapters share: POST JSON over `fetch`, retry 429, 5xx and failures
// to connect (unless the failure says `retryable: false` or `isRetryable: false`) with
// bounded exponential backoff and jitter (a Retry-After wins, up to a cap), stop at once on
// abort, and scrub the API key out of anything that becomes an error. The reply is read whole
// (postJson), or handed over unread for a streamed reply (postForStream).
import { asyncScheduler } from 'rxjs';
import { ConfigError } from '../errors.js';
import { scheduleAfter } from '../time.js';
import { describeValue, refuseUnknownFields } from '../config/index.js';
import { ProviderHttpError, ProviderReplyError, ProviderTimeoutError } from './errors.js';

/** How a wire adapter retries. Every field is optional; the defaults suit a hosted API. */
export interface RetryOptions {
  /** Requests in all, the first included. Default 3; 1 turns retrying off. */
  readonly attempts?: number;
  /** The wait before the first retry, in ms; it doubles for each retry after. Default 500. */
  readonly baseDelayMs?: number;
  /** The longest wait before any retry, a Retry-After included, in ms. Default 20000. */
  readonly maxDelayMs?: number;
  /** Waits `ms`, rejecting at once when `signal` aborts. Default: a timer. Inject it to test backoff without a clock. */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** A number in [0, 1) for the jitter. Default `Math.random`. */
  readonly random?: () => number;
  /** The time in ms since the epoch, for a Retry-After given as an HTTP date. Default `Date.now`. */
  readonly now?: () => number;
}

/** RetryOptions with every default filled in and checked. */
export interface RetryPolicy {
  readonly attempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  readonly random: () => number;
  readonly now: () => number;
}

/**
 * Waits `ms`, or rejects with the signal's reason as soon as it aborts (the timer is cleared).
 * Any finite wait is kept as given, one longer than a Node timer holds (24.8 days) included.
 */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      timer.unsubscribe();
      reject(signal.reason);
    };
    const timer = scheduleAfter(asyncScheduler, () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

const retryFields = ['attempts', 'baseDelayMs', 'maxDelayMs', 'sleep', 'random', 'now'];

/** Fills in and checks RetryOptions; a bad field is a ConfigError naming it (`retry.attempts`). */
export function retryPolicy(options: RetryOptions = {}): RetryPolicy {
  if (options === null || typeof options !== 'object') throw new ConfigError('retry', `retry must be an object, got ${describeValue(options)}`);
  refuseUnknownFields(options, retryFields, 'retry', { field: 'retry' });
  const { attempts = 3, baseDelayMs = 500, maxDelayMs = 20_000, random = Math.random, now = Date.now } = options;
  if (!Number.isInteger(attempts) || attempts < 1 || attempts > 10) {
    throw new ConfigError('retry.attempts', `retry.attempts must be an integer from 1 to 10, got ${describeValue(attempts)}`);
  }
  for (const [field, value] of [['baseDelayMs', baseDelayMs], ['maxDelayMs', maxDelayMs]] as const) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw new ConfigError(`retry.${field}`, `retry.${field} must be a finite number of ms from 0 up, got ${describeValue(value)}`);
    }
  }
  for (const [field, value] of [['sleep', options.sleep], ['random', random], ['now', now]] as const) {
    if (value !== undefined && typeof value !== 'function') throw new ConfigError(`retry.${field}`, `retry.${field} must be a function, got ${describeValue(value)}`);
  }
  return { attempts, baseDelayMs, maxDelayMs, sleep: options.sleep ?? abortableSleep, random, now };
}

/**
 * The wait before retry number `retry` (1 for the first), in ms. A Retry-After (or OpenAI's
 * `retry-after-ms`) is obeyed as given, up to `maxDelayMs`; without one the wait is
 * `baseDelayMs * 2^(retry-1)`, capped, then jittered into its upper half so a fleet does not
 * retry in step.
 */
export function retryDelay(retry: number, headers: Headers | undefined, policy: RetryPolicy): number {
  const asked = headers === undefined ? undefined : retryAfterMs(headers, policy.now());
  if (asked !== undefined) return Math.min(policy.maxDelayMs, asked);
  const backoff = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  return Math.round(backoff * (0.5 + policy.random() / 2));
}

/** The server's requested wait in ms: `retry-after-ms`, or `retry-after` in seconds or as an HTTP date. */
export function retryAfterMs(headers: Headers, now: number): number | undefined {
  const ms = headers.get('retry-after-ms');
  if (ms !== null && /^\s*\d+(\.\d+)?\s*$/.test(ms)) return Number(ms);
  const value = headers.get('retry-after');
  if (value === null) return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Number(value) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** One JSON POST to a vendor. */
export interface JsonPost {
  /** The wire and host, for errors: `Anthropic Messages at api.anthropic.com`. */
  readonly provider: string;
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: unknown;
  readonly signal: AbortSignal;
  readonly retry: RetryPolicy;
  readonly fetch?: typeof fetch;
  /** Values (API keys) replaced by `[redacted]` in any text an error carries. */
  readonly secrets?: readonly string[];
  /**
   * How long each request may take, its whole reply (status and body) included, in seconds. A
   * request that outlasts it is aborted and counts as a failure to connect: retried, and named
   * by a ProviderTimeoutError once the attempts run out. Default (or `false`): no limit.
   */
  readonly timeoutSeconds?: number | false;
}

const isRetryable = (status: number): boolean => status === 429 || status >= 500;

/**
 * What an error says of retrying it, when it says: its own `retryable` boolean (the name this
 * library's errors use), else its own `isRetryable` boolean (the AI SDK's `APICallError`, and
 * errors shaped after it); undefined when it has neither. Only own data properties are read, so
 * no getter runs, and reading never throws.
 */
export function retryableFlag(error: unknown): boolean | undefined {
  if (error === null || (typeof error !== 'object' && typeof error !== 'function')) return undefined;
  try {
    for (const key of ['retryable', 'isRetryable']) {
      const descriptor = Object.getOwnPropertyDescriptor(error, key);
      if (descriptor !== undefined && 'value' in descriptor && typeof descriptor.value === 'boolean') return descriptor.value;
    }
  } catch {
    // A Proxy whose traps throw says nothing.
  }
  return undefined;
}

/** The longest stretch of a vendor's error text kept in a message. */
const DETAIL_CHARS = 300;

/**
 * POSTs `body` as JSON and resolves with the parsed JSON reply. Retries 429, 5xx and failures to
 * connect, up to `retry.attempts` requests in all. Rejects with a ProviderHttpError (the last
 * status and the vendor's message), a ProviderReplyError (2xx but not JSON), or the signal's
 * reason once it aborts, at once, even in the middle of a backoff wait.
 *
 * ## Example
 * ```ts
 * const reply = await postJson({ provider: 'my wire', url, headers: { authorization: `Bearer ${key}` },
 *   body: { model, messages }, signal, retry: retryPolicy({ attempts: 3 }), secrets: [key] });
 * ```
 */
export async function postJson(post: JsonPost): Promise<unknown> {
  try {
    return await attempts(post, false);
  } catch (error) {
    // Whatever failed once the signal aborted (fetch, the body, a backoff wait) failed because of it.
    post.signal.throwIfAborted();
    throw error;
  }
}

/**
 * POSTs `body` as JSON for a streamed reply: resolves with the first 2xx response, its body not
 * yet read, for the caller to read as it arrives. Retries, errors and abort as postJson; once a
 * 2xx has come nothing is retried (a tool call may already be running on what was read).
 */
export async function postForStream(post: JsonPost): Promise<Response> {
  try {
    return (await attempts(post, true)) as Response;
  } catch (error) {
    post.signal.throwIfAborted();
    throw error;
  }
}

/** A 2xx body read whole as JSON; one that is not JSON is a ProviderReplyError quoting its start. */
export async function readJson(response: Response, provider: string, scrub: (text: string) => string): Promise<unknown> {
  const text = await response.text();
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ProviderReplyError(provider, `the body is not JSON: ${clip(scrub(text))}`);
  }
}

// The attempts of one request: its JSON reply read whole (each attempt's timeoutSeconds covers
// the whole reply), or for a stream the first 2xx response, its body not yet read (the timeout
// then covers the wait for the reply to begin; the body is the caller's to read, and an abort of
// the run still reaches it).
async function attempts(post: JsonPost, streamed: boolean): Promise<unknown> {
  const { provider, url, signal, retry, secrets = [], timeoutSeconds } = post;
  if (timeoutSeconds !== undefined) checkTimeoutSeconds(timeoutSeconds);
  const doFetch = post.fetch ?? fetch;
  // Scrubbed before any clipping, so a cut cannot leave part of a key behind.
  const scrub = (text: string): string => redact(text, secrets);
  const payload = JSON.stringify(post.body);
  for (let attempt = 1; ; attempt++) {
    signal.throwIfAborted();
    const clock = requestClock(signal, timeoutSeconds);
    let response: Response;
    let text: string | undefined;
    // A streamed 2xx is handed over with its body unread: the timer stops, the abort still reaches it.
    let handedOver = false;
    try {
      response = await doFetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...post.headers }, body: payload, signal: clock.signal });
      if (streamed && response.ok) {
        handedOver = true;
        clock.stopTimer();
      } else {
        // Read the whole body even for an error, so the connection is free for the retry.
        text = await response.text();
      }
    } catch (error) {
      // A failure that says it would fail the same way again (`retryable: false`) is not retried.
      const flag = retryableFlag(error);
      if (attempt >= retry.attempts || (flag === false && !clock.expired)) {
        throw clock.expired
          ? new ProviderTimeoutError(provider, clock.seconds, attempt)
          : new ProviderHttpError(provider, undefined, undefined, scrub(causeOf(error)), attempt, { isRetryable: flag ?? true });
      }
      await retry.sleep(retryDelay(attempt, undefined, retry), signal);
      continue;
    } finally {
      if (!handedOver) clock.clear();
    }
    if (response.ok) {
      if (streamed) return response;
      try {
        return JSON.parse(text!) as unknown;
      } catch {
        throw new ProviderReplyError(provider, `the body is not JSON: ${clip(scrub(text!))}`);
      }
    }
    if (!isRetryable(response.status) || attempt >= retry.attempts) {
      const { code, message } = vendorError(text ?? '');
      // What the last reply said about repeating the request, for whoever decides the next step.
      const asked = retryAfterMs(response.headers, retry.now());
      const facts = { isRetryable: isRetryable(response.status), ...(asked !== undefined ? { retryAfterSeconds: asked / 1000 } : {}) };
      throw new ProviderHttpError(provider, response.status, code && scrub(code), clip(scrub(message)), attempt, facts);
    }
    await retry.sleep(retryDelay(attempt, response.headers, retry), signal);
  }
}

/** What an error body says, in the shapes vendors use: `{error:{type,message}}`, `{error:"..."}`, `{message}`, `{detail}`, or text. */
function vendorError(text: string): { code: string | undefined; message: string } {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { code: undefined, message: text.trim() === '' ? '(an empty body)' : text };
  }
  const record = (value: unknown): Record<string, unknown> | undefined =>
    value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  const nonEmpty = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
  const outer = record(body);
  const inner = record(outer?.['error']);
  const code = nonEmpty(inner?.['type']) ?? nonEmpty(inner?.['code']);
  const message = nonEmpty(inner?.['message']) ?? nonEmpty(outer?.['error']) ?? nonEmpty(outer?.['message']) ?? nonEmpty(outer?.['detail']) ?? text;
  return { code, message };
}

/** An error as text, with its cause (fetch puts the socket's reason there). */
export function causeOf(error: unknown): string {
  if (!(error instanceof Error)) return describeValue(error);
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error && cause.message !== '' ? `${error.message} (${cause.message})` : error.message;
}

/** A vendor's text for a message: whitespace folded, cut at 300 characters. */
export function clip(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > DETAIL_CHARS ? `${flat.slice(0, DETAIL_CHARS - 3)}...` : flat;
}

/** Replaces every secret (and a vendor's masked echo of its tail) with `[redacted]`. */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < 8) continue;
    out = out.split(secret).join('[redacted]');
    // Vendors echo a masked key (`sk-abc***********wxyz`): the last four characters still identify it.
    out = out.replace(new RegExp(`\\S*\\*{3,}\\S*${escapeRegExp(secret.slice(-4))}`, 'g'), '[redacted]');
  }
  return out;
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * How errors name a provider: the wire and the host it talks to. Also where a baseURL is
 * checked: one carrying credentials (`user:password@`) is refused, since fetch refuses such a
 * URL anyway, with an error that quotes it whole.
 */
/** The server a provider's requests go to (its URL checked by providerLabel first), as a traced run's spans say it. */
export function serverOf(url: string): { readonly address: string; readonly port: number } {
  const { hostname, port, protocol } = new URL(url);
  return { address: hostname.replace(/^\[|\]$/g, ''), port: port !== '' ? Number(port) : protocol === 'http:' ? 80 : 443 };
}

/** A reply's id and model, when the wire says them (strings only): what tracing reads of which response it was. */
export function responseInfo(id: unknown, model: unknown): { readonly response: { id?: string; model?: string } } | undefined {
  const response: { id?: string; model?: string } = {};
  if (typeof id === 'string' && id !== '') response.id = id;
  if (typeof model === 'string' && model !== '') response.model = model;
  return response.id === undefined && response.model === undefined ? undefined : { response };
}

export function providerLabel(wire: string, url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError('baseURL', `${wire}: baseURL is not a URL`);
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw new ConfigError('baseURL', `${wire}: baseURL must not carry credentials (user:password@); send them as options.headers`);
  }
  return `${wire} at ${parsed.host}`;
}

/** A provider's request timeout when none is given: 10 minutes, as the vendors' own SDKs wait. */
export const DEFAULT_TIMEOUT_SECONDS = 600;

/** The longest a Node timer can wait, in seconds (2^31 - 1 ms); a longer one would fire at once. */
const LONGEST_TIMER_SECONDS = 2_147_483;

/** Checks a request timeout: a ConfigError naming `timeoutSeconds` unless it is a number of seconds a timer can wait (or `false`). */
export function checkTimeoutSeconds(value: unknown): number | false {
  if (value !== false && (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > LONGEST_TIMER_SECONDS)) {
    throw new ConfigError('timeoutSeconds', `timeoutSeconds must be a number of seconds above 0 and at most ${LONGEST_TIMER_SECONDS}, or false for no limit; got ${describeValue(value)}`);
  }
  return value;
}

/** One request's clock: its signal aborts when the caller's does, or once `seconds` pass. */
interface RequestClock {
  readonly signal: AbortSignal;
  /** The request's limit, in seconds (0 when it has none). */
  readonly seconds: number;
  /** True once the limit passed: the request was aborted for taking too long. */
  readonly expired: boolean;
  /** Clears the timer and the listener on the caller's signal; called however the request ended. */
  clear(): void;
  /** Clears the timer only: a streamed reply has begun, and the caller's abort must still reach its body. */
  stopTimer(): void;
}

const noClock = (signal: AbortSignal): RequestClock => ({ signal, seconds: 0, expired: false, clear: () => {}, stopTimer: () => {} });

function requestClock(outer: AbortSignal, seconds: number | false | undefined): RequestClock {
  if (seconds === undefined || seconds === false) return noClock(outer);
  // A signal of the request's own, so the timeout aborts this request and not the caller's run.
  const controller = new AbortController();
  const forward = (): void => controller.abort(outer.reason);
  const timer = setTimeout(() => {
    clock.expired = true;
    controller.abort(new Error(`no reply within ${seconds}s`));
  }, seconds * 1000);
  outer.addEventListener('abort', forward, { once: true });
  const clock = {
    signal: controller.signal,
    seconds,
    expired: false,
    clear: () => {
      clearTimeout(timer);
      outer.removeEventListener('abort', forward);
    },
    stopTimer: () => clearTimeout(timer),
  };
  return clock;
}
