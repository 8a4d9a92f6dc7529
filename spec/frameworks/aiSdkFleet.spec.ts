// withLanes across a fleet: three processes (aiSdkFleetWorker.ts), each running AI SDK
// generateText requests whose wrapped tools share one RedisLaneStore. Counted from the bodies,
// which stamp their starts by Redis's clock: the tool's rate holds fleet-wide, and one process's
// 429 (the SDK's APICallError with a Retry-After) holds the other processes' next starts back.
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { exited, forkedFleet, mostInWindow, stampsUnder } from '../lanes/redis/forkedFleet.js';
import type { FleetWorkerConfig, FleetWorkerMessage } from './aiSdkFleetWorker.js';

const workerFile = fileURLToPath(new URL('./aiSdkFleetWorker.ts', import.meta.url));

describe('withLanes across a fleet of processes on a RedisLaneStore', function () {
  this.timeout(120_000);
  const fleet = forkedFleet<FleetWorkerConfig, FleetWorkerMessage>('aisdk-fleet', workerFile);
  const { prefix } = fleet;

  it('holds a tool rate across 3 processes of AI SDK requests: at most burst + limit body starts in any window', async () => {
    // 10 a second, 2 at once; 3 processes x 3 requests x 4 calls = 36 calls.
    const rate = { limit: 10, perSeconds: 1, burst: 2 };
    const at = `${prefix}rate:`;
    const { done, codes } = await fleet.run([0, 1, 2].map(() => ({ prefix: at, rate, requests: 3, calls: 4 })));
    expect(done.flatMap((d) => d.errors), 'calls the model was sent an error for').to.deep.equal([]);
    expect(done.reduce((sum, d) => sum + d.results, 0)).to.equal(36);
    const stamps = await stampsUnder(fleet.client, at);
    expect(stamps).to.have.length(36);
    expect(mostInWindow(stamps, rate.perSeconds * 1000), 'most body starts in one second, fleet-wide').to.be.at.most(rate.burst + rate.limit);
    // The bound bites: 36 starts at 10 a second take at least (36 - 2) x 100 ms, less the stamps' jitter.
    expect(stamps[stamps.length - 1]! - stamps[0]!, 'ms from the first start to the last').to.be.at.least((36 - rate.burst) * 100 - 100);
    expect(codes, 'how each process exited').to.deep.equal([0, 0, 0]);
  });

  it("pauses the tool fleet-wide on one process's 429: the other processes' bodies start after its Retry-After", async () => {
    const rate = { limit: 50, perSeconds: 1 };
    const at = `${prefix}pause:`;
    const [limited, ...others] = await fleet.ready([
      { prefix: at, rate, requests: 1, calls: 1, limited: { callId: 'r0-0', retryAfterMs: 800 } },
      { prefix: at, rate, requests: 2, calls: 2 },
      { prefix: at, rate, requests: 2, calls: 2 },
    ]);
    limited!.go();
    const first = await limited!.done;
    expect(first.errors).to.have.length(1);
    expect(first.errors[0]).to.include('Too Many Requests');
    const [pausedAt] = (await fleet.client.lRange(`${at}stamps`, 0, -1)).map(Number);
    for (const worker of others) worker.go();
    const done = await Promise.all(others.map((worker) => worker.done));
    await Promise.all([limited!, ...others].map((worker) => exited(worker.child)));
    expect(done.flatMap((d) => d.errors)).to.deep.equal([]);
    const later = (await fleet.client.lRange(`${at}stamps`, 1, -1)).map(Number).sort((a, b) => a - b);
    expect(later).to.have.length(8);
    // Started at once, they would begin within a few ms of the 429's process ending.
    expect(later[0]! - pausedAt!, "ms from the 429 to the other processes' first start").to.be.at.least(750);
  });
});
