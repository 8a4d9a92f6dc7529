// A rate kept across three processes on a real Redis, for frameworks' own agents: each process
// (fleetWorker.ts) runs requests of the OpenAI Agents SDK's Runner (two of them) or of LangChain's
// createReactAgent (the third), their tools wrapped by withLanes on one RedisLaneStore prefix with
// a perToolRate.
// Counted from the bodies: each stamps its start by Redis's clock, and no window of perSeconds
// holds more starts than the rate allows, fleet-wide.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { clearPrefix, nodeRedis, requireRedis, uniquePrefix, until, type NodeRedis } from '../lanes/redis/server.js';
import type { FleetWorkerConfig, FleetWorkerMessage } from './fleetWorker.js';

const workerFile = fileURLToPath(new URL('./fleetWorker.ts', import.meta.url));

describe('withLanes on a RedisLaneStore: a rate across 3 processes of a framework', function () {
  this.timeout(120_000);
  const prefix = uniquePrefix('frameworks');
  const children: ChildProcess[] = [];
  let client: NodeRedis;

  before(async () => {
    await requireRedis();
    client = await nodeRedis();
  });

  after(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (client !== undefined) {
      await clearPrefix(client, prefix);
      await client.close();
    }
  });

  const exited = (child: ChildProcess): Promise<number | null> =>
    child.exitCode !== null || child.signalCode !== null ? Promise.resolve(child.exitCode) : new Promise((resolve) => child.once('exit', (code) => resolve(code)));

  it('admits at most burst + limit body starts in any window of perSeconds across the Agents SDK and LangChain processes, and every process exits by itself', async () => {
    // 2 a second, 1 at once; 3 processes x 2 requests x 3 calls = 18 calls. A body stamps a little
    // after its admission (the framework's own work comes between, then a round trip to Redis); with
    // 500 ms between admissions, a delay under 500 ms on a busy machine cannot squeeze one more into a window.
    const rate = { limit: 2, perSeconds: 1, burst: 1 };
    const frameworks = ['openai-agents', 'langchain', 'openai-agents'] as const;
    let ready = 0;
    const done: Array<Extract<FleetWorkerMessage, { type: 'done' }>> = [];
    const fleet: ChildProcess[] = [];
    for (const framework of frameworks) {
      const config: FleetWorkerConfig = { framework, prefix, rate, runs: 2, calls: 3 };
      const child = fork(workerFile, [JSON.stringify(config)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      child.on('message', (message: FleetWorkerMessage) => {
        if (message.type === 'ready') ready++;
        else done.push(message);
      });
      children.push(child);
      fleet.push(child);
    }
    await until(() => ready === 3, 'every process started', 90_000);
    for (const child of fleet) child.send('go');
    await until(() => done.length === 3, 'every process done', 60_000);
    expect(await Promise.all(fleet.map(exited)), 'exit codes').to.deep.equal([0, 0, 0]);
    expect(done.flatMap((d) => d.others), 'what the model was told besides a result').to.deep.equal([]);
    expect(done.reduce((sum, d) => sum + d.results, 0)).to.equal(18);
    const stamps = (await client.lRange(`${prefix}stamps`, 0, -1)).map(Number).sort((a, b) => a - b);
    expect(stamps).to.have.length(18);
    const windowMs = rate.perSeconds * 1000;
    let most = 0;
    for (let i = 0; i < stamps.length; i++) {
      let j = i;
      while (j < stamps.length && stamps[j]! < stamps[i]! + windowMs) j++;
      most = Math.max(most, j - i);
    }
    expect(most, `most body starts in one window of perSeconds, fleet-wide (ms from the first: ${stamps.map((t) => t - stamps[0]!).join(' ')})`).to.be.at.most(rate.burst + rate.limit);
    // The bound bit: 18 starts at 2 a second take at least (18 - 1) x 500 ms, less the stamps' jitter.
    expect(stamps[stamps.length - 1]! - stamps[0]!, 'ms from the first start to the last').to.be.at.least((18 - rate.burst) * 500 - 500);
  });
});
