// Whether Redis still has the data this process first saw: one key per prefix (`<prefix>epoch`)
// holds a random value, written by the first process that finds it missing. A lease found gone
// is then explained: if the epoch changed, Redis lost its data (a restart without persistence,
// FLUSHALL or FLUSHDB, a failover to a replica that had not caught up), and the process was not
// at fault; if it did not, the lease ran out while this process was paused or cut off.
import { createHash, randomBytes } from 'node:crypto';
import type { Script } from './scripts.js';

const source = String.raw`
local epoch = redis.call('GET', KEYS[1])
if epoch then return { epoch, 0 } end
redis.call('SET', KEYS[1], ARGV[1])
return { ARGV[1], 1 }
`;

/** The epoch script: KEYS: the epoch key; ARGV: a new epoch. Out: the epoch, and 1 if it was just written. */
export const epochScript: Script = { source, sha1: createHash('sha1').update(source).digest('hex') };

/** What the epoch says of a lost lease. */
export type EpochVerdict = 'data-lost' | 'same' | 'unknown';

export class RedisEpoch {
  /** The epoch this process first saw (or wrote), once Redis answered. */
  private known: string | undefined = undefined;
  // The first contact is asked once.
  private asked = false;
  readonly key: string;

  constructor(
    prefix: string,
    private readonly ask: (script: Script, keys: readonly string[], args: readonly string[]) => Promise<unknown>,
  ) {
    this.key = `${prefix}epoch`;
  }

  /** At first contact: learns the epoch, writing one if Redis has none. */
  firstContact(): void {
    if (this.asked) return;
    this.asked = true;
    this.read().then(
      ([epoch]) => {
        this.known ??= epoch;
      },
      // Without an answer the epoch is unknown; the next check learns it.
      () => {
        this.asked = false;
      },
    );
  }

  /** Whether Redis lost its data since this process first saw it. */
  async check(): Promise<EpochVerdict> {
    let epoch: string;
    let written: boolean;
    try {
      [epoch, written] = await this.read();
    } catch {
      return 'unknown';
    }
    const known = this.known;
    this.known = epoch;
    if (known === undefined) return 'unknown';
    return written || epoch !== known ? 'data-lost' : 'same';
  }

  private async read(): Promise<[string, boolean]> {
    const answer = await this.ask(epochScript, [this.key], [randomBytes(9).toString('base64url')]);
    if (!Array.isArray(answer) || answer.length < 2) throw new TypeError('the epoch script answered without an epoch');
    return [String(answer[0]), Number(answer[1]) === 1];
  }
}
