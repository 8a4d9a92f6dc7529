// Where a fleet lane lives in Redis: its keys share one hash tag (the lane's name), so every
// script on a lane touches one slot of a Cluster.
import { createHash } from 'node:crypto';

// A lane's name as a hash tag: the characters that would end the tag (or be read as an escape)
// are escaped, and a very long name (an identical-arguments lane) is hashed.
function tagOf(key: string): string {
  const escaped = key.replace(/[%{}]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return escaped.length <= 120 ? escaped : `sha1:${createHash('sha1').update(key).digest('hex')}`;
}

/** What every key of lane `key` under `prefix` starts with. */
export function laneBase(prefix: string, key: string): string {
  return `${prefix}{${tagOf(key)}}`;
}

export function keysOf(base: string): string[] {
  return [`${base}:h`, `${base}:w`, `${base}:q`, `${base}:p`, `${base}:r`, `${base}:m`, `${base}:d`, `${base}:e`];
}

export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
