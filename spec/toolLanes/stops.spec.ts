// How a wrapped call ends when it is stopped, in virtual time: a queued call whose request aborts
// never starts and rejects never_dispatched; a running one rejects safe_to_call_again if it is
// idempotent, else indeterminate; a call's own signal stops that call alone; a ceiling's cut is a
// stop with its cause. Each class is on activity$ too, and every permit is back after each ending.
import { expect } from 'chai';
import { asyncScheduler, mergeMap, NEVER, throwError, timer } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { CallInterruptedError, CallStoppedError, ConcurrencyConfig, stopClassOf, ToolLanes, ToolTimedOutError, type RunnerActivity, type StopClass } from '../../lib/index.js';
import { Bodies, settledOf, type Settled } from './helpers.js';

// What a call's Promise settled with, in a line: `=value`, `!Name`, or `stopClass: message`.
function brief(settled: Settled<unknown>): string {
  if ('value' in settled) return `=${String(settled.value)}`;
  const { error } = settled;
  if (error instanceof CallStoppedError) return `${error.stopClass} (${error.tool} ${error.callId}): ${error.message}`;
  return `!${(error as Error).name}`;
}

describe('ToolLanes: how a stopped call ends', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it("classifies a request's calls when its signal aborts: queued never dispatched, running safe to call again or indeterminate", async () => {
    const bodies = new Bodies(asyncScheduler);
    const settled: Array<Promise<Settled<unknown>>> = [];
    const activity: RunnerActivity[] = [];
    let lanes!: ToolLanes;
    testScheduler.run(() => {
      lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }) });
      lanes.activity$.subscribe((event) => activity.push(event));
      const controller = new AbortController();
      const request = lanes.request({ requestId: 'r', signal: controller.signal });
      settled.push(settledOf(request.run({ tool: 'search', callId: 'c1', idempotent: true }, bodies.answering('c1', 50))));
      settled.push(settledOf(request.run({ tool: 'book', callId: 'c2' }, bodies.answering('c2', 50))));
      settled.push(settledOf(request.run({ tool: 'search', callId: 'c3', idempotent: true }, bodies.answering('c3', 50))));
      timer(5).subscribe(() => controller.abort('the user pressed stop'));
      // A call made once its request has stopped never starts either.
      timer(6).subscribe(() => settled.push(settledOf(request.run({ tool: 'search', callId: 'c4' }, bodies.answering('c4')))));
    });
    expect((await Promise.all(settled)).map(brief)).to.deep.equal([
      'safe_to_call_again (search c1): search was in flight when the batch stopped (the request was cancelled: the user pressed stop). Safe to call again',
      'indeterminate (book c2): book was in flight when the batch stopped (the request was cancelled: the user pressed stop). The side effect may have landed',
      'never_dispatched (search c3): never dispatched: the request was cancelled: the user pressed stop',
      'never_dispatched (search c4): never dispatched: the request was cancelled: the user pressed stop',
    ]);
    // Counted from the bodies: the queued ones never ran, the running ones were stopped at 5 ms.
    expect(bodies.runs.map((run) => [run.label, run.start, run.end])).to.deep.equal([
      ['c1', 0, 5],
      ['c2', 0, 5],
    ]);
    // The classes are on activity$ whatever the framework does with the rejections.
    const classes = activity.flatMap((event) => (event.type === 'settled' ? [[event.callId, event.stopClass]] : []));
    expect(classes).to.deep.equal([
      ['c1', 'safe_to_call_again'],
      ['c2', 'indeterminate'],
      ['c3', 'never_dispatched'],
      ['c4', 'never_dispatched'],
    ]);
    expect(lanes.lanes.occupancy()).to.deep.equal([]);
  });

  it("stops a call alone when its own signal aborts; its request's other calls go on", async () => {
    const bodies = new Bodies(asyncScheduler);
    const settled: Array<Promise<Settled<unknown>>> = [];
    testScheduler.run(() => {
      const lanes = new ToolLanes({ concurrency: { perTool: { search: 1 } } });
      const request = lanes.request();
      const own = new AbortController();
      settled.push(settledOf(request.run({ tool: 'search', callId: 'a' }, bodies.answering('a', 20))));
      settled.push(settledOf(request.run({ tool: 'search', callId: 'b', signal: own.signal }, bodies.answering('b'))));
      settled.push(settledOf(request.run({ tool: 'search', callId: 'c' }, bodies.answering('c'))));
      timer(5).subscribe(() => own.abort());
    });
    expect((await Promise.all(settled)).map(brief)).to.deep.equal(['=a', 'never_dispatched (search b): never dispatched: the call was cancelled', '=c']);
    expect(bodies.starts()).to.deep.equal({ a: 0, c: 20 });
  });

  it("starts no queued call whose own signal has aborted, when calls share one signal (a framework's per-step signal) and a stopped sibling's permit comes free within the abort", async () => {
    const bodies = new Bodies(asyncScheduler);
    const settled: Array<Promise<Settled<unknown>>> = [];
    testScheduler.run(() => {
      const lanes = new ToolLanes({ concurrency: { perTool: { search: 1 } } });
      const request = lanes.request();
      const step = new AbortController();
      // Observable bodies: a stopped one ends at once, its permit free within the same abort.
      for (const callId of ['a', 'b', 'c']) settled.push(settledOf(request.run({ tool: 'search', callId, signal: step.signal }, bodies.answering(callId, 20))));
      timer(5).subscribe(() => step.abort());
    });
    expect((await Promise.all(settled)).map(brief)).to.deep.equal([
      'indeterminate (search a): search was in flight when the batch stopped (the call was cancelled). The side effect may have landed',
      'never_dispatched (search b): never dispatched: the call was cancelled',
      'never_dispatched (search c): never dispatched: the call was cancelled',
    ]);
    // Counted from the bodies: only the one running when the signal aborted ever ran.
    expect(bodies.runs.map((run) => [run.label, run.start, run.end])).to.deep.equal([['a', 0, 5]]);
  });

  it('rejects a body failure with the very error the body threw, and leaves its siblings alone', async () => {
    const oops = new RangeError('no such room');
    const settled: Array<Promise<Settled<unknown>>> = [];
    testScheduler.run(() => {
      const lanes = new ToolLanes({ concurrency: { maxConcurrentTools: 1 } });
      const request = lanes.request();
      settled.push(settledOf(request.run({ tool: 'book' }, () => timer(5).pipe(mergeMap(() => throwError(() => oops))))));
      settled.push(settledOf(request.run({ tool: 'book' }, () => { throw oops; })));
      settled.push(settledOf(request.run({ tool: 'book' }, () => Promise.reject(oops))));
      settled.push(settledOf(request.run({ tool: 'book' }, () => 'kept')));
    });
    const all = await Promise.all(settled);
    expect(all.slice(0, 3).map((one) => 'error' in one && one.error === oops)).to.deep.equal([true, true, true]);
    expect(all[3]).to.deep.equal({ value: 'kept' });
  });

  for (const [idempotent, stopClass] of [[true, 'safe_to_call_again'], [false, 'indeterminate']] as const) {
    it(`classifies a call whose body threw a CallInterruptedError as ${stopClass} (idempotent: ${idempotent}), its cause that error`, async () => {
      const interrupted = new CallInterruptedError('its request to the partner timed out');
      const { error } = (await settledOf(new ToolLanes({ concurrency: {} }).run({ tool: 'book', callId: 'b', idempotent }, () => Promise.reject(interrupted)))) as { error: CallStoppedError };
      expect(error).to.be.instanceOf(CallStoppedError);
      expect([error.stopClass, error.dispatched]).to.deep.equal([stopClass, true]);
      expect(error.cause).to.be.instanceOf(Error).and.to.include({ name: 'CallInterruptedError' });
    });
  }

  for (const [idempotent, stopClass] of [[true, 'safe_to_call_again'], [false, 'indeterminate']] as const) {
    it(`classifies a call that outran its perToolSeconds as ${stopClass} (idempotent: ${idempotent}), its cause the ToolTimedOutError`, async () => {
      let settled!: Promise<Settled<unknown>>;
      let lanes!: ToolLanes;
      testScheduler.run(() => {
        lanes = new ToolLanes({ concurrency: { perToolSeconds: { search: 1 }, perTool: { search: 1 } } });
        settled = settledOf(lanes.run({ tool: 'search', callId: 's', idempotent }, () => NEVER));
      });
      const { error } = (await settled) as { error: CallStoppedError };
      expect(error).to.be.instanceOf(CallStoppedError);
      expect([error.stopClass, error.dispatched, error.tool, error.callId]).to.deep.equal([stopClass, true, 'search', 's']);
      expect(error.cause).to.be.instanceOf(Error).and.to.include({ name: 'ToolTimedOutError' });
      expect(error.message).to.equal(new ToolTimedOutError('search', 1, idempotent).message);
      expect(lanes.lanes.occupancy()).to.deep.equal([]);
    });
  }

  it("keeps a stopped body's permits until it settles, when it ignores its abort", async () => {
    const controller = new AbortController();
    const lanes = new ToolLanes({ concurrency: { perTool: { slow: 1 } } });
    let finish!: () => void;
    const stubborn = new Promise<void>((resolve) => (finish = resolve));
    const settled = settledOf(lanes.request({ signal: controller.signal }).run({ tool: 'slow' }, () => stubborn));
    controller.abort();
    expect(brief(await settled)).to.match(/^indeterminate \(slow call-1\)/);
    expect(lanes.lanes.occupancy()).to.deep.equal([{ key: 'tool:slow', limit: 1, holders: 1, waiters: 0 }]);
    finish();
    await stubborn;
    await new Promise((resolve) => setImmediate(resolve));
    expect(lanes.lanes.occupancy()).to.deep.equal([]);
  });

  it('reads the same class with stopClassOf from the settled activity as from the rejection', async () => {
    const classes: Array<StopClass | undefined> = [];
    const controller = new AbortController();
    controller.abort();
    const lanes = new ToolLanes({ concurrency: {} });
    lanes.activity$.subscribe((event) => {
      if (event.type === 'settled') classes.push(event.stopClass);
    });
    const { error } = (await settledOf(lanes.run({ tool: 'x' }, () => 1, { signal: controller.signal }))) as { error: CallStoppedError };
    expect(classes).to.deep.equal([error.stopClass]);
    expect(stopClassOf({ type: 'TOOL_ERROR', stopClass: error.stopClass })).to.equal('never_dispatched');
  });
});
