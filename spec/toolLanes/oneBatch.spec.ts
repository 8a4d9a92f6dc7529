// A request's calls flow through one batch while any is open: each call's Promise settles from its
// own outcome (never held for an earlier call), a call that is not parallel-safe runs in a batch
// of its own, the request's signal is heard once per batch and not at all once no call is open,
// and each call is told settled once however many batches the request went through.
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { CallStoppedError, ConcurrencyConfig, ToolLanes, type RunnerActivity } from '../../lib/index.js';
import { CALLS_PER_BATCH } from '../../lib/toolLanes/requestFlow.js';

// A body that answers `value` when released, and says whether its signal aborted.
function held<T>(value: T): { body: (ctx: ToolLanes.Context) => Promise<T>; release: () => void; aborted: () => boolean } {
  let release: () => void = () => undefined;
  let signal: AbortSignal | undefined;
  const answer = new Promise<T>((resolve) => (release = () => resolve(value)));
  return {
    body: (ctx) => {
      signal = ctx.signal;
      return answer;
    },
    release: () => release(),
    aborted: () => signal?.aborted === true,
  };
}

const ticks = async (n = 5): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

describe('ToolLanes: one batch per request', () => {
  it("hears the request's signal once while calls are open, and not at all once none is", async () => {
    const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { search: 2 } }) });
    const controller = new AbortController();
    const request = lanes.request({ signal: controller.signal });
    const a = held('a');
    const runs = [request.run({ tool: 'search' }, a.body), request.run({ tool: 'search' }, () => 'b'), request.run({ tool: 'search' }, () => Promise.resolve('c'))];
    await ticks();
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(1);
    a.release();
    expect(await Promise.all(runs)).to.deep.equal(['a', 'b', 'c']);
    await ticks();
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(0);
    // The next call starts another batch, which ends in its turn.
    expect(await request.run({ tool: 'search' }, () => 'd')).to.equal('d');
    await ticks();
    expect(getEventListeners(controller.signal, 'abort')).to.have.length(0);
  });

  it("settles each call as soon as its own outcome is decided, not after the request's earlier calls", async () => {
    const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ maxConcurrentTools: 4 }) });
    const request = lanes.request();
    const a = held('a');
    let aDone = false;
    const first = request.run({ tool: 'slow' }, a.body).then((value) => ((aDone = true), value));
    expect(await request.run({ tool: 'quick' }, () => Promise.resolve('b'))).to.equal('b');
    expect(aDone).to.equal(false);
    a.release();
    expect(await first).to.equal('a');
  });

  it('runs a call that is not parallel-safe without waiting for the calls before it in its request', async () => {
    const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ maxConcurrentTools: 4 }) });
    const request = lanes.request();
    const a = held('a');
    let aDone = false;
    const first = request.run({ tool: 'slow' }, a.body).then((value) => ((aDone = true), value));
    expect(await request.run({ tool: 'write', args: { id: 1 }, parallelSafe: false }, () => 'w')).to.equal('w');
    expect(aDone).to.equal(false);
    a.release();
    expect(await first).to.equal('a');
  });

  it("stops a running call alone on its own signal: its body aborted, its permit back for the next call, its sibling's body untouched", async () => {
    const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { search: 1, fetch: 1 } }) });
    const request = lanes.request();
    const own = new AbortController();
    const a = held('a');
    const b = held('b');
    const first = request.run({ tool: 'fetch', callId: 'a' }, a.body);
    const second = request.run({ tool: 'search', callId: 'b', signal: own.signal }, b.body).catch((error: unknown) => error);
    await ticks();
    own.abort();
    const error = await second;
    expect(error).to.be.instanceOf(CallStoppedError);
    expect((error as CallStoppedError).stopClass).to.equal('indeterminate');
    expect(b.aborted()).to.equal(true);
    expect(a.aborted()).to.equal(false);
    // Its body answered its abort (here: it settles now), so the one search permit is back.
    b.release();
    await ticks();
    expect(await request.run({ tool: 'search', callId: 'c' }, () => 'c')).to.equal('c');
    expect(getEventListeners(own.signal, 'abort')).to.have.length(0);
    a.release();
    expect(await first).to.equal('a');
  });

  it('tells each call ended and settled once, across the batches a request goes through', async () => {
    const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { search: 2 } }) });
    const told: RunnerActivity[] = [];
    const watching = lanes.activity$.subscribe((activity) => told.push(activity));
    const request = lanes.request({ requestId: 'r' });
    const slow = held('s');
    const firstRound = [request.run({ tool: 'search', callId: 'a' }, slow.body), request.run({ tool: 'search', callId: 'b' }, () => 'b'), request.run({ tool: 'search', callId: 'c' }, () => 'c')];
    await ticks();
    slow.release();
    await Promise.all(firstRound);
    await ticks();
    await Promise.all([request.run({ tool: 'search', callId: 'd' }, () => 'd'), request.run({ tool: 'search', callId: 'e' }, () => Promise.resolve('e'))]);
    await ticks();
    watching.unsubscribe();
    const count = (type: string): Record<string, number> => {
      const counts: Record<string, number> = {};
      for (const activity of told) if (activity.type === type && 'callId' in activity) counts[activity.callId] = (counts[activity.callId] ?? 0) + 1;
      return counts;
    };
    expect(count('settled')).to.deep.equal({ a: 1, b: 1, c: 1, d: 1, e: 1 });
    expect(count('ended')).to.deep.equal({ a: 1, b: 1, c: 1, d: 1, e: 1 });
  });

  it('stops a call that is not parallel-safe, in its batch of its own, by its own signal and by its request\'s, each classed as a stop', async () => {
    const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { write: 1 } }) });
    const requestStop = new AbortController();
    const request = lanes.request({ signal: requestStop.signal });
    const first = held('one');
    const running = request.run({ tool: 'write', args: { id: 1 }, parallelSafe: false, idempotent: true }, first.body);
    const own = new AbortController();
    let secondRan = false;
    const queued = request.run({ tool: 'write', args: { id: 2 }, parallelSafe: false, signal: own.signal }, () => {
      secondRan = true;
      return 'two';
    });
    await ticks();
    own.abort();
    const ownStop = await queued.catch((error: unknown) => error);
    expect(ownStop).to.be.instanceOf(CallStoppedError);
    expect((ownStop as CallStoppedError).stopClass).to.equal('never_dispatched');
    let thirdRan = false;
    const third = request.run({ tool: 'write', args: { id: 3 }, parallelSafe: false }, () => {
      thirdRan = true;
      return 'three';
    });
    await ticks();
    requestStop.abort();
    const [ranStop, thirdStop] = await Promise.all([running.catch((error: unknown) => error), third.catch((error: unknown) => error)]);
    expect([(ranStop as CallStoppedError).stopClass, (thirdStop as CallStoppedError).stopClass]).to.deep.equal(['safe_to_call_again', 'never_dispatched']);
    expect(first.aborted()).to.equal(true);
    expect([secondRan, thirdRan]).to.deep.equal([false, false]);
  });

  it('keeps a bounded number of calls of a request that is never idle (tools wrapped once for a whole server)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { search: 4 } }) });
    const request = lanes.request();
    // Each call's arguments, watched: a batch that kept every call would keep them all.
    const watched: WeakRef<object>[] = [];
    const total = 4 * CALLS_PER_BATCH;
    let previous: { release: () => void; done: Promise<unknown> } | undefined;
    for (let i = 0; i < total; i++) {
      const args = { q: i };
      watched.push(new WeakRef(args));
      const call = held(i);
      const done = request.run({ tool: 'search', args }, call.body);
      await ticks(1);
      // The call before settles only once this one is open: the request never goes idle.
      previous?.release();
      expect(await previous?.done).to.equal(i === 0 ? undefined : i - 1);
      previous = { release: call.release, done };
    }
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      gc();
    }
    const kept = watched.filter((ref) => ref.deref() !== undefined).length;
    expect(kept).to.be.at.most(2 * CALLS_PER_BATCH);
    expect(kept).to.be.at.least(1);
    previous!.release();
    expect(await previous!.done).to.equal(total - 1);
  });
});
