// AgentRunner on a RedisLaneStore: two runners share a tool lane through Redis; a lost lease
// ends its call alone and honestly (in flight: indeterminate, or safe to call again if
// idempotent; queued: never dispatched); an unreachable Redis fails calls never dispatched, or,
// opted in, runs them in this process's lanes, said on activity$; ctx.fence carries the grant's token.
import { expect } from 'chai';
import { createClient } from 'redis';
import { Agent, AgentRunner, ConcurrencyConfig, LaneTable, ScriptedProvider, ToolRegistry, type RunEvent, type RunnerActivity, type ToolCall } from '../../../lib/index.js';
import { RedisLaneStore, type LaneStore } from '../../../lib/lanes/index.js';
import { leaveScript } from '../../../lib/lanes/redis/scripts.js';
import { closedPort, nodeRedis, redisFixture, requestArgs, REDIS_HOST, sleep, until } from './server.js';

const agent = new Agent({ name: 'fleet', instructions: 'work', model: 'scripted' });
const ask = (id: string, name: string, args: Record<string, unknown> = {}): ToolCall => ({ id, name, arguments: args });

/** One line per tool outcome: `RESULT c1`, `ERROR c2 Name: message`, `INDET c3 message`. */
function outcomes(events: readonly RunEvent[]): string[] {
  const lines: string[] = [];
  for (const event of events) {
    if (event.type === 'TOOL_RESULT') lines.push(`RESULT ${event.callId}`);
    if (event.type === 'TOOL_ERROR') lines.push(`ERROR ${event.callId} ${event.error.name}: ${event.error.message}`);
    if (event.type === 'TOOL_INDETERMINATE') lines.push(`INDET ${event.callId} ${event.message}`);
  }
  return lines;
}

