// What never goes into a cassette: the run's id (anywhere it appears, and any `runId`
// key), and the values of secret keys. Everything a cassette holds passes through here on
// its way in, and becomes plain JSON data on the way.
import { canonicalJson } from '../canonical.js';
import { put } from '../own.js';

/** Keys whose values are always redacted (compared case-insensitively); a recorder's `redact` adds to them. */
export const DEFAULT_REDACT: readonly string[] = Object.freeze(['apiKey', 'api_key', 'authorization', 'cookie', 'password', 'secret', 'token']);

/** What a redacted value becomes. */
export const REDACTED = '[redacted]';
/** What the recorded run's id becomes. */
export const RUN_ID = '<runId>';

/** How to scrub one cassette's values. */
export interface Scrub {
  /** Lower-cased keys whose values become REDACTED. */
  readonly redact: ReadonlySet<string>;
  /** The recorded run's id: replaced by RUN_ID wherever it appears in a string. */
  readonly runId?: string;
}

/** The lower-cased, sorted, de-duplicated redaction keys: DEFAULT_REDACT and `extra`. */
export function redactionKeys(extra: readonly string[] = []): string[] {
  return [...new Set([...DEFAULT_REDACT, ...extra].map((key) => key.toLowerCase()))].sort();
}

export function scrubString(text: string, scrub: Scrub): string {
  return scrub.runId === undefined || scrub.runId === '' ? text : text.split(scrub.runId).join(RUN_ID);
}

// Walks JSON data (already parsed), redacting keys and scrubbing strings; a string holding a JSON
// object or array is walked too, so a secret cannot hide in JSON text. Keys keep their order,
// and are defined as data properties so a `__proto__` key stays a key.
function walk(value: unknown, scrub: Scrub): unknown {
  if (typeof value === 'string') return scrubText(value, scrub);
  if (Array.isArray(value)) return value.map((item) => walk(item, scrub));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    const lower = key.toLowerCase();
    const scrubbed = lower === 'runid' ? RUN_ID : scrub.redact.has(lower) ? REDACTED : walk(item, scrub);
    put(out, key, scrubbed);
  }
  return out;
}

function parseJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

// Text as written, unless a redaction inside the JSON it holds changed it (then that JSON, rewritten).
function scrubText(text: string, scrub: Scrub): string {
  const start = text.trimStart()[0];
  const parsed = start === '{' || start === '[' ? parseJson(text) : undefined;
  if (parsed === undefined) return scrubString(text, scrub);
  const rewritten = JSON.stringify(walk(parsed.value, scrub));
  // Only the run id changed (or nothing did): keep the text as it was written.
  return rewritten === scrubString(JSON.stringify(parsed.value), scrub) ? scrubString(text, scrub) : rewritten;
}

/**
 * `value` as plain JSON data (what `JSON.stringify` would keep), scrubbed: `undefined` stays
 * `undefined`, a Date becomes its ISO text, a BigInt a number, a cycle `"[Circular]"`.
 */
export function scrubbed(value: unknown, scrub: Scrub): unknown {
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') return undefined;
  return walk(JSON.parse(canonicalJson(value)) as unknown, scrub);
}

/**
 * JSON text scrubbed. `canonical`: the result is canonical JSON (for comparing); otherwise the
 * text is kept as written unless a redaction changed it (so a replayed reply reads the same).
 * Text that is not JSON is scrubbed as a string.
 */
export function scrubbedJsonText(text: string, scrub: Scrub, canonical: boolean): string {
  if (!canonical) return scrubText(text, scrub);
  const parsed = parseJson(text);
  return parsed === undefined ? scrubString(text, scrub) : canonicalJson(walk(parsed.value, scrub));
}
