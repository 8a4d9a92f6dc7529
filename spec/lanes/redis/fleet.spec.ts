// A fleet of runner processes on one Redis: forked workers (worker.ts) hammer one tool lane of
// limit N, their bodies counting themselves in Redis; one process takes every permit and is
// killed with SIGKILL while holding them. The most bodies at once, fleet-wide, never exceeds N,
// and the dead process's permits come back within one lease. The same for an adaptive lane; an
// adaptive lane whose bodies are told "slow down" by the partner's side, and a cost budget, are
// bounded as the bodies count themselves.
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { RedisLaneStore } from '../../../lib/lanes/index.js';
import { exited, forkedFleet } from './forkedFleet.js';
import { until } from './server.js';
import type { WorkerConfig, WorkerMessage } from './worker.js';

const workerFile = fileURLToPath(new URL('./worker.ts', import.meta.url));

describe('a fleet of runner processes on a RedisLaneStore', function () {
  this.timeout(90_000);
  const fleet = forkedFleet<WorkerConfig, WorkerMessage>('fleet', workerFile);
  const { prefix } = fleet;
  const limit = 3;
  const leaseSeconds = 1;

  const config = (role: WorkerConfig['role'], runs: number, calls: number, more: Partial<WorkerConfig>): WorkerConfig => ({ role, prefix, limit, leaseSeconds, runs, calls, ...more });

  function start(role: WorkerConfig['role'], runs: number, calls: number, heard: (message: WorkerMessage) => void, more: Partial<WorkerConfig> = {}): ChildProcess {
    return fleet.start(config(role, runs, calls, more), heard);
  }

  // A victim takes every permit of the tool lane (`kind`) and is killed holding them, while three hammers wait.
  async function killWhileHolding(kind: 'fixed' | 'adaptive', prefix: string): Promise<void> {
    // Only for snapshots: the long lease gives its reads a timeout a loaded machine keeps to.
    const view = new RedisLaneStore({ client: fleet.client, prefix, leaseSeconds: 10 });
    try {
      await killedHolder(kind, prefix, view);
    } finally {
      await view.close();
    }
  }

  async function killedHolder(kind: 'fixed' | 'adaptive', prefix: string, view: RedisLaneStore): Promise<void> {
    let ready = 0;
    let held = 0;
    const startedAt: number[] = [];
    const done: Array<Extract<WorkerMessage, { type: 'done' }>> = [];
    // The victim will take every permit of the lane and hold it; three processes will hammer the lane.
    const victim = start('victim', 1, limit, (m) => {
      if (m.type === 'ready') ready++;
      if (m.type === 'started') held++;
    }, { kind, prefix });
    const hammers = Array.from({ length: 3 }, () =>
      start('hammer', 8, 5, (m) => {
        if (m.type === 'ready') ready++;
        if (m.type === 'started') startedAt.push(m.at);
        if (m.type === 'done') done.push(m);
      }, { kind, prefix }),
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
    await fleet.client.decrBy(`${prefix}running`, limit);

    await until(() => done.length === 3, 'every hammer done', 60_000);
    await Promise.all(hammers.map(exited));
    const reclaimedAfter = Math.min(...startedAt) - killedAt;
    expect(done.flatMap((d) => d.others), 'calls that did not succeed').to.deep.equal([]);
    expect(done.reduce((sum, d) => sum + d.results, 0)).to.equal(3 * 8 * 5);
    expect(Number(await fleet.client.get(`${prefix}most`)), 'most bodies running at once, fleet-wide').to.equal(limit);
    expect(Number(await fleet.client.get(`${prefix}running`)), 'bodies still counted as running').to.equal(0);
    // Within one lease of the kill (the victim refreshed at most a third of a lease before it),
    // with room for a loaded machine to schedule the waiter's timer.
    expect(reclaimedAfter, `ms from the kill to the first permit reclaimed (lease ${leaseSeconds * 1000} ms)`).to.be.at.most(leaseSeconds * 1000 + 500);
    expect(await view.snapshot(['tool:work'])).to.deep.equal([]);
  }

  // Three hammers of `runs` runs of `calls` calls each, started together, run to their end: what each told.
  async function hammered(runs: number, calls: number, more: Partial<WorkerConfig>): Promise<Array<Extract<WorkerMessage, { type: 'done' }>>> {
    const { done } = await fleet.run(Array.from({ length: 3 }, () => config('hammer', runs, calls, more)));
    return done;
  }

  it(`never runs more than ${limit} bodies at once across 4 processes, and gives a SIGKILLed holder's permits back within one lease`, () => killWhileHolding('fixed', `${prefix}fixed:`));

  it(`keeps an adaptive lane's max (${limit}) across 4 processes, and gives a SIGKILLed holder's permits back within one lease`, () => killWhileHolding('adaptive', `${prefix}adaptive:`));

  it('bounds an adaptive lane from the partner\'s side: told "slow down" above 2 at once, the fleet\'s limit falls and few calls are refused', async () => {
    const own = `${prefix}slow:`;
    const max = 8;
    const done = await hammered(6, 5, { kind: 'adaptive', prefix: own, limit: max, slowAbove: 2 });
    const calls = 3 * 6 * 5;
    const limited = Number((await fleet.client.get(`${own}limited`)) ?? '0');
    const others = done.flatMap((d) => d.others.map((event) => (JSON.parse(event) as { error?: { name?: string } }).error?.name));
    // The only failures are the partner's own refusals, each a call of its own.
    expect(others.filter((name) => name !== 'RateLimitedError'), 'failures other than the partner\'s slow down').to.deep.equal([]);
    expect(others).to.have.length(limited);
    expect(done.reduce((sum, d) => sum + d.results, 0)).to.equal(calls - limited);
    expect(Number(await fleet.client.get(`${own}most`)), 'most bodies at once, fleet-wide').to.be.at.most(max);
    // Each refusal halves the fleet's limit (once per burst) and pauses the tool; growing back by
    // one, the limit probes 3 now and then and is refused again (AIMD's price): about a quarter
    // of the calls. A lane of 8 that learned nothing would be refused on most of them.
    expect(limited, 'calls the partner refused').to.be.below(calls / 2);
    const learned = Number(await fleet.client.hGet(`${own}{tool:work}:a`, 'limit'));
    expect(learned, "the fleet's adaptive limit after the runs").to.be.within(1, 4);
  });

  it('spends one cost budget across 3 processes: no more bodies run than it covers, the rest never dispatched', async () => {
    const own = `${prefix}budget:`;
    const budget = 10;
    const done = await hammered(3, 4, { kind: 'budget', prefix: own, budget });
    const refused = done.flatMap((d) => d.others.map((event) => JSON.parse(event) as { error?: { name?: string; message?: string } }));
    expect(done.reduce((sum, d) => sum + d.results, 0), 'calls that ran and succeeded').to.equal(budget);
    expect(refused).to.have.length(3 * 3 * 4 - budget);
    for (const event of refused) {
      expect(event.error?.name).to.equal('BudgetExceededError');
      expect(event.error?.message).to.match(/^never dispatched: the tenant's budget is spent until /);
    }
    // The partner's side: every body that ran counted itself; none ran past the budget.
    expect(Number(await fleet.client.get(`${own}most`)), 'most bodies at once').to.be.at.most(limit);
  });
});
