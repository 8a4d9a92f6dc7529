// One process of the ToolLanes fleet spec (fleet.spec.ts), run with `node --import tsx`: a
// ToolLanes on a RedisLaneStore runs `calls` wrapped calls of one tool at once, once every process
// is ready (a count in Redis), its bodies counting themselves in Redis so the most running at once,
// fleet-wide, is read from the bodies' side. It prints one line of JSON and ends by itself.
import { Redis } from 'ioredis';
import { ConcurrencyConfig, ToolLanes } from '../../lib/index.js';
import { RedisLaneStore } from '../../lib/redis.js';

const { prefix, processes, calls, limit } = JSON.parse(process.argv[2]!) as { prefix: string; processes: number; calls: number; limit: number };

const client = new Redis({ host: '127.0.0.1', port: 6379, maxRetriesPerRequest: 1 });
client.on('error', () => undefined);
const store = new RedisLaneStore({ client, prefix, leaseSeconds: 5 });
const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { work: limit } }), lanes: store });

// One more body running, and the most ever seen, in one step.
const enter = `local n = redis.call('INCR', KEYS[1]) if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end return n`;
const keys = [`${prefix}bodies:running`, `${prefix}bodies:most`];

await client.incr(`${prefix}ready`);
while (Number(await client.get(`${prefix}ready`)) < processes) await new Promise((resolve) => setTimeout(resolve, 5));

const request = lanes.request({ tenant: 'acme', requestId: `p${process.pid}` });
const fences: Array<string | undefined> = [];
const results = await Promise.allSettled(
  Array.from({ length: calls }, (_, n) =>
    request.run({ tool: 'work', callId: `c${n}` }, async (ctx) => {
      await client.eval(enter, keys.length, ...keys);
      fences.push(ctx.fence);
      await new Promise((resolve) => setTimeout(resolve, 10));
      await client.decr(keys[0]!);
      return n;
    }),
  ),
);
console.log(JSON.stringify({ ok: results.filter((result) => result.status === 'fulfilled').length, fenced: fences.filter((fence) => typeof fence === 'string' && fence !== '').length }));
await store.close();
await client.quit();
