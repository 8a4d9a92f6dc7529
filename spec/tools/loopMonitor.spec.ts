// The loop monitor: a body that holds the event loop longer than loopStallMs fails its
// own call with EventLoopStalledError naming the tool, whether it blocks at once or after
// an await, while its siblings' results are kept. Blocking is real CPU time here; the
// assertions are about which call failed, never about how long anything took.
import { expect } from 'chai';
import sinon from 'sinon';
import * as t from 'io-ts';
import { Agent, AgentRunner, EventLoopStalledError, ScriptedProvider, ToolRegistry, type ModelResponse, type RunEvent } from '../../lib/index.js';
import { LoopMonitor } from '../../lib/tools/loopMonitor.js';
import { keepShapes } from '../../lib/tools/loopMonitor.js';

// A body run as a call of `tool` under `monitor`: timed now and in every callback it schedules;
// what the engine does for each call (open, run, release), in one step for these specs.
function watch<T>(monitor: LoopMonitor, tool: string, body: () => T, onStall: (error: EventLoopStalledError) => void): { value: T; release: () => void } {
  const opened = monitor.open(tool, { loopStalled: onStall });
  const value = monitor.run(opened, body, undefined);
  return { value, release: () => opened.release() };
}

function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // holding the loop, as a CPU-bound body does
  }
}

const agent = new Agent({ name: 'worker', instructions: '', model: 'm' });
const call = (id: string, name: string): ModelResponse['toolCalls'] => [{ id, name, arguments: {} }];

async function outcomes(tools: ToolRegistry, turn: ModelResponse, loopStallMs: number | false = 50): Promise<RunEvent[]> {
  const result = await new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, loopStallMs }).run(agent, 'go');
  return result.events.filter((e) => e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR');
}

