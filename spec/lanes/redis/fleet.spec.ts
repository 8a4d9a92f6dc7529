// A fleet of runner processes on one Redis: forked workers (worker.ts) hammer one tool lane of
// limit N, their bodies counting themselves in Redis; one process takes every permit and is
// killed with SIGKILL while holding them. The most bodies at once, fleet-wide, never exceeds N,
// and the dead process's permits come back within one lease.
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { RedisLaneStore } from '../../../lib/lanes/index.js';
import { clearPrefix, nodeRedis, requireRedis, uniquePrefix, until, type NodeRedis } from './server.js';
import type { WorkerConfig, WorkerMessage } from './worker.js';

const workerFile = fileURLToPath(new URL('./worker.ts', import.meta.url));

describe('a fleet of runner processes on a RedisLaneStore', function () {
  this.timeout(90_000);
  const prefix = uniquePrefix('fleet');
  const limit = 3;
  const leaseSeconds = 1;
  const children: ChildProcess[] = [];
  let client: NodeRedis;
  let view: RedisLaneStore;

  before(async () => {
    await requireRedis();
    client = await nodeRedis();
    // Only for snapshots: the long lease gives its reads a timeout a loaded machine keeps to.
    view = new RedisLaneStore({ client, prefix, leaseSeconds: 10 });
  });

  after(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await view?.close();
    if (client !== undefined) {
      await clearPrefix(client, prefix);
      await client.close();
    }
  });

  function start(role: WorkerConfig['role'], runs: number, calls: number, heard: (message: WorkerMessage) => void): ChildProcess {
    const config: WorkerConfig = { role, prefix, limit, leaseSeconds, runs, calls };
    const child = fork(workerFile, [JSON.stringify(config)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.on('message', (message) => heard(message as WorkerMessage));
    children.push(child);
    return child;
  }

  const exited = (child: ChildProcess): Promise<number | null> =>
    child.exitCode !== null || child.signalCode !== null ? Promise.resolve(child.exitCode) : new Promise((resolve) => child.once('exit', (code) => resolve(code)));

  it(`never runs more than ${limit} bodies at once across 4 processes, and gives a SIGKILLed holder's permits back within one lease`, async () => {
    let ready = 0;
    let held = 0;
    const startedAt: number[] = [];
    const done: Array<Extract<WorkerMessage, { type: 'done' }>> = [];
    // The victim will take every permit of the lane and hold it; three processes will hammer the lane.
    const victim = start('victim', 1, limit, (m) => {
      if (m.type === 'ready') ready++;
      if (m.type === 'started') held++;
    });
    const hammers = Array.from({ length: 3 }, () =>
      start('hammer', 8, 5, (m) => {
        if (m.type === 'ready') ready++;
        if (m.type === 'started') startedAt.push(m.at);
        if (m.type === 'done') done.push(m);
      }),
    );
    await until(() => ready === 4, 'every process started', 60_000);
    victim.send('go');
    await until(() => held === limit, 'the victim holding every permit', 10_000);
    for (const hammer of hammers) hammer.send('go');
    await until(async () => ((await view.snapshot(['tool:work']))[0]?.waiters ?? 0) >= 3 * 3, 'every hammer waiting', 10_000);
    expect(startedAt, 'bodies started while the victim held every permit').to.deep.equal([]);

    // The victim dies holding its permits; its bodies die with it.
    const killedAt = Date.now();
    victim.kill('SIGKILL');
    await exited(victim);
    await client.decrBy(`${prefix}running`, limit);

    await until(() => done.length === 3, 'every hammer done', 60_000);
    await Promise.all(hammers.map(exited));
    const reclaimedAfter = Math.min(...startedAt) - killedAt;
    expect(done.flatMap((d) => d.others), 'calls that did not succeed').to.deep.equal([]);
    expect(done.reduce((sum, d) => sum + d.results, 0)).to.equal(3 * 8 * 5);
    expect(Number(await client.get(`${prefix}most`)), 'most bodies running at once, fleet-wide').to.equal(limit);
    expect(Number(await client.get(`${prefix}running`)), 'bodies still counted as running').to.equal(0);
    // Within one lease of the kill (the victim refreshed at most a third of a lease before it),
    // with room for a loaded machine to schedule the waiter's timer.
    expect(reclaimedAfter, `ms from the kill to the first permit reclaimed (lease ${leaseSeconds * 1000} ms)`).to.be.at.most(leaseSeconds * 1000 + 500);
    expect(await view.snapshot(['tool:work'])).to.deep.equal([]);
  });
});
