// What every fleet worker (a file forkedFleet.ts forks) does the same way: it reads its config
// from argv, talks to its parent over IPC (ready, then it waits for go; done at the end), reaches
// Redis through one ioredis client, stamps each body's start by Redis's clock, and lets go of its
// store and client at the end, so that it falls off the end of its script.
import { Redis } from 'ioredis';

/** This worker's config, as its parent gave it (JSON, the first argument). */
export function workerConfig<Config>(): Config {
  return JSON.parse(process.argv[2]!) as Config;
}

/** A way to tell the parent `Message`s (nothing is sent when the process was not forked). */
export function teller<Message>(): (message: Message) => void {
  return (message) => {
    process.send?.(message);
  };
}

/** An ioredis client on the spec's Redis, one try a command; its errors are the calls' to see. */
export function workerRedis(): Redis {
  const client = new Redis({ host: '127.0.0.1', port: 6379, maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  return client;
}

// The body's start, by Redis's clock in ms, on the fleet's list of stamps.
const stampScript = `local t = redis.call('TIME') redis.call('RPUSH', KEYS[1], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)) return 1`;

/** Stamps a body's start, by Redis's clock in ms, on the list `<prefix>stamps` (forkedFleet.ts's stampsUnder reads it). */
export async function stampStart(client: Redis, prefix: string): Promise<void> {
  await client.eval(stampScript, 1, `${prefix}stamps`);
}

/** Tells the parent this worker is ready, then waits for its go. */
export async function readyThenGo(tell: (message: { readonly type: 'ready' }) => void): Promise<void> {
  tell({ type: 'ready' });
  await new Promise<void>((resolve) => process.once('message', () => resolve()));
}

/** Closes the worker's store and client and its channel to the parent: nothing is left to keep it alive. */
export async function letGo(store: { close(): Promise<void> }, client: Redis): Promise<void> {
  await store.close();
  await client.quit();
  process.disconnect?.();
}
