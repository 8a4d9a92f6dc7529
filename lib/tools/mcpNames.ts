// The names an MCP server's tools take here. Model APIs take a tool name of 1 to 64 letters,
// digits, "_" or "-"; MCP allows more (dots, slashes, spaces, any length). A name that fits is
// kept; one that does not is mapped to one that does, never refusing the rest of the server.
import { createHash } from 'node:crypto';
import { namePattern } from './names.js';

const MAX = 64;
// The characters a name may not hold, a run of them at a time.
const unfit = /[^A-Za-z0-9_-]+/g;

/**
 * The name here of each of the server's tools (by its name there), after `prefix`. A name that
 * fits as it is keeps it, first, so no mapped name can take it. Every other is mapped: each run
 * of characters a model API refuses becomes one `_`; if that is too long or taken already, it is
 * cut and given `_` and eight hex digits of the server's name's SHA-256. The server is always
 * called by its own name (the tool keeps it, `McpTool.listed.name`): the table is the way back.
 * `taken` holds names already in use here (a registry's); they are never given out.
 */
export function namesOf(listed: readonly string[], prefix: string, taken: ReadonlySet<string> = new Set()): Map<string, string> {
  const names = new Map<string, string>();
  const used = new Set<string>(taken);
  for (const name of listed) {
    const whole = `${prefix}${name}`;
    if (namePattern.test(whole) && !used.has(whole)) {
      names.set(name, whole);
      used.add(whole);
    }
  }
  for (const name of listed) {
    if (names.has(name)) continue;
    const mapped = mappedName(name, prefix, used);
    names.set(name, mapped);
    used.add(mapped);
  }
  return names;
}

function mappedName(name: string, prefix: string, used: ReadonlySet<string>): string {
  const plain = `${prefix}${name.replace(unfit, '_')}` || 'tool';
  if (plain.length <= MAX && plain !== prefix && !used.has(plain)) return plain;
  const digest = createHash('sha256').update(name).digest('hex');
  // Eight hex digits are enough unless two names clash there too: then more of the digest.
  for (let width = 8; width <= digest.length; width += 8) {
    const tail = `_${digest.slice(0, width)}`;
    const candidate = `${plain.slice(0, MAX - tail.length)}${tail}`;
    if (!used.has(candidate)) return candidate;
  }
  // Only a registry holding every name the digest can make gets here.
  for (let n = 2; ; n++) {
    const tail = `_${n}`;
    const candidate = `${plain.slice(0, MAX - tail.length)}${tail}`;
    if (!used.has(candidate)) return candidate;
  }
}
