// What the benches that need a Redis on 127.0.0.1:6379 share: whether one answers, and the
// removal of the keys a bench run made (every bench run puts its own prefix before its keys).
import { createConnection } from 'node:net';
import { createClient } from 'redis';

/** True when a Redis answers PING on 127.0.0.1:6379 within a second. */
export function redisAnswers(): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port: 6379 });
    const done = (up: boolean): void => {
      socket.destroy();
      resolve(up);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}

/** Deletes every key matching each of `patterns` (SCAN MATCH patterns). */
export async function deleteKeys(patterns: readonly string[]): Promise<void> {
  const client = createClient({ socket: { host: '127.0.0.1', port: 6379 } });
  client.on('error', () => undefined);
  await client.connect();
  try {
    for (const match of patterns) {
      for await (const keys of client.scanIterator({ MATCH: match, COUNT: 500 })) if (keys.length > 0) await client.del(keys);
    }
  } finally {
    await client.close();
  }
}
