// Two AgentRunners, each with a RedisLaneStore of its own on one Redis (two processes of a
// fleet): they see one adaptive limit for a tool, and spend from one budget per tenant.
import { expect } from 'chai';
import { Agent, AgentRunner, RateLimitedError, ScriptedProvider, ToolRegistry, type ModelRequest, type RunnerActivity } from '../../../lib/index.js';
import { RedisLaneStore } from '../../../lib/lanes/index.js';
import { nodeRedis, redisFixture, sleep, type NodeRedis } from './server.js';

const agent = new Agent({ name: 'fleet', instructions: 'work', model: 'scripted', freeText: true });

// One turn of `calls` calls to `tool` (reporting 40 tokens), then the answer.
function oneTurn(tool: string, calls: number) {
  return (request: ModelRequest) =>
    request.messages.some((m) => m.role === 'assistant')
      ? { text: 'done', usage: { inputTokens: 30, outputTokens: 10 } }
      : { toolCalls: Array.from({ length: calls }, (_, i) => ({ id: `c${i}`, name: tool, arguments: {} })), usage: { inputTokens: 30, outputTokens: 10 } };
}

describe('AgentRunners sharing a Redis: adaptive and budget lanes', function () {
  this.timeout(30_000);
  const redis = redisFixture('runnerKinds');
  let second: NodeRedis;
  before(async () => {
    second = await nodeRedis();
    redis.closers.push(() => second.close());
  });

  const runnerOn = (c: NodeRedis, tools: ToolRegistry, concurrency: ConstructorParameters<typeof AgentRunner>[0]['concurrency'], script: ReturnType<typeof oneTurn>) => {
    const lanes = new RedisLaneStore({ client: c, prefix: redis.prefix, leaseSeconds: 3 });
    redis.stores.push(lanes);
    return { runner: new AgentRunner({ provider: new ScriptedProvider([script, script]), tools, concurrency, lanes }), lanes };
  };

  it("sees one adaptive limit: a partner's slow down told to one runner bounds the other's calls", async () => {
    let running = 0;
    let most = 0;
    const tools = new ToolRegistry().register({ name: 'partner' }, async (_args, ctx) => {
      if (ctx.tenant === 'first') throw new RateLimitedError('slow down', 0);
      most = Math.max(most, ++running);
      await sleep(20);
      running--;
      return 'ok';
    });
    const concurrency = { perToolAdaptive: { partner: { min: 1, max: 4 } } };
    const a = runnerOn(redis.client, tools, concurrency, oneTurn('partner', 1));
    const changes: string[] = [];
    a.runner.activity$.subscribe((activity: RunnerActivity) => {
      if (activity.type === 'limit-changed') changes.push(`${activity.lane} ${activity.previous}->${activity.limit} ${activity.cause}`);
    });
    expect((await a.runner.run(agent, 'go', { tenant: 'first' })).status).to.equal('completed');
    await a.lanes.idle();
    expect(changes).to.deep.equal(['tool:partner 4->2 overload']);
    expect(await redis.client.hGet(`${redis.prefix}{tool:partner}:a`, 'limit')).to.equal('2');
    expect(a.lanes.limits()).to.deep.equal([{ key: 'tool:partner', limit: 2, min: 1, max: 4 }]);
    // The other runner's eight calls run at most two at a time: the limit the first one's call moved.
    const b = runnerOn(second, tools, concurrency, oneTurn('partner', 8));
    const result = await b.runner.run(agent, 'go', { tenant: 'second' });
    expect(result.status).to.equal('completed');
    expect(most).to.be.at.most(3);
    expect(most).to.be.at.least(2);
  });

  it("spends one token budget per tenant: a turn one runner's tenant cannot pay for is refused by the other runner too", async () => {
    const tools = new ToolRegistry().register({ name: 'lookup' }, () => 'ok');
    const concurrency = { perTenantBudget: { tokens: 50, perSeconds: 60 } };
    const a = runnerOn(redis.client, tools, concurrency, oneTurn('lookup', 1));
    // Two turns: 80 tokens, one turn over the 50.
    expect((await a.runner.run(agent, 'go', { tenant: 'acme' })).status).to.equal('completed');
    await a.lanes.idle();
    const b = runnerOn(second, tools, concurrency, oneTurn('lookup', 1));
    const refused = await b.runner.run(agent, 'go', { tenant: 'acme' });
    expect(refused.status).to.equal('failed');
    expect(refused.error?.name).to.equal('BudgetExceededError');
    expect(refused.error?.message).to.match(/^the tenant's budget is spent until \d{4}-\d\d-\d\dT[\d:.]+Z: acme needs 1 tokens and has 0 left in its window$/);
    // Another tenant, on the same runner, is not touched.
    const other = await b.runner.run(agent, 'go', { tenant: 'globex' });
    expect(other.status).to.equal('completed');
  });
});
