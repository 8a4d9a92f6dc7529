// ToolLanes on a RedisLaneStore across processes: two processes, each running wrapped calls of
// one tool, share its perTool lane. Counted from the bodies (in Redis): never more than the limit
// at once fleet-wide, every call answered, each body handed its fleet lane's fencing token, and
// both processes end by themselves with their permits back.
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { RedisLaneStore } from '../../lib/lanes/index.js';
import { runToExit } from '../childProcess.js';
import { redisFixture } from '../lanes/redis/server.js';

const workerFile = fileURLToPath(new URL('./fleetWorker.ts', import.meta.url));

describe('ToolLanes on a RedisLaneStore, across two processes', function () {
  this.timeout(90_000);
  const redis = redisFixture('toollanes');

  it('keeps perTool across the fleet, counted from the bodies, and hands each body a fencing token', async () => {
    const limit = 3;
    const calls = 12;
    const config = JSON.stringify({ prefix: redis.prefix, processes: 2, calls, limit });
    const endings = await Promise.all([runToExit(workerFile, [config], 60_000), runToExit(workerFile, [config], 60_000)]);
    for (const ending of endings) {
      expect(ending.stderr).to.equal('');
      expect(ending.exitedAlone, 'a process ended by itself').to.equal(true);
      expect(JSON.parse(ending.lines.at(-1)!)).to.deep.equal({ ok: calls, fenced: calls });
    }
    expect(Number(await redis.client.get(`${redis.prefix}bodies:most`))).to.equal(limit);
    expect(Number(await redis.client.get(`${redis.prefix}bodies:running`))).to.equal(0);
    // Every permit back: the fleet's lane holds nothing and nobody waits.
    const view = new RedisLaneStore({ client: redis.client, prefix: redis.prefix, leaseSeconds: 10 });
    try {
      const [lane] = await view.snapshot(['tool:work']);
      expect([lane?.holders ?? 0, lane?.waiters ?? 0]).to.deep.equal([0, 0]);
    } finally {
      await view.close();
    }
  });
});
