// A rate kept across three processes on a real Redis, for frameworks' own agents: each process
// (fleetWorker.ts) runs requests of the OpenAI Agents SDK's Runner (two of them) or of LangChain's
// createReactAgent (the third), their tools wrapped by withLanes on one RedisLaneStore prefix with
// a perToolRate.
// Counted from the bodies: each stamps its start by Redis's clock, and no window of perSeconds
// holds more starts than the rate allows, fleet-wide.
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { forkedFleet, mostInWindow, stampsUnder } from '../lanes/redis/forkedFleet.js';
import type { FleetWorkerConfig, FleetWorkerMessage } from './fleetWorker.js';

const workerFile = fileURLToPath(new URL('./fleetWorker.ts', import.meta.url));

describe('withLanes on a RedisLaneStore: a rate across 3 processes of a framework', function () {
  this.timeout(120_000);
  const fleet = forkedFleet<FleetWorkerConfig, FleetWorkerMessage>('frameworks', workerFile);
  const { prefix } = fleet;

  it('admits at most burst + limit body starts in any window of perSeconds across the Agents SDK and LangChain processes, and every process exits by itself', async () => {
    // 2 a second, 1 at once; 3 processes x 2 requests x 3 calls = 18 calls. A body stamps a little
    // after its admission (the framework's own work comes between, then a round trip to Redis); with
    // 500 ms between admissions, a delay under 500 ms on a busy machine cannot squeeze one more into a window.
    const rate = { limit: 2, perSeconds: 1, burst: 1 };
    const frameworks = ['openai-agents', 'langchain', 'openai-agents'] as const;
    const { done, codes } = await fleet.run(
      frameworks.map((framework) => ({ framework, prefix, rate, runs: 2, calls: 3 })),
      90_000,
    );
    expect(codes, 'exit codes').to.deep.equal([0, 0, 0]);
    expect(done.flatMap((d) => d.others), 'what the model was told besides a result').to.deep.equal([]);
    expect(done.reduce((sum, d) => sum + d.results, 0)).to.equal(18);
    const stamps = await stampsUnder(fleet.client, prefix);
    expect(stamps).to.have.length(18);
    const most = mostInWindow(stamps, rate.perSeconds * 1000);
    expect(most, `most body starts in one window of perSeconds, fleet-wide (ms from the first: ${stamps.map((t) => t - stamps[0]!).join(' ')})`).to.be.at.most(rate.burst + rate.limit);
    // The bound bit: 18 starts at 2 a second take at least (18 - 1) x 500 ms, less the stamps' jitter.
    expect(stamps[stamps.length - 1]! - stamps[0]!, 'ms from the first start to the last').to.be.at.least((18 - rate.burst) * 500 - 500);
  });
});
