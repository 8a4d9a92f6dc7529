// A streamed reply's calls as its readers hand them on (the AI SDK's parts, the OpenAI and
// Anthropic wires): when a call's streamed JSON is complete, and the order calls go on in, the
// order the model started writing them, so a call whose JSON never closes keeps its place.
import type { ModelStreamPart } from '../runner/index.js';

/** A streamed call as the runner takes it. */
export type CallPart = Extract<ModelStreamPart, { type: 'tool-call' }>;

/**
 * The calls of one streamed reply not handed on yet, by the wire's key for a call (an id, an
 * index), in the order they started. A call complete while one started before it is still open
 * waits for it; when the reply ends, every call still open goes on in its place with what was
 * written of it. The runner numbers calls as they arrive, so the order they leave here is their
 * call order: in MODEL_RESPONSE, in the outcomes and in the next request.
 *
 * Later calls wait rather than go on ahead with a place kept for the open one because every
 * stage after the reader takes calls in call order: the gate (hooks, guardrails, approvals one at
 * a time), the phases (a `parallelSafe: false` call alone), the journal (each call written at
 * its position before anything else of it). With well-formed calls nothing waits: each is
 * complete before the next one starts.
 */
export class StartOrder<K> {
  // Calls started, in start order; those before `head` went on.
  private readonly entries: Array<{ readonly key: K; part: CallPart | undefined }> = [];
  // The first call not handed on yet.
  private head = 0;
  // The calls not handed on yet, by key.
  private readonly byKey = new Map<K, { readonly key: K; part: CallPart | undefined }>();

  /** A call started: its place is here. A call already started keeps its place. */
  started(key: K): void {
    if (this.byKey.has(key)) return;
    const entry = { key, part: undefined };
    this.entries.push(entry);
    this.byKey.set(key, entry);
  }

  /** A call is complete: the calls that go on now, in start order. A call not started before starts now. */
  complete(key: K, part: CallPart): CallPart[] {
    this.started(key);
    this.byKey.get(key)!.part = part;
    const out: CallPart[] = [];
    const { entries } = this;
    while (this.head < entries.length && entries[this.head]!.part !== undefined) {
      const entry = entries[this.head++]!;
      this.byKey.delete(entry.key);
      out.push(entry.part!);
    }
    if (this.head === entries.length) this.forget();
    return out;
  }

  /** The reply ended: every call not handed on, in start order, an open one as `unfinished` says (undefined: left out). */
  ended(unfinished: (key: K) => CallPart | undefined): CallPart[] {
    const out: CallPart[] = [];
    for (const { key, part } of this.entries.slice(this.head)) {
      const call = part ?? unfinished(key);
      if (call !== undefined) out.push(call);
    }
    this.forget();
    return out;
  }

  // Nothing waits: the calls that went on are dropped.
  private forget(): void {
    this.entries.length = 0;
    this.head = 0;
    this.byKey.clear();
  }
}

/**
 * True when `input`, the arguments written so far, became a whole JSON object with `delta`, its
 * last piece: a JSON object cannot go on once it is closed. Only a delta ending in `}` (trailing
 * whitespace aside) can close one, so the input is parsed at most once per such delta.
 */
export function closesObject(input: string, delta: string): boolean {
  return endsWithBrace(delta) && isWholeObject(input);
}

function endsWithBrace(delta: string): boolean {
  for (let i = delta.length - 1; i >= 0; i--) {
    const c = delta.charCodeAt(i);
    if (c === 0x7d) return true;
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return false;
  }
  return false;
}

function isWholeObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value);
  } catch {
    return false;
  }
}
