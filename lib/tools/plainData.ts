// Copies of what a run hands out. A tool body gets its own copy of its arguments, so nothing
// it does to them reaches the model's reply (the transcript, the next request, a cassette).
// A run's state and deltas are JSON-like data, copied and deeply frozen, so `ctx.state` is
// read-only all the way down: Object.freeze cannot stop `Map.set` or `Date.setTime`, and a
// cassette could not hold those values anyway.
import { describePath, MAX_NESTING, refuseTooDeep, tooDeep } from '../nesting.js';
import { put } from '../own.js';

/** What JSON-like data is made of, for messages. */
export const jsonLike = 'plain objects, arrays, strings, numbers, booleans, null and undefined';

/** A value that is not JSON-like: where it is (`state.cart.tags`) and what it is (`a Set`). */
export class NotPlainDataError extends TypeError {
  constructor(
    readonly path: string,
    readonly found: string,
  ) {
    super(`${path} is ${found}`);
    this.name = 'NotPlainDataError';
  }
}


function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function isPlainArray(value: object): value is unknown[] {
  return Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype;
}

// What an object that is not plain data is, for a message: `a Map`, `a Uint8Array`, `a Hotel`.
function kindOf(value: object): string {
  let name: unknown;
  try {
    name = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  } catch {
    // A proxy whose traps throw: it is still not plain data.
  }
  if (typeof name !== 'string' || name === '' || name === 'Object') return 'an object that is not plain data (its prototype is not Object.prototype)';
  return `${/^[AEIO]/i.test(name) ? 'an' : 'a'} ${name}`;
}

// Returned by the fast copy for anything it does not copy itself.
const notCopied: unique symbol = Symbol('not copied');

// Deep enough for any arguments a model writes; deeper (or circular) goes to structuredClone.
const maxDepth = 64;

// A copy of JSON-like `value`, or notCopied when it holds anything else or nests too deep.
function copyJsonLike(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== 'object') return typeof value === 'function' || typeof value === 'symbol' ? notCopied : value;
  if (depth === maxDepth) return notCopied;
  if (isPlainArray(value)) {
    const copy: unknown[] = [];
    for (let i = 0; i < value.length; i++) {
      const item = copyJsonLike(value[i], depth + 1);
      if (item === notCopied) return notCopied;
      copy.push(item);
    }
    return copy;
  }
  if (!isPlainObject(value)) return notCopied;
  const copy: Record<string, unknown> = {};
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const item = copyJsonLike(record[key], depth + 1);
    if (item === notCopied) return notCopied;
    put(copy, key, item);
  }
  return copy;
}

/**
 * A tool body's own copy of the arguments the model sent as an object: it shares nothing with
 * the reply. JSON-like arguments (what every provider sends) are copied by hand, which costs
 * next to nothing for the small objects models write; anything else (a Date, a Map, a cycle)
 * goes through structuredClone. Throws for what cannot be copied (a function, a getter that throws), and
 * a NestedTooDeepError naming where it nests deeper than 1000 levels.
 */
export function ownCopy(value: unknown, root = 'args'): unknown {
  const copy = copyJsonLike(value, 0);
  if (copy !== notCopied) return copy;
  // structuredClone recurses: deeper than any model writes is refused, naming where, before it runs out of stack.
  refuseTooDeep(value, root);
  return structuredClone(value);
}

/**
 * The arguments as policies read them: plain objects and arrays copied and frozen, anything
 * else (a Date or a class instance a codec made) kept as it is. Copying before freezing leaves
 * alone an object a codec hands to every decode (a default), which the body's decode shares.
 */
export function frozenView(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== 'object' || depth === maxDepth) return value;
  if (isPlainArray(value)) {
    const copy: unknown[] = [];
    for (let i = 0; i < value.length; i++) copy.push(frozenView(value[i], depth + 1));
    return Object.freeze(copy);
  }
  if (!isPlainObject(value)) return value;
  const copy: Record<string, unknown> = {};
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) put(copy, key, frozenView(record[key], depth + 1));
  return Object.freeze(copy);
}

// Where a frozen copy is: the objects it is inside (to refuse a cycle) and the keys to here
// (to name the path of a value it refuses). Paths are joined only for the message.
interface Walk {
  readonly root: string;
  readonly ancestors: object[];
  readonly keys: Array<string | number>;
}

function refuse(walk: Walk, found: string): never {
  throw new NotPlainDataError(describePath(walk.root, walk.keys), found);
}

function frozenCopyAt(walk: Walk, value: unknown): unknown {
  if (value === null || value === undefined) return value;
  const type = typeof value;
  if (type === 'string' || type === 'number' || type === 'boolean') return value;
  if (type !== 'object') return refuse(walk, `a ${type}`);
  const object = value as object;
  const { ancestors, keys } = walk;
  if (ancestors.includes(object)) return refuse(walk, 'circular (it contains itself)');
  if (ancestors.length === MAX_NESTING) return refuse(walk, tooDeep);
  let made: unknown[] | Record<string, unknown>;
  ancestors.push(object);
  if (isPlainArray(object)) {
    made = [];
    for (let i = 0; i < object.length; i++) {
      keys.push(i);
      made.push(frozenCopyAt(walk, object[i]));
      keys.pop();
    }
  } else if (isPlainObject(object)) {
    made = {};
    const record = object as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      keys.push(key);
      put(made, key, frozenCopyAt(walk, record[key]));
      keys.pop();
    }
  } else {
    return refuse(walk, kindOf(object));
  }
  ancestors.pop();
  return Object.freeze(made);
}

/**
 * A deeply frozen copy of `value`, which must be JSON-like; otherwise throws a
 * NotPlainDataError naming the path of the first offending value under `root` (`state`,
 * `delta`) and what it is. Shared references are copied apart; a cycle is refused.
 */
export function frozenPlainCopy(value: unknown, root: string): unknown {
  return frozenCopyAt({ root, ancestors: [], keys: [] }, value);
}
