// A cassette as a file: stable, human-diffable JSON (keys sorted, two-space indent, a
// trailing newline), so recording the same run twice gives the same bytes and a change
// reads as a small diff. Reading one back checks every field and the fingerprint's hash.
import { isLeft } from 'fp-ts/lib/Either.js';
import { configure } from 'safe-stable-stringify';
import { describeValue, failures } from '../config/index.js';
import { CASSETTE_VERSION, CassetteCodec, type Cassette } from './Cassette.js';
import { CassetteFormatError } from './errors.js';
import { fingerprintHash } from './fingerprint.js';

// Sorted keys at every depth; the same settings as the canonical JSON of lib/canonical.ts.
const stringify = configure({ deterministic: true, circularValue: '[Circular]', bigint: true });

/**
 * The cassette as file text: keys sorted at every depth, two-space indent, trailing newline.
 *
 * ## Example
 * ```ts
 * const { cassette } = await recorder.record(runner, planner, 'Four nights in Lisbon');
 * await writeFile('spec/cassettes/lisbon.json', stringifyCassette(cassette));
 * ```
 */
export function stringifyCassette(cassette: Cassette): string {
  return `${stringify(cassette, null, 2)}\n`;
}

/**
 * Reads a cassette from its file text. Throws CassetteFormatError naming the path at fault for
 * text that is not JSON, not a cassette, of another version, or whose fingerprint was edited
 * without its hash.
 *
 * ## Example
 * ```ts
 * const cassette = parseCassette(await readFile('spec/cassettes/lisbon.json', 'utf8'));
 * cassette.turns.length; // 2
 * ```
 */
export function parseCassette(text: string): Cassette {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new CassetteFormatError('', `the text is not JSON (${(error as Error).message})`);
  }
  const version = (data as { version?: unknown } | null)?.version;
  if (data !== null && typeof data === 'object' && version !== CASSETTE_VERSION) {
    throw new CassetteFormatError('version', `version is ${describeValue(version)}; this library reads version ${CASSETTE_VERSION}`);
  }
  const decoded = CassetteCodec.decode(data);
  if (isLeft(decoded)) {
    const found = failures(decoded.left);
    const first = found[0];
    const detail = found.map(({ path, expected, actual }) => `${path === '' ? '(the value)' : path}: expected ${expected}, got ${describeValue(actual)}`);
    throw new CassetteFormatError(first?.path ?? '', detail.slice(0, 5).join('; ') + (detail.length > 5 ? `; and ${detail.length - 5} more` : ''));
  }
  const cassette = decoded.right;
  if (fingerprintHash(cassette.fingerprint) !== cassette.fingerprint.sha256) {
    throw new CassetteFormatError('fingerprint.sha256', 'fingerprint.sha256 is not the hash of the fingerprint it sits in: the agent or tools were edited by hand. Record the cassette again');
  }
  return cassette;
}
