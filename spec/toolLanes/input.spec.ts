// What ToolLanes refuses, naming the field, and what a body is handed: its ids, the idempotency
// key the runner would give the same call, the fencing tokens of the lanes it holds (none on
// in-process lanes), and progress reported on activity$.
import { expect } from 'chai';
import { CallStoppedError, ConfigError, ConcurrencyConfig, LaneTable, ToolLanes, type RunnerActivity } from '../../lib/index.js';

describe('ToolLanes: its options, its calls, and what a body is handed', () => {
  const cases: Array<{ title: string; make: () => unknown; field: string; says: RegExp }> = [
    { title: 'options that are not an object', make: () => new ToolLanes(null as never), field: 'ToolLanes', says: /ToolLanes options must be an object, got null/ },
    { title: 'no concurrency', make: () => new ToolLanes({} as never), field: 'concurrency', says: /needs concurrency/ },
    { title: 'a concurrency that is neither a config nor its options', make: () => new ToolLanes({ concurrency: 3 as never }), field: 'concurrency', says: /must be a ConcurrencyConfig or its options, got 3/ },
    { title: 'a bad limit inside concurrency', make: () => new ToolLanes({ concurrency: { perTool: { search: 0 } } }), field: 'perTool.search', says: /perTool/ },
    { title: 'lanes that are not a store', make: () => new ToolLanes({ concurrency: {}, lanes: {} as never }), field: 'lanes', says: /lanes must be a LaneStore/ },
    { title: 'an unknown option', make: () => new ToolLanes({ concurrency: {}, lane: new LaneTable() } as never), field: 'lane', says: /has no field lane/ },
  ];
  for (const { title, make, field, says } of cases) {
    it(`refuses ${title} with a ConfigError naming ${field}`, () => {
      expect(make).to.throw(ConfigError, says).with.property('field', field);
    });
  }

  const calls: Array<{ title: string; run: (lanes: ToolLanes) => unknown; says: RegExp }> = [
    { title: 'a call without a tool', run: (lanes) => lanes.run({} as never, () => 1), says: /call\.tool must be a non-empty string, got undefined/ },
    { title: 'an empty callId', run: (lanes) => lanes.run({ tool: 't', callId: '' }, () => 1), says: /call\.callId must be a non-empty string/ },
    { title: 'a parallelSafe that is not a boolean', run: (lanes) => lanes.run({ tool: 't', parallelSafe: 'no' as never }, () => 1), says: /call\.parallelSafe must be a boolean, got "no"/ },
    { title: 'a signal that is not an AbortSignal', run: (lanes) => lanes.run({ tool: 't', signal: {} as never }, () => 1), says: /call\.signal must be an AbortSignal/ },
    { title: 'a negative cost', run: (lanes) => lanes.run({ tool: 't', cost: -1 }, () => 1), says: /call\.cost must be a finite number from 0 up, got -1/ },
    { title: 'an unknown field of a call', run: (lanes) => lanes.run({ tool: 't', tenant: 'x' } as never, () => 1), says: /call has no field tenant/ },
    { title: 'a body that is not a function', run: (lanes) => lanes.run({ tool: 't' }, 5 as never), says: /body must be a function/ },
    { title: "a request's empty tenant", run: (lanes) => lanes.request({ tenant: '' }), says: /tenant must be a non-empty string/ },
    { title: "a request's signal that is not one", run: (lanes) => lanes.request({ signal: 'stop' as never }), says: /signal must be an AbortSignal, got "stop"/ },
    { title: "a request's concurrency given as options", run: (lanes) => lanes.request({ concurrency: { maxConcurrentTools: 1 } as never }), says: /concurrency must be a ConcurrencyConfig/ },
  ];
  for (const { title, run, says } of calls) {
    it(`refuses ${title} with a TypeError, before anything runs`, () => {
      const lanes = new ToolLanes({ concurrency: {} });
      expect(() => run(lanes)).to.throw(TypeError, says);
      expect(lanes.lanes.occupancy()).to.deep.equal([]);
    });
  }

  it("hands a body its ids, the runner's form of idempotency key, no fences on in-process lanes, and its signal", async () => {
    const lanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { search: 1 } }) });
    const seen = await lanes.request({ tenant: 'acme', requestId: 'run-7' }).run({ tool: 'search', callId: 'call_1' }, (ctx) => ({
      ids: [ctx.callId, ctx.tool, ctx.tenant, ctx.requestId, ctx.idempotencyKey],
      fence: ctx.fence,
      fences: ctx.fences,
      aborted: ctx.signal.aborted,
    }));
    expect(seen).to.deep.equal({ ids: ['call_1', 'search', 'acme', 'run-7', 'run-7:call_1'], fence: undefined, fences: {}, aborted: false });
    // Numbered within its request when the framework gives no id: the key is stable for the same request and position.
    const request = lanes.request({ requestId: 'run-8' });
    const keys = [await request.run({ tool: 'x' }, (ctx) => ctx.idempotencyKey), await request.run({ tool: 'x' }, (ctx) => ctx.idempotencyKey)];
    expect(keys).to.deep.equal(['run-8:call-1', 'run-8:call-2']);
  });

  it("tells a body's progress on activity$, with the request's id as runId", async () => {
    const lanes = new ToolLanes({ concurrency: {} });
    const seen: RunnerActivity[] = [];
    const subscription = lanes.activity$.subscribe((event) => seen.push(event));
    await lanes.run({ tool: 'crawl', callId: 'c' }, (ctx) => {
      ctx.progress(1, 2, 'half way');
      return 'done';
    }, { requestId: 'q' });
    subscription.unsubscribe();
    expect(seen.map((event) => event.type)).to.deep.equal(['started', 'progress', 'ended', 'settled']);
    expect(seen[1]).to.include({ runId: 'q', turn: 1, callId: 'c', progress: 1, total: 2, message: 'half way' });
  });

  it('names a stopped call in its error, which is a CallStoppedError as the batch builds it too', () => {
    const built = new CallStoppedError('never dispatched: why', false);
    expect([built.stopClass, built.tool, built.callId]).to.deep.equal(['never_dispatched', undefined, undefined]);
    const named = new CallStoppedError('x was in flight', true, { tool: 'x', callId: 'c', stopClass: 'indeterminate' });
    expect([named.stopClass, named.tool, named.callId, named.name]).to.deep.equal(['indeterminate', 'x', 'c', 'CallStoppedError']);
  });
});
