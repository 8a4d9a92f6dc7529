// A run on a fleet's lanes (RedisLaneStore) that waits for a person holds no fleet permit while it
// waits: the fleet's lanes are idle, another process books in the tool lane meanwhile, and the
// run is resumed in a second process, inside the same fleet lanes.
import { expect } from 'chai';
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, ToolRegistry, type RunResult } from '../../../lib/index.js';
import { RedisLaneStore } from '../../../lib/lanes/index.js';
import { nodeRedis, redisFixture, type NodeRedis } from './server.js';

const agent = new Agent({ name: 'fleet', instructions: 'book', model: 'scripted' });

describe('interrupts on a RedisLaneStore', function () {
  this.timeout(30_000);
  const redis = redisFixture('interrupts');
  let secondClient: NodeRedis;
  before(async () => {
    secondClient = await nodeRedis();
    redis.closers.push(() => secondClient.close());
  });

  // One process of the fleet: its own client and store, the fleet's bounds (one booking at a time, per tenant two calls).
  function processOf(client: NodeRedis, script: ConstructorParameters<typeof ScriptedProvider>[0], booked: string[], approve?: () => boolean) {
    const lanes = new RedisLaneStore({ client, prefix: redis.prefix, leaseSeconds: 3 });
    redis.stores.push(lanes);
    const tools = new ToolRegistry()
      .register({ name: 'book', needsApproval: true }, (_args, ctx) => (booked.push(ctx.callId), `booked ${ctx.callId}`))
      .register({ name: 'lookup' }, () => 'found');
    const concurrency = new ConcurrencyConfig({ perTool: { book: 1 }, perTenant: 2 });
    return { lanes, runner: new AgentRunner({ provider: new ScriptedProvider(script), tools, concurrency, lanes, ...(approve ? { approve } : {}) }) };
  }

  it('holds no fleet permit while it waits, and is resumed by another process inside the fleet lanes', async () => {
    const booked: string[] = [];
    const first = processOf(redis.client, [{ toolCalls: [{ id: 'b1', name: 'book', arguments: {} }, { id: 'l1', name: 'lookup', arguments: {} }] }], booked);
    const result = await first.runner.run(agent, 'go', { tenant: 'acme' });
    expect(result.status).to.equal('interrupted');
    expect(await first.lanes.snapshot()).to.deep.equal([]);
    // Meanwhile another process books in the one-permit tool lane and the tenant's lane, unhindered.
    const other = processOf(secondClient, [{ toolCalls: [{ id: 'x1', name: 'book', arguments: {} }] }, { text: 'done' }], booked, () => true);
    expect((await other.runner.run(agent, 'go', { tenant: 'acme' })).status).to.equal('completed');
    const second = processOf(secondClient, [{ text: 'done' }], booked);
    const resumed = await second.runner.resume(agent, (result as Extract<RunResult, { status: 'interrupted' }>).snapshot, { tenant: 'acme', approvals: { b1: true } });
    expect(resumed.status).to.equal('completed');
    expect(booked).to.deep.equal(['x1', 'b1']);
    expect(await second.lanes.snapshot()).to.deep.equal([]);
  });
});
