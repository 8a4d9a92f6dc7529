// A service's process for closeInOutage.spec.ts: a client of its own (node-redis or ioredis, as
// a service makes them: reconnecting), two stores whose subscriber connections are made before
// and during an outage it makes itself (SIGKILL or SIGSTOP to the spec's own redis-server), then
// a graceful shutdown: close the stores, then the client, and fall off the end. It prints how
// long the closes took; the spec sees whether the process then ends by itself.
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { RedisLaneStore } from '../../../lib/lanes/index.js';
import { REDIS_HOST, sleep } from './server.js';

const [kind, outage, portText, pidText, prefix] = process.argv.slice(2) as [string, string, string, string, string];
const port = Number(portText);

async function connect(): Promise<{ client: RedisLaneStoreClient; destroy: () => void }> {
  if (kind === 'node-redis') {
    const client = createClient({ socket: { host: REDIS_HOST, port } });
    client.on('error', () => undefined);
    await client.connect();
    return { client, destroy: () => client.destroy() };
  }
  const client = new Redis({ host: REDIS_HOST, port });
  client.on('error', () => undefined);
  await new Promise((resolve) => client.once('ready', resolve));
  return { client, destroy: () => client.disconnect() };
}
type RedisLaneStoreClient = ConstructorParameters<typeof RedisLaneStore>[0]['client'];

const { client, destroy } = await connect();
const options = { client, prefix, leaseSeconds: 3, timeoutSeconds: 0.5 };
const waits = new RedisLaneStore(options);
const hears = new RedisLaneStore(options);
// A call holds lane tool:a and another waits for it: the wake-up subscriber connection is made.
const quiet = { granted: () => undefined, lost: () => undefined };
waits.enter('tool:a', 1, quiet);
waits.enter('tool:a', 1, quiet);
// A rate lane asked about: the news subscriber connection is made (rate pauses across the fleet).
hears.paused('tool:b');
await waits.idle();
await sleep(300);

process.kill(Number(pidText), outage === 'down' ? 'SIGKILL' : 'SIGSTOP');
// The first store's news connection is made during the outage.
waits.paused('tool:c');
await sleep(300);

const start = performance.now();
await Promise.all([waits.close(), hears.close()]);
console.log(`closed ${Math.round(performance.now() - start)}`);
// The application closes its own client: during an outage without a goodbye.
destroy();
