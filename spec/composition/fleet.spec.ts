// The composition matrix, a fleet store: two runners, each with a RedisLaneStore of its own on
// its own connection to the real Redis (two processes of a fleet), one key prefix per cell; each
// runs one turn of three calls to `work` for the same tenant, at the same time, bodies of 60 ms,
// real time. Counted from the bodies' side across both runners (one clock, this process's): the
// kind's bound holds across the fleet and is reached, each body runs once, every call ends once
// in call order, every permit is back. No loop monitor: a loaded machine's stalls are not this
// matrix's subject.
import { expect } from 'chai';
import { performance } from 'node:perf_hooks';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry } from '../../lib/index.js';
import { RedisLaneStore } from '../../lib/redis.js';
import { nodeRedis, redisFixture, sleep, type NodeRedis } from '../lanes/redis/server.js';
import { BUDGET, concurrencyOf, declarationOf, expectInCallOrder, expectKind, ids, kinds, outcomes, Tally, TENANT, TOOL } from './kinds.js';

const agent = new Agent({ name: 'fleet', instructions: '', model: 'scripted' });

const behaviour: Record<(typeof kinds)[number], string> = {
  turn: "each runner's turn runs at most two at once, and two at once (the turn lane is the batch's, whatever the store)",
  tool: "the tool's calls of both runners run at most two at once, and two at once",
  tenant: "the tenant's calls of both runners run at most two at once, and two at once",
  rate: "the starts of both runners: no 200 ms holds more than two, and one holds two",
  adaptive: "the fleet's adaptive limit (max 2) holds over both runners, and is reached",
  budget: 'exactly four calls of the six run, those the budget covers; the other two are refused, never started',
};

describe('composition matrix: a fleet store (Redis)', function () {
  this.timeout(20_000);
  const redis = redisFixture('composition');
  let second: NodeRedis;
  before(async () => {
    second = await nodeRedis();
    redis.closers.push(() => second.close());
  });

  for (const kind of kinds) {
    it(`${kind} × fleet store: ${behaviour[kind]}`, async () => {
      const tally = new Tally();
      const tools = new ToolRegistry().register(declarationOf(kind), async (_args, ctx) => {
        tally.started(ctx.callId, ctx.runId, performance.now());
        await sleep(60);
        tally.ended(ctx.callId);
        return 'done';
      });
      const prefix = `${redis.prefix}${kind}:`;
      const stores = [redis.client, second].map((client) => new RedisLaneStore({ client, prefix, leaseSeconds: 3 }));
      redis.stores.push(...stores);
      const runs = ['a', 'b'].map((name, i) => {
        const calls = ids(name, 3);
        const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: calls.map((id) => ({ id, name: TOOL, arguments: {} })) }, { text: 'done' }]), tools, concurrency: concurrencyOf(kind), lanes: stores[i]!, loopStallMs: false });
        return { calls, runner, result: runner.run(agent, 'go', { tenant: TENANT }) };
      });
      const results = await Promise.all(runs.map((r) => r.result));

      expect(results.map((r) => r.status)).to.deep.equal(['completed', 'completed']);
      const ended = results.flatMap((r) => outcomes(r.events));
      const covered = ended.filter((o) => o.endsWith(' result')).map((o) => o.split(' ')[0]!);
      if (kind === 'budget') {
        expect(covered, 'the calls the budget covered').to.have.length(BUDGET);
        expect(ended.filter((o) => !o.endsWith(' result')).map((o) => o.split(' ').slice(1).join(' '))).to.deep.equal(['error budget', 'error budget']);
      }
      expectKind(kind, tally, kind === 'budget' ? covered : [...runs[0]!.calls, ...runs[1]!.calls]);
      runs.forEach((run, i) => expectInCallOrder(results[i]!.events, run.calls));
      for (const store of stores) await store.idle();
      for (const { runner } of runs) expect(runner.lanes.occupancy().filter((lane) => lane.holders > 0 || lane.waiters > 0), 'lanes still held').to.deep.equal([]);
    });
  }
});
