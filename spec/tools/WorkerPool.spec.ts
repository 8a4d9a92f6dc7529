// WorkerPool: results and errors come back from worker threads; the pool refuses at
// its bound instead of growing; a stopped or timed-out call frees its thread and is
// classified like any call stopped in flight; close() leaves no thread behind.
import { expect } from 'chai';
import * as t from 'io-ts';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  ConfigError,
  ScriptedProvider,
  ToolRegistry,
  WorkerPool,
  WorkerPoolFullError,
  type ModelResponse,
} from '../../lib/index.js';

const moduleUrl = new URL('../fixtures/pool-module.mjs', import.meta.url);
const spinCalls = (...ms: number[]): ModelResponse => ({
  toolCalls: ms.map((n, i) => ({ id: `c${i + 1}`, name: 'spin', arguments: { ms: n } })),
});
const agent = new Agent({ name: 'cruncher', instructions: '', model: 'm' });

describe('WorkerPool', () => {
  const pools: WorkerPool[] = [];
  const makePool = (threads: number, queue: number): WorkerPool => {
    const pool = new WorkerPool({ threads, queue });
    pools.push(pool);
    return pool;
  };
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((pool) => pool.close()));
  });

  it('runs a module export in a worker and resolves with its result', async () => {
    const pool = makePool(1, 0);
    expect(await pool.run(moduleUrl.href, 'default', { city: 'Lisbon' })).to.deep.equal({ echoed: { city: 'Lisbon' }, thread: 'worker' });
  });

  it('rejects with the error the worker threw', async () => {
    const pool = makePool(1, 0);
    const error = await pool.run(moduleUrl.href, 'fail', { message: 'bad input' }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error).to.be.instanceOf(Error);
    expect(error!.message).to.equal('bad input');
  });

  it('refuses at once when every thread is busy and the queue is full, naming its limits', async () => {
    const pool = makePool(1, 1);
    const running = pool.run(moduleUrl.href, 'spin', { ms: 150 });
    const queued = pool.run(moduleUrl.href, 'spin', { ms: 1 });
    const refused = await pool.run(moduleUrl.href, 'spin', { ms: 1 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).to.be.instanceOf(WorkerPoolFullError);
    expect((refused as Error).message).to.equal('the worker pool is full: 1 thread busy and 1 call queued; it refuses rather than grows');
    expect(await Promise.all([running, queued])).to.deep.equal(['spun', 'spun']);
    expect(pool.liveThreads).to.be.at.most(1);
  });

  it('runs a call queued behind one that is aborted, on the thread that replaces it', async () => {
    const pool = makePool(1, 2);
    const controller = new AbortController();
    const running = pool.run(moduleUrl.href, 'spin', { ms: 60_000 }, controller.signal).then(
      () => 'finished',
      (e: unknown) => (e as Error).name,
    );
    const queued = pool.run(moduleUrl.href, 'default', 'queued');
    setTimeout(() => controller.abort(), 100);
    expect(await running).to.equal('AbortError');
    expect(await queued).to.deep.equal({ echoed: 'queued', thread: 'worker' });
  });

  it('refuses bad options with a ConfigError naming the field', () => {
    expect(() => new WorkerPool({ threads: 0, queue: 1 })).to.throw(ConfigError, 'threads must be an integer from 1 up, got 0');
    expect(() => new WorkerPool({ threads: 2, queue: -1 })).to.throw(ConfigError, 'queue must be an integer from 0 up, got -1');
  });

  it('ends every thread on close, and refuses calls afterwards', async () => {
    const pool = makePool(2, 0);
    await Promise.all([pool.run(moduleUrl.href, 'default', 1), pool.run(moduleUrl.href, 'default', 2)]);
    await pool.close();
    expect(pool.liveThreads).to.equal(0);
    const error = await pool.run(moduleUrl.href, 'default', 3).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error!.message).to.equal('the worker pool is closed');
  });

  describe('as a tool body under the runner', () => {
    const runWith = (pool: WorkerPool, idempotent: boolean, concurrency: ConcurrencyConfig, turn: ModelResponse) => {
      const tools = new ToolRegistry().register({ name: 'spin', args: t.type({ ms: t.number }), idempotent }, pool.body(moduleUrl, 'spin'));
      return new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, concurrency, loopStallMs: false });
    };

    it('fails a call that outruns its ceiling with ToolTimedOutError, and frees the thread for the next call', async () => {
      const pool = makePool(1, 4);
      // The second call waits in the pool's queue for its one thread, which the first holds until
      // its ceiling stops it; the second has no ceiling, so a slow start of the replacement thread
      // (a loaded machine) cannot fail it.
      const tools = new ToolRegistry()
        .register({ name: 'spin', args: t.type({ ms: t.number }), idempotent: true }, pool.body(moduleUrl, 'spin'))
        .register({ name: 'echo', idempotent: true }, pool.body(moduleUrl));
      const turn: ModelResponse = { toolCalls: [{ id: 'c1', name: 'spin', arguments: { ms: 60_000 } }, { id: 'c2', name: 'echo', arguments: { after: 'c1' } }] };
      const concurrency = new ConcurrencyConfig({ perToolSeconds: { spin: 0.2 } });
      const result = await new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, concurrency, loopStallMs: false }).run(agent, 'go');
      const [first, second] = result.events.filter((e) => e.type === 'TOOL_ERROR' || e.type === 'TOOL_RESULT');
      expect(first).to.deep.include({ type: 'TOOL_ERROR', callId: 'c1' });
      expect(first!.type === 'TOOL_ERROR' && first!.error.name).to.equal('ToolTimedOutError');
      expect(second).to.deep.include({ type: 'TOOL_RESULT', callId: 'c2', result: { echoed: { after: 'c1' }, thread: 'worker' } });
      expect(pool.load).to.equal(0);
    });

    for (const idempotent of [true, false]) {
      it(`classifies a cancelled pool call as ${idempotent ? 'safe to call again' : 'indeterminate'} and frees its thread`, async () => {
        const pool = makePool(1, 0);
        const controller = new AbortController();
        const runner = runWith(pool, idempotent, new ConcurrencyConfig(), spinCalls(60_000));
        setTimeout(() => controller.abort(), 100);
        const result = await runner.run(agent, 'go', { signal: controller.signal });
        expect(result.status).to.equal('cancelled');
        const stopped = result.events.find((e) => e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE');
        if (idempotent) expect(stopped!.type === 'TOOL_ERROR' && stopped!.error.message).to.match(/Safe to call again$/);
        else expect(stopped!.type === 'TOOL_INDETERMINATE' && stopped!.message).to.match(/The side effect may have landed$/);
        // the one thread is free again: a call runs at once instead of being refused
        expect(await pool.run(moduleUrl.href, 'default', 'next')).to.deep.equal({ echoed: 'next', thread: 'worker' });
      });
    }

    it('keeps siblings on the loop running while a pool call works', async () => {
      const pool = makePool(1, 0);
      const ticks: number[] = [];
      const tools = new ToolRegistry()
        .register({ name: 'spin', args: t.type({ ms: t.number }) }, pool.body(moduleUrl, 'spin'))
        .register({ name: 'tick' }, async () => {
          for (let i = 0; i < 5; i++) {
            await new Promise((resolve) => setTimeout(resolve, 10));
            ticks.push(i);
          }
          return ticks.length;
        });
      const turn: ModelResponse = { toolCalls: [{ id: 'c1', name: 'spin', arguments: { ms: 150 } }, { id: 'c2', name: 'tick', arguments: {} }] };
      const result = await new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, loopStallMs: 100 }).run(agent, 'go');
      const outcomes = result.events.filter((e) => e.type === 'TOOL_RESULT').map((e) => (e.type === 'TOOL_RESULT' ? e.result : undefined));
      expect(outcomes).to.deep.equal(['spun', 5]);
    });
  });
});
