// A process of the hand-off spec (handOff.spec.ts), forked with `node --import tsx`: a
// RedisLaneStore whose requests its parent asks for, step by step. Each body, once granted,
// counts itself in Redis (running now, the most ever: the bound seen from the bodies' side),
// writes its name to the lane's order list (the grant order, as the bodies saw it), holds its
// permit `holdMs` (for ever when negative: a victim, killed holding) and leaves. It exits by
// itself once told to close.
import { createClient } from 'redis';
import { RedisLaneStore } from '../../../lib/lanes/index.js';

export interface HandOffWorkerConfig {
  readonly prefix: string;
  readonly key: string;
  readonly limit: number;
  readonly leaseSeconds: number;
}

export type HandOffCommand =
  | { readonly type: 'enter'; readonly party: string; readonly count: number; readonly holdMs: number }
  | { readonly type: 'close' };

export type HandOffMessage =
  | { readonly type: 'ready' }
  /** Every request asked for so far is in Redis (answered). */
  | { readonly type: 'entered' }
  /** A body started. */
  | { readonly type: 'started'; readonly name: string }
  | { readonly type: 'closed'; readonly lost: number };

const config = JSON.parse(process.argv[2]!) as HandOffWorkerConfig;
const tell = (message: HandOffMessage): void => {
  process.send?.(message);
};

const client = createClient({ socket: { host: '127.0.0.1', port: 6379, reconnectStrategy: false } });
client.on('error', () => undefined);
await client.connect();
const store = new RedisLaneStore({ client, prefix: config.prefix, leaseSeconds: config.leaseSeconds });
const enterScript = `local n = redis.call('INCR', KEYS[1]) if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end redis.call('RPUSH', KEYS[3], ARGV[1]) return n`;
const counted = [`${config.prefix}running`, `${config.prefix}most`, `${config.prefix}order`];
let made = 0;
let lost = 0;

async function body(name: string, holdMs: number, leave: () => void): Promise<void> {
  await client.eval(enterScript, { keys: counted, arguments: [name] });
  tell({ type: 'started', name });
  if (holdMs < 0) return;
  await new Promise((resolve) => setTimeout(resolve, holdMs));
  await client.decr(counted[0]!);
  leave();
}

process.on('message', (raw) => {
  const command = raw as HandOffCommand;
  if (command.type === 'enter') {
    for (let i = 0; i < command.count; i++) {
      const name = `${command.party}${++made}`;
      const permit = store.enter(config.key, config.limit, {
        granted: () => void body(name, command.holdMs, () => permit.leave()),
        lost: () => lost++,
      }, command.party);
    }
    void store.idle().then(() => tell({ type: 'entered' }));
  } else {
    void (async () => {
      await store.close();
      await client.close();
      tell({ type: 'closed', lost });
      process.disconnect?.();
    })();
  }
});
tell({ type: 'ready' });
