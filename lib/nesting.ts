// How deep a value from outside may nest: a caller's conversation, state and snapshot, a
// journal's entries, a model's arguments. Deeper is refused with the place named, as a result is
// (lib/json.ts), rather than left to whichever recursive walk (a copy, canonical JSON,
// JSON.stringify, structuredClone) runs out of stack first. Imports nothing.

/** Objects and arrays may nest this many levels; the next level is refused. */
export const MAX_NESTING = 1000;

/** What a refusal says after the path: `nested more than 1000 levels deep`. */
export const tooDeep = `nested more than ${MAX_NESTING} levels deep`;

/**
 * How deep a record that carries such values may nest (a snapshot, a journal entry): its own
 * levels around values that may each nest `MAX_NESTING` deep (a run's state, a call's
 * arguments in a message, a nested run's snapshot inside a call).
 */
export const MAX_ENVELOPED = 2 * MAX_NESTING;

/**
 * The keys to the first object or array nested deeper than `limit` levels in `value`
 * (the root being level 1), or undefined when there is none. Walked without recursion, so any
 * depth is measured; a cycle is not followed round (it is not depth, and is refused elsewhere).
 */
export function nestedTooDeep(value: unknown, limit = MAX_NESTING): Array<string | number> | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  // The objects from the root to here, each with its keys and the next key to visit.
  const frames: Array<{ object: object; keys: string[]; next: number }> = [];
  // The keys from the root to the object on top of `frames`.
  const path: Array<string | number> = [];
  // The objects on the path (a cycle is not followed round).
  const onPath = new Set<object>();
  // The level each object was last walked at: an object shared by two places is walked again only from deeper down.
  const walkedAt = new Map<object, number>();
  const enter = (object: object): void => {
    frames.push({ object, keys: Object.keys(object), next: 0 });
    onPath.add(object);
    walkedAt.set(object, frames.length);
  };
  enter(value);
  while (frames.length > 0) {
    const frame = frames[frames.length - 1]!;
    if (frame.next === frame.keys.length) {
      frames.pop();
      onPath.delete(frame.object);
      path.pop();
      continue;
    }
    const key = frame.keys[frame.next++]!;
    const child = (frame.object as Record<string, unknown>)[key];
    if (child === null || typeof child !== 'object' || onPath.has(child) || (walkedAt.get(child) ?? 0) >= frames.length + 1) continue;
    const step = Array.isArray(frame.object) ? Number(key) : key;
    if (frames.length === limit) return [...path, step];
    path.push(step);
    enter(child);
  }
  return undefined;
}

/** A path for a message: `args.a.a.a.….a.a` once it is long, with its root. */
export function describePath(root: string, keys: ReadonlyArray<string | number>): string {
  const shown = keys.length <= 8 ? keys : [...keys.slice(0, 4), '…', ...keys.slice(-2)];
  return [root, ...shown].join('.');
}

/** Thrown where a value nests deeper than `MAX_NESTING` levels: `path` names where. */
export class NestedTooDeepError extends RangeError {
  constructor(readonly path: string) {
    super(`${path}: ${tooDeep}`);
    this.name = 'NestedTooDeepError';
  }
}

/** Throws a NestedTooDeepError naming where `value` (at `root`) nests too deep. */
export function refuseTooDeep(value: unknown, root: string): void {
  const keys = nestedTooDeep(value);
  if (keys !== undefined) throw new NestedTooDeepError(describePath(root, keys));
}