describe('loop monitor', () => {
  it('fails a body that blocks synchronously, naming the tool, and keeps an async sibling\'s result', async () => {
    const tools = new ToolRegistry()
      .register({ name: 'crunch' }, () => {
        block(120);
        return 'crunched';
      })
      .register({ name: 'fetch' }, () => new Promise((resolve) => setTimeout(resolve, 20, 'fetched')));
    const [crunch, fetch] = await outcomes(tools, { toolCalls: [...call('c1', 'crunch')!, ...call('c2', 'fetch')!] });
    expect(crunch!.type).to.equal('TOOL_ERROR');
    if (crunch!.type === 'TOOL_ERROR') {
      expect(crunch!.error.name).to.equal('EventLoopStalledError');
      expect(crunch!.error.message).to.match(/^crunch blocked the event loop for \d+ms \(loopStallMs is 50\); run a blocking body on a WorkerPool$/);
    }
    expect(fetch).to.deep.include({ type: 'TOOL_RESULT', callId: 'c2', result: 'fetched' });
  });

  it('charges a stall after the body\'s first await to that call, not to a sibling in flight', async () => {
    const tools = new ToolRegistry()
      .register({ name: 'late_blocker' }, async () => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        block(120);
        return 'late';
      })
      .register({ name: 'waiter' }, async () => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        await new Promise((resolve) => setTimeout(resolve, 30));
        return 'waited';
      });
    const [waiter, blocker] = await outcomes(tools, { toolCalls: [...call('c1', 'waiter')!, ...call('c2', 'late_blocker')!] });
    expect(waiter).to.deep.include({ type: 'TOOL_RESULT', callId: 'c1', result: 'waited' });
    expect(blocker!.type === 'TOOL_ERROR' && blocker!.error.name).to.equal('EventLoopStalledError');
    expect(blocker!.type === 'TOOL_ERROR' && blocker!.error.message).to.match(/^late_blocker blocked/);
  });

  it('lets short synchronous stretches through', async () => {
    const tools = new ToolRegistry().register({ name: 'quick', args: t.unknown }, () => {
      block(2);
      return 'ok';
    });
    const [quick] = await outcomes(tools, { toolCalls: call('c1', 'quick') });
    expect(quick).to.deep.include({ type: 'TOOL_RESULT', result: 'ok' });
  });

  it('stops watching every call once the run is over, a synchronous stall included', async () => {
    const tools = new ToolRegistry()
      .register({ name: 'crunch' }, () => {
        block(80);
        return 'crunched';
      })
      .register({ name: 'fetch' }, () => new Promise((resolve) => setTimeout(resolve, 5, 'fetched')));
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [...call('c1', 'crunch')!, ...call('c2', 'fetch')!] }, { text: 'done' }]), tools, loopStallMs: 50 });
    await runner.run(agent, 'go');
    expect((runner as unknown as { monitor: LoopMonitor }).monitor.watching).to.equal(0);
    // The process-wide hook stays on for a turn of the loop (calls answering one after another
    // do not switch it each time), then goes off.
    await new Promise((resolve) => setImmediate(resolve));
    expect(LoopMonitor.hooked).to.equal(false);
  });

  it('keeps the hook on across calls whose bodies go on after they return, and turns it off once they are done', async () => {
    const monitor = new LoopMonitor(1_000);
    for (let i = 0; i < 3; i++) {
      const watched = watch(monitor, 'later', () => Promise.resolve(i), () => undefined);
      expect(LoopMonitor.hooked).to.equal(true);
      await watched.value;
      watched.release();
    }
    expect(monitor.watching).to.equal(0);
    expect(LoopMonitor.hooked).to.equal(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect(LoopMonitor.hooked).to.equal(false);
  });

  it('never turns the hook on for bodies that answer at once, and leaves no storage on once they are done', async () => {
    const stores = (promise: Promise<unknown>) => Object.getOwnPropertySymbols(promise).filter((symbol) => symbol.description === 'kResourceStore').length;
    await new Promise((resolve) => setImmediate(resolve));
    const others = stores(Promise.resolve(0));
    const monitor = new LoopMonitor(1_000);
    const stalled: EventLoopStalledError[] = [];
    for (let i = 0; i < 3; i++) {
      watch(monitor, 'quick', () => i, (error) => stalled.push(error)).release();
      expect(LoopMonitor.hooked).to.equal(false);
    }
    expect(monitor.watching).to.equal(0);
    await new Promise((resolve) => setImmediate(resolve));
    expect(stores(Promise.resolve(1))).to.equal(others);
    expect(stalled).to.have.length(0);
    // Its synchronous part is still timed.
    const strict = new LoopMonitor(10);
    watch(strict, 'slow', () => {
      block(30);
      return 'done';
    }, (error) => stalled.push(error)).release();
    expect(stalled.map((error) => error.tool)).to.deep.equal(['slow']);
    expect(LoopMonitor.hooked).to.equal(false);
  });

  it('leaves no storage of its own on the process once idle, to tag every later Promise', async () => {
    // Each enabled AsyncLocalStorage tags every new Promise with a store of its own; other
    // libraries in the process may have theirs, so the monitor's is counted against them.
    const stores = (promise: Promise<unknown>) => Object.getOwnPropertySymbols(promise).filter((symbol) => symbol.description === 'kResourceStore').length;
    await new Promise((resolve) => setImmediate(resolve));
    const others = stores(Promise.resolve(0));
    const monitor = new LoopMonitor(1_000);
    const watched = watch(monitor, 'quick', () => Promise.resolve(1), () => undefined);
    try {
      expect(stores(watched.value)).to.equal(others + 1);
    } finally {
      watched.release();
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(LoopMonitor.hooked).to.equal(false);
    expect(stores(Promise.resolve(2))).to.equal(others);
  });

  it('does nothing when turned off with loopStallMs: false', async () => {
    const tools = new ToolRegistry().register({ name: 'crunch' }, () => {
      block(80);
      return 'crunched';
    });
    const [crunch] = await outcomes(tools, { toolCalls: call('c1', 'crunch') }, false);
    expect(crunch).to.deep.include({ type: 'TOOL_RESULT', result: 'crunched' });
  });

  describe('LoopMonitor', () => {
    it('reports a stall once, with the tool and how long it held the loop', () => {
      const monitor = new LoopMonitor(20);
      const stalls: EventLoopStalledError[] = [];
      const watched = watch(monitor, 'crunch', () => block(40), (error) => stalls.push(error));
      watched.release();
      expect(stalls).to.have.length(1);
      expect(stalls[0]).to.be.instanceOf(EventLoopStalledError);
      expect(stalls[0]!.tool).to.equal('crunch');
      expect(stalls[0]!.stalledMs).to.be.at.least(20);
    });

    it('stops charging a call once it is released', async () => {
      const monitor = new LoopMonitor(20);
      const stalls: EventLoopStalledError[] = [];
      let later: Promise<void> | undefined;
      const watched = watch(monitor, 'tool', () => {
        later = new Promise<void>((resolve) => setTimeout(resolve, 5)).then(() => block(40));
      }, (error) => stalls.push(error));
      watched.release();
      await later;
      expect(stalls).to.deep.equal([]);
    });

    it('keeps charging a body in flight while the kept shapes are made (keepWarmShapes leaves its context on)', async () => {
      const monitor = new LoopMonitor(20);
      const stalls: string[] = [];
      const watched = watch(monitor, 'crunch', () => new Promise<void>((resolve) => setTimeout(resolve, 2)).then(() => block(40)), (error) => stalls.push(error.tool));
      keepShapes((make) => void make());
      await watched.value;
      watched.release();
      expect(stalls).to.deep.equal(['crunch']);
    });

    it('charges each stall after an await to its own call, each by its own monitor\'s limit, with both in flight', async () => {
      const strict = new LoopMonitor(20);
      const lenient = new LoopMonitor(10_000);
      const stalls: string[] = [];
      const after = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
      const a = watch(strict, 'strict-tool', () => after(2).then(() => block(40)), (error) => stalls.push(`strict ${error.tool}`));
      const b = watch(lenient, 'lenient-tool', () => after(4).then(() => block(40)), (error) => stalls.push(`lenient ${error.tool}`));
      expect(strict.watching + lenient.watching).to.equal(2);
      await Promise.all([a.value, b.value]);
      a.release();
      b.release();
      expect(stalls).to.deep.equal(['strict strict-tool']);
      expect(strict.watching + lenient.watching).to.equal(0);
    });

    it('turns the hook off even when the last call ended under fake timers that were then restored', async () => {
      const clock = sinon.useFakeTimers();
      try {
        watch(new LoopMonitor(1_000), 'later', () => Promise.resolve(1), () => undefined).release();
      } finally {
        clock.restore();
      }
      await new Promise((resolve) => setImmediate(resolve));
      expect(LoopMonitor.hooked).to.equal(false);
    });

    it('rethrows what the body throws', () => {
      const monitor = new LoopMonitor(20);
      expect(() => watch(monitor, 'tool', () => {
        throw new RangeError('sync');
      }, () => undefined)).to.throw(RangeError, 'sync');
    });

    it('refuses a limit that is not positive', () => {
      expect(() => new LoopMonitor(0)).to.throw(TypeError, 'Expected loopStallMs to be a positive number, got 0');
    });
  });
});
