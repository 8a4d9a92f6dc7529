// Records keyed by names from outside (call ids, tool names, tenants, lane keys, approvals):
// read through their own properties only, and written as own data properties. A key named like
// an Object.prototype member (`constructor`, `toString`, `__proto__`) is a name like any other:
// `in` and `record[key]` would find the prototype's member, and assigning `__proto__` would set
// the record's prototype instead of a key.

/** `record[key]` when it is `record`'s own property (`Object.hasOwn`), else undefined: `own({}, 'constructor')` is undefined. */
export function own<V>(record: Readonly<Record<string, V>>, key: string): V | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** Sets `key` on `target` as an own data property (enumerable, writable): `__proto__` stays a key. */
export function put<V>(target: Record<string, V>, key: string, value: V): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}
