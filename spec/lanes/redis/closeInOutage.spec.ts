// RedisLaneStore.close() in the outage a service's graceful shutdown must ride out: Redis down
// (killed) or hanging (SIGSTOP: it accepts connections and answers nothing). A child process
// (closeChild.ts) with a node-redis or ioredis client closes its stores, whose subscriber
// connections were made before and during the outage, then its client; the closes end within
// the stores' timeoutSeconds and the process then exits by itself (no --exit, no process.exit):
// no timer and no connection of the store's is left behind. Never the shared Redis: a
// redis-server of the spec's own on a free port.
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { runToExit } from '../../childProcess.js';
import { closedPort, hasRedisServer, OwnRedis, uniquePrefix } from './server.js';

const child = fileURLToPath(new URL('./closeChild.ts', import.meta.url));

describe('RedisLaneStore.close() during a Redis outage', function () {
  this.timeout(40_000);
  let own: OwnRedis | undefined;

  before(function () {
    if (!hasRedisServer()) this.skip();
  });

  afterEach(async () => {
    // A stopped server is let go on before it is killed (a killed one has no process left).
    const pid = own?.pid;
    if (pid !== undefined) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // Gone already.
      }
    }
    await own?.stop();
    own = undefined;
  });

  for (const kind of ['node-redis', 'ioredis']) {
    for (const outage of ['down', 'hanging']) {
      it(`ends within timeoutSeconds with Redis ${outage}, and a process with a ${kind} client then exits by itself`, async () => {
        own = new OwnRedis(await closedPort());
        await own.start();
        const ending = await runToExit(child, [kind, outage, String(own.port), String(own.pid), uniquePrefix('close')], 20_000);
        expect(ending.stderr).to.equal('');
        expect(ending.exitedAlone, `the child did not exit by itself; it printed ${JSON.stringify(ending.lines)}`).to.equal(true);
        expect(ending.code).to.equal(0);
        const closed = ending.lines.find((line) => line.startsWith('closed '));
        // timeoutSeconds is 0.5: a close that ends is well within it and the margin; one that waits for Redis never does.
        expect(Number(closed?.slice('closed '.length))).to.be.below(500 + 2000);
      });
    }
  }
});
