// Where a wire adapter's API key comes from: its options, else the vendor's usual
// environment variable. Checked once, when the provider is made, so a missing key is a
// ConfigError at start-up rather than a 401 on the first turn.
import { ConfigError } from '../errors.js';

/**
 * The key to send: `given`, else `process.env[envName]`. Undefined (no auth header) is allowed
 * only when `required` is false, i.e. for a compatible server other than the vendor's own.
 */
export function resolveKey(given: string | undefined, envName: string, required: boolean, who: string): string | undefined {
  if (given !== undefined && (typeof given !== 'string' || given === '')) {
    // The value itself is not shown: it may be a key pasted into the wrong option.
    throw new ConfigError('apiKey', `${who}: apiKey must be a non-empty string, got a ${typeof given === 'string' ? 'empty string' : typeof given}`);
  }
  const key = given ?? (process.env[envName] || undefined);
  if (key === undefined && required) {
    throw new ConfigError('apiKey', `${who}: no API key; pass apiKey or set ${envName}`);
  }
  return key;
}