describe('AgentRunner on a RedisLaneStore', function () {
  this.timeout(30_000);
  const redis = redisFixture('runner');
  const { prefix, stores, closers } = redis;

  it('bounds a tool lane across two runners that share a Redis: never more bodies at once than its limit', async () => {
    const second = await nodeRedis();
    closers.push(() => second.close());
    let running = 0;
    let most = 0;
    const body = async (): Promise<string> => {
      most = Math.max(most, ++running);
      await sleep(5);
      running--;
      return 'ok';
    };
    const runners = [redis.client, second].map((c) => {
      const lanes = new RedisLaneStore({ client: c, prefix, leaseSeconds: 3 });
      stores.push(lanes);
      const tools = new ToolRegistry().register({ name: 'search' }, body);
      const turn = { toolCalls: Array.from({ length: 12 }, (_, i) => ask(`c${i}`, 'search')) };
      return new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, concurrency: new ConcurrencyConfig({ perTool: { search: 3 } }), lanes });
    });
    const results = await Promise.all(runners.map((runner, i) => runner.run(agent, 'go', { tenant: `t${i}` })));
    expect(results.map((r) => r.status)).to.deep.equal(['completed', 'completed']);
    expect(results.flatMap((r) => outcomes(r.events)).filter((line) => line.startsWith('RESULT'))).to.have.length(24);
    expect(most).to.equal(3);
  });

  it('ends a call whose lease was lost alone: in flight, its signal aborted and indeterminate (or safe to call again if idempotent); queued, never dispatched', async () => {
    const lanes = new RedisLaneStore({ client: redis.client, prefix, leaseSeconds: 0.6 });
    stores.push(lanes);
    const aborted: string[] = [];
    const fences: Array<string | undefined> = [];
    const started: string[] = [];
    const hang = (_args: unknown, ctx: { callId: string; signal: AbortSignal; fence?: string }): Promise<string> => {
      started.push(ctx.callId);
      fences.push(ctx.fence);
      return new Promise((_resolve, reject) =>
        ctx.signal.addEventListener('abort', () => {
          aborted.push(`${ctx.callId}: ${(ctx.signal.reason as Error).name}`);
          reject(ctx.signal.reason);
        }),
      );
    };
    const tools = new ToolRegistry().register({ name: 'book' }, hang).register({ name: 'look', idempotent: true }, hang);
    const turn = { toolCalls: [ask('c1', 'book'), ask('c2', 'book'), ask('c3', 'look')] };
    const runner = new AgentRunner({
      provider: new ScriptedProvider([turn, { text: 'carried on' }]),
      tools,
      concurrency: new ConcurrencyConfig({ perTool: { book: 1, look: 1 } }),
      lanes,
    });
    const result = runner.run(agent, 'go');
    await until(() => started.length === 2, 'c1 and c3 running');
    // As if this process had been paused past its leases: another process reclaimed every one of
    // them (what its reclaim does: places withdrawn, permits given back) and took the permits.
    for (const tool of ['book', 'look']) {
      const base = `${prefix}{tool:${tool}}`;
      const keys = ['h', 'w', 'q', 'p', 'r', 'm', 'd', 'e'].map((k) => `${base}:${k}`);
      const ids = [...(await redis.client.zRange(`${base}:w`, 0, -1)), ...(await redis.client.zRange(`${base}:h`, 0, -1))];
      for (const id of ids) await redis.client.eval(leaveScript.source, { keys, arguments: [...requestArgs(), id, `${base}:g`, '1'] });
    }
    const done = await result;
    expect(done.status).to.equal('completed');
    expect(done.output).to.equal('carried on');
    const why = 'the lease ran out before it was refreshed and went to another request: this process was paused, or could not reach Redis, for longer than the 0.6 s lease';
    expect(outcomes(done.events)).to.deep.equal([
      `INDET c1 book was in flight when its lease on tool:book was lost (${why}). The side effect may have landed`,
      `ERROR c2 LaneLostError: never dispatched: its place in the queue of tool:book was lost (${why})`,
      `ERROR c3 LaneLostError: look was in flight when its lease on tool:look was lost (${why}). Safe to call again`,
    ]);
    expect(started, 'calls whose body ran').to.deep.equal(['c1', 'c3']);
    expect(aborted.sort()).to.deep.equal(['c1: LaneLostError', 'c3: LaneLostError']);
    expect(fences.every((fence) => fence !== undefined && /^\d+$/.test(fence)), `fences ${fences.join(', ')}`).to.equal(true);
    expect(lanes.occupancy()).to.deep.equal([]);
  });

  it('reports a lost lease through a store that wraps a RedisLaneStore and hands the callback on', async () => {
    const lanes = new RedisLaneStore({ client: redis.client, prefix, leaseSeconds: 0.6 });
    stores.push(lanes);
    const wrapped: LaneStore = { enter: (key, limit, onGrant, party) => lanes.enter(key, limit, onGrant, party), occupancy: () => lanes.occupancy(), changes$: lanes.changes$ };
    let started = false;
    const tools = new ToolRegistry().register({ name: 'wrapped' }, (_args, ctx) => {
      started = true;
      return new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    });
    const turn = { toolCalls: [ask('c1', 'wrapped')] };
    const runner = new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, concurrency: new ConcurrencyConfig({ perTool: { wrapped: 1 } }), lanes: wrapped });
    const result = runner.run(agent, 'go');
    await until(() => started, 'c1 running');
    const base = `${prefix}{tool:wrapped}`;
    const keys = ['h', 'w', 'q', 'p', 'r', 'm', 'd', 'e'].map((k) => `${base}:${k}`);
    for (const id of await redis.client.zRange(`${base}:h`, 0, -1)) await redis.client.eval(leaveScript.source, { keys, arguments: [...requestArgs(), id, `${base}:g`, '1'] });
    const lines = outcomes((await result).events);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.match(/^INDET c1 wrapped was in flight when its lease on tool:wrapped was lost \(.+\)\. The side effect may have landed$/);
  });

  it('hands each body the fencing token of its grant, growing from one grant to the next; none on in-process lanes', async () => {
    const fences: Array<string | undefined> = [];
    const tools = new ToolRegistry().register({ name: 'write', parallelSafe: false }, (_args, ctx) => {
      fences.push(ctx.fence);
      return 'written';
    });
    const turn = { toolCalls: [ask('c1', 'write', { row: 1 }), ask('c2', 'write', { row: 1 })] };
    const lanes = new RedisLaneStore({ client: redis.client, prefix, leaseSeconds: 3 });
    stores.push(lanes);
    const fleet = new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, lanes });
    expect((await fleet.run(agent, 'go')).status).to.equal('completed');
    expect(fences).to.have.length(2);
    expect(BigInt(fences[1]!) > BigInt(fences[0]!), `fences ${fences.join(', ')}`).to.equal(true);
    fences.length = 0;
    const local = new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, lanes: new LaneTable() });
    expect((await local.run(agent, 'go')).status).to.equal('completed');
    expect(fences).to.deep.equal([undefined, undefined]);
  });

  it("runs a nested agent in its caller's fleet permits (no deadlock on a lane of 1), under its caller's fence", async () => {
    const lanes = new RedisLaneStore({ client: redis.client, prefix, leaseSeconds: 3 });
    stores.push(lanes);
    const planner = new Agent({ name: 'planner', instructions: 'plan', model: 'scripted', tools: ['delegate'] });
    const researcher = new Agent({ name: 'researcher', instructions: 'research', model: 'scripted', tools: ['delegate'] });
    const fences: Array<string | undefined> = [];
    const tools = new ToolRegistry().register({ name: 'delegate' }, async (_args, ctx) => {
      fences.push(ctx.fence);
      if (fences.length > 1) return 'found';
      const nested = await ctx.runAgent(researcher, 'look');
      return nested.output;
    });
    const provider = new ScriptedProvider({
      planner: [{ toolCalls: [ask('p1', 'delegate')] }, { text: 'planned' }],
      researcher: [{ toolCalls: [ask('r1', 'delegate')] }, { text: 'researched' }],
    });
    const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ perTool: { delegate: 1 }, perTenant: 1 }), lanes });
    const result = await runner.run(planner, 'go');
    expect(result.status).to.equal('completed');
    expect(outcomes(result.events)).to.deep.equal(['RESULT p1']);
    expect(fences).to.have.length(2);
    expect(fences[0]).to.match(/^\d+$/);
    expect(fences[1], "the nested call's fence").to.equal(fences[0]);
    await lanes.idle();
    expect(await lanes.snapshot(['tool:delegate', 'tenant:default'])).to.deep.equal([]);
  });

  it('close() ends the store: a waiting call fails never dispatched, a running one learns its lease is gone, and the lane is empty in Redis', async () => {
    const lanes = new RedisLaneStore({ client: redis.client, prefix, leaseSeconds: 3 });
    let started = 0;
    const tools = new ToolRegistry().register({ name: 'slow' }, (_args, ctx) => {
      started++;
      return new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
    });
    const turn = { toolCalls: [ask('c1', 'slow'), ask('c2', 'slow')] };
    const runner = new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, concurrency: new ConcurrencyConfig({ perTool: { slow: 1 } }), lanes });
    const result = runner.run(agent, 'go');
    await until(() => started === 1, 'c1 running');
    await lanes.idle();
    await lanes.close();
    const done = await result;
    expect(outcomes(done.events)).to.deep.equal([
      'INDET c1 slow was in flight when its lease on tool:slow was lost (the RedisLaneStore was closed). The side effect may have landed',
      'ERROR c2 LaneLostError: never dispatched: its place in the queue of tool:slow was lost (the RedisLaneStore was closed)',
    ]);
    expect(await new RedisLaneStore({ client: redis.client, prefix }).snapshot(['tool:slow'])).to.deep.equal([]);
  });

  describe('when Redis cannot be reached', () => {
    let unreachable: ReturnType<typeof createClient>;

    before(async () => {
      const port = await closedPort();
      unreachable = createClient({ socket: { host: REDIS_HOST, port, reconnectStrategy: false } });
      unreachable.on('error', () => undefined);
      await unreachable.connect().catch(() => undefined);
    });

    const runOn = async (lanes: RedisLaneStore): Promise<{ events: readonly RunEvent[]; status: string; notices: RunnerActivity[]; ran: number }> => {
      let ran = 0;
      const tools = new ToolRegistry().register({ name: 'search' }, () => ++ran);
      const turn = { toolCalls: [ask('c1', 'search'), ask('c2', 'search'), ask('c3', 'search')] };
      const runner = new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, concurrency: new ConcurrencyConfig({ perTool: { search: 2 } }), lanes });
      const notices: RunnerActivity[] = [];
      const watching = runner.activity$.subscribe((a) => {
        if (a.type === 'lane-store') notices.push(a);
      });
      const { events, status } = await runner.run(agent, 'go');
      watching.unsubscribe();
      return { events, status, notices, ran };
    };

    it('fails calls on shared lanes never dispatched, saying Redis is unreachable, and the run goes on; said once on activity$', async () => {
      const lanes = new RedisLaneStore({ client: unreachable, prefix, leaseSeconds: 1.2, timeoutSeconds: 0.2 });
      stores.push(lanes);
      const { events, status, notices, ran } = await runOn(lanes);
      expect(status).to.equal('completed');
      expect(ran).to.equal(0);
      const lines = outcomes(events);
      expect(lines).to.have.length(3);
      for (const line of lines) expect(line).to.match(/^ERROR c\d LaneLostError: never dispatched: lane tool:search is shared over Redis, which is unreachable \(.+\)$/);
      expect(notices.map((n) => n.type === 'lane-store' && n.status)).to.deep.equal(['unreachable']);
    });

    it('runs them in this process\'s own lanes when opted in (whenUnreachable: in-process), said on activity$', async () => {
      const lanes = new RedisLaneStore({ client: unreachable, prefix, leaseSeconds: 1.2, timeoutSeconds: 0.2, whenUnreachable: 'in-process' });
      stores.push(lanes);
      const { events, status, notices, ran } = await runOn(lanes);
      expect(status).to.equal('completed');
      expect(outcomes(events)).to.deep.equal(['RESULT c1', 'RESULT c2', 'RESULT c3']);
      expect(ran).to.equal(3);
      expect(notices.map((n) => n.type === 'lane-store' && n.status)).to.deep.equal(['in-process']);
      expect(lanes.occupancy()).to.deep.equal([]);
    });

    it('fails a request that no answer comes for within timeoutSeconds, and says Redis is back once it answers', async () => {
      // A client whose commands wait in its offline queue: no answer, no error, until the timeout.
      let answer: () => void = () => undefined;
      const late = new Promise<void>((resolve) => (answer = resolve));
      const connection = {
        evalsha: (sha1: string, keys: readonly string[], args: readonly string[]) => late.then(() => redis.client.evalSha(sha1, { keys: [...keys], arguments: [...args] })),
        eval: (source: string, keys: readonly string[], args: readonly string[]) => redis.client.eval(source, { keys: [...keys], arguments: [...args] }),
        subscriber: () => ({ subscribe: async () => undefined, unsubscribe: async () => undefined, close: async () => undefined }),
      };
      const lanes = new RedisLaneStore({ client: connection, prefix, leaseSeconds: 0.6, timeoutSeconds: 0.1 });
      stores.push(lanes);
      const notices: string[] = [];
      lanes.notices$.subscribe((n) => notices.push(n.status));
      const told: string[] = [];
      lanes.enter('tool:slow', 1, { granted: () => told.push('granted'), lost: (error) => told.push(error.message) });
      await until(() => told.length === 1, 'the loss');
      expect(told[0]).to.equal('lane tool:slow is shared over Redis, which is unreachable (Redis did not answer within 0.1 s)');
      answer();
      await until(() => notices.length === 2, 'Redis back', 3000);
      expect(notices).to.deep.equal(['unreachable', 'restored']);
      await lanes.idle();
      // The request Redis took late was handed back: nothing is left in the lane.
      await until(async () => (await lanes.snapshot(['tool:slow'])).length === 0, 'the late request handed back', 3000);
    });

    after(async () => {
      if (unreachable?.isOpen) await unreachable.close();
    });
  });
});
