// Streamed model turns through AgentRunner, in virtual time: each call starts as soon as the
// stream completes it, inside its lanes, while the model writes the next; the transcript is the
// same bytes as for the turn given whole (outcomes held until MODEL_RESPONSE is out); text
// deltas go to activity$ only; usage and finish reasons land on MODEL_RESPONSE and sum into
// RunResult.usage; a stream that fails, a part that does not decode, a cancel, FAIL_RUN and
// unsubscribing each end the reading with every call classified and the request aborted.
import { expect } from 'chai';
import * as t from 'io-ts';
import { concat, from, ignoreElements, lastValueFrom, map, Observable, timer, toArray, type Subscription } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  OnToolError,
  ScriptedProvider,
  ToolRegistry,
  type ModelResponse,
  type ModelStreamPart,
  type RunEvent,
  type RunnerActivity,
  type RunResult,
  type ScriptStep,
} from '../../lib/index.js';
import { deterministicTranscript } from '../../lib/testing.js';

const planner = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });

/** The parts a provider streams `response` as: its text in three deltas, its calls, its usage and finish reason. */
function partsOf(response: ModelResponse): ModelStreamPart[] {
  const parts: ModelStreamPart[] = [];
  const { text, toolCalls = [], usage, finishReason } = response;
  if (text !== undefined) {
    const third = Math.ceil(text.length / 3);
    for (let i = 0; i < Math.max(1, text.length); i += Math.max(1, third)) parts.push({ type: 'text-delta', delta: text.slice(i, i + third) });
  }
  for (const call of toolCalls) parts.push({ type: 'tool-call', ...call } as ModelStreamPart);
  if (usage !== undefined) parts.push({ type: 'usage', ...usage });
  if (finishReason !== undefined) parts.push({ type: 'finish', finishReason });
  return parts;
}

/** One line per event, with the virtual time it came at. */
function line(event: RunEvent, at: number): string {
  switch (event.type) {
    case 'MODEL_RESPONSE':
      return `${at} MODEL ${event.turn} [${event.toolCalls.map((c) => c.id).join(' ')}]`;
    case 'TOOL_RESULT':
      return `${at} RESULT ${event.callId}`;
    case 'TOOL_ERROR':
      return `${at} ERROR ${event.callId} ${event.error.name}: ${event.error.message}`;
    case 'TOOL_INDETERMINATE':
      return `${at} INDET ${event.callId}`;
    case 'RUN_FAILED':
      return `${at} FAILED ${event.error.name}: ${event.error.message}`;
    case 'RUN_CANCELLED':
      return `${at} CANCELLED`;
    case 'RUN_INTERRUPTED':
      return `${at} INTERRUPTED`;
    case 'RUN_COMPLETED':
      return `${at} COMPLETED ${String(event.output)}`;
    case 'RUN_STARTED':
      return `${at} START`;
  }
}

const work = (id: string, args: Record<string, unknown> = {}) => ({ id, name: 'work', arguments: args });

describe('streamed model turns', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  /** Runs `script` in virtual time; bodies of `work` answer after `bodyMs` (per call id, or one for all). */
  function play(
    script: readonly ScriptStep[],
    options: { bodyMs?: number | Record<string, number>; tools?: ToolRegistry; runner?: Partial<ConstructorParameters<typeof AgentRunner>[0]>; agent?: Agent; signalAt?: number; unsubscribeAt?: number } = {},
  ): { lines: string[]; events: RunEvent[]; activity: RunnerActivity[]; lanesAfter: unknown[] } {
    const lines: string[] = [];
    const events: RunEvent[] = [];
    const activity: RunnerActivity[] = [];
    let lanesAfter: unknown[] = [];
    // Each run its own clock, from 0.
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
    testScheduler.run(({ cold, flush }) => {
      const { bodyMs = 200 } = options;
      const tools =
        options.tools ??
        new ToolRegistry().register({ name: 'work', args: t.partial({ fail: t.boolean }) }, (args, ctx) => {
          if (args.fail === true) throw new Error(`${ctx.callId} failed`);
          const ms = typeof bodyMs === 'number' ? bodyMs : (bodyMs[ctx.callId] ?? 0);
          return cold(`${ms}ms (a|)`, { a: `done ${ctx.callId}` });
        });
      const runner = new AgentRunner({ provider: new ScriptedProvider(script), tools, ...options.runner });
      const watching = runner.activity$.subscribe((a) => activity.push(a));
      const controller = new AbortController();
      if (options.signalAt !== undefined) testScheduler.schedule(() => controller.abort('stop pressed'), options.signalAt);
      const subscription: Subscription = runner.run$(options.agent ?? planner, 'go', { signal: controller.signal }).subscribe((event) => {
        events.push(event);
        lines.push(line(event, testScheduler.now()));
      });
      if (options.unsubscribeAt !== undefined) testScheduler.schedule(() => subscription.unsubscribe(), options.unsubscribeAt);
      flush();
      watching.unsubscribe();
      lanesAfter = runner.lanes.occupancy();
    });
    return { lines, events, activity, lanesAfter };
  }

  /** A stream of `parts`, one every `gapMs` from 0, then its end `gapMs` after the last. */
  const spaced =
    (parts: readonly ModelStreamPart[], gapMs: number) =>
    (): Observable<ModelStreamPart> =>
      concat(...parts.map((part, i) => timer(i === 0 ? 0 : gapMs).pipe(map(() => part))), timer(parts.length === 0 ? gapMs : gapMs).pipe(ignoreElements()));

  it('starts each call as soon as the stream completes it: 4 calls 100 ms apart with bodies of 200 ms take 500 ms, not 600', () => {
    const turn: ModelResponse = { toolCalls: ['c1', 'c2', 'c3', 'c4'].map((id) => work(id)) };
    const streamedRun = play([spaced(partsOf(turn), 100), { text: 'done' }]);
    const wholeRun = play([turn, { text: 'done' }]);
    const started = streamedRun.activity.filter((a) => a.type === 'started').map((a) => a.at);
    expect(started).to.deep.equal([0, 100, 200, 300]);
    expect(streamedRun.lines).to.deep.equal([
      '0 START',
      // The response is out once the stream ended; c1 and c2, done by then, were held for it.
      '400 MODEL 1 [c1 c2 c3 c4]',
      '400 RESULT c1',
      '400 RESULT c2',
      '400 RESULT c3',
      '500 RESULT c4',
      '500 MODEL 2 []',
      '500 COMPLETED done',
    ]);
    expect(wholeRun.lines.at(-1)).to.equal('200 COMPLETED done');
    // The same turn given whole after the same 400 ms of writing ends at 600.
    const slowWhole = play([() => spaced([], 400)().pipe(toArray(), map((): ModelResponse => turn)), { text: 'done' }]);
    expect(slowWhole.lines.at(-1)).to.equal('600 COMPLETED done');
  });

  const turns: Array<{ title: string; turn: ModelResponse }> = [
    {
      title: 'text, three calls (one failing), usage and a finish reason',
      turn: { text: 'Looking them up.', toolCalls: [work('a'), work('b', { fail: true }), work('c')], usage: { inputTokens: 120, outputTokens: 45 }, finishReason: 'tool-calls' },
    },
    {
      title: 'a malformed call, a duplicate id, an unknown tool and bad arguments',
      turn: {
        toolCalls: [
          work('a'),
          { id: 'b', name: 42, arguments: '{}' } as never,
          work('a'),
          { id: 'c', name: 'nope', arguments: '{}' },
          work('d', { fail: 'yes' }),
          { id: 'e', name: 'work', arguments: '{"fail":' },
          { id: 'f', name: 'work' } as never,
        ],
      },
    },
  ];
  for (const { title, turn } of turns) {
    it(`gives the same transcript, byte for byte, as the turn given whole: ${title}`, () => {
      const finalTurn: ModelResponse = { text: 'All done.', usage: { inputTokens: 300, outputTokens: 4 }, finishReason: 'stop' };
      const streamedRun = play([spaced(partsOf(turn), 30), spaced(partsOf(finalTurn), 10)], { bodyMs: { a: 50, c: 5, d: 0 } });
      const wholeRun = play([turn, finalTurn], { bodyMs: { a: 50, c: 5, d: 0 } });
      expect(JSON.stringify(deterministicTranscript(streamedRun.events))).to.equal(JSON.stringify(deterministicTranscript(wholeRun.events)));
      expect(streamedRun.events.filter((e) => e.type.startsWith('TOOL_'))).to.have.length(turn.toolCalls!.length);
    });
  }

  it('decodes each call as it arrives: a duplicate id or a malformed call fails alone while the others run', () => {
    const turn: ModelResponse = { toolCalls: [work('a'), work('a'), { id: 'm', name: 'work', arguments: 42 } as never, work('b')] };
    const { lines, activity } = play([spaced(partsOf(turn), 100), { text: 'ok' }], { bodyMs: 50 });
    expect(activity.filter((a) => a.type === 'started').map((a) => (a.type === 'started' ? `${a.callId}@${a.at}` : ''))).to.deep.equal(['a@0', 'b@300']);
    expect(lines.slice(1, 6)).to.deep.equal([
      '400 MODEL 1 [a a m b]',
      '400 RESULT a',
      '400 ERROR a DuplicateCallIdError: call id a appears twice in one response; this call was not dispatched',
      "400 ERROR m MalformedToolCallError: the model's call #3 is malformed and was not dispatched: toolCalls.2.arguments: expected string or UnknownRecord or undefined, got 42",
      '400 RESULT b',
    ]);
  });

  it('keeps a parallelSafe:false call waiting for every call before it, and starts nothing after it until it is done', () => {
    const tools = new ToolRegistry()
      .register({ name: 'work' }, (_args, ctx) => testScheduler.createColdObservable(`${ctx.callId === 'a' ? 250 : 50}ms (a|)`, { a: ctx.callId }))
      .register({ name: 'book', parallelSafe: false }, () => testScheduler.createColdObservable('100ms (a|)', { a: 'booked' }));
    const turn: ModelResponse = { toolCalls: [work('a'), work('b'), { id: 'k', name: 'book', arguments: {} }, work('c')] };
    const { activity, lines } = play([spaced(partsOf(turn), 20), { text: 'ok' }], { tools });
    const at = (type: string) => activity.filter((a) => a.type === type).map((a) => (a.type === 'started' || a.type === 'ended' ? `${a.callId}@${a.at}` : ''));
    // a and b start as they come; the booking waits for a (250 ms); c, which came at 60, waits for the booking.
    expect(at('started')).to.deep.equal(['a@0', 'b@20', 'k@250', 'c@350']);
    expect(lines.at(-1)).to.equal('400 COMPLETED ok');
  });

  it("sends the model's text to activity$ as it is written, not to the transcript; MODEL_RESPONSE carries it whole", () => {
    const parts: ModelStreamPart[] = [
      { type: 'text-delta', delta: 'Lis' },
      { type: 'text-delta', delta: 'bon is ' },
      { type: 'text-delta', delta: 'cheapest.' },
    ];
    const { events, activity } = play([spaced(parts, 10)]);
    expect(activity.filter((a) => a.type === 'text-delta').map((a) => (a.type === 'text-delta' ? [a.turn, a.delta, a.at] : []))).to.deep.equal([
      [1, 'Lis', 0],
      [1, 'bon is ', 10],
      [1, 'cheapest.', 20],
    ]);
    expect(events.map((e) => e.type)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
    expect(events[1]).to.deep.equal({ type: 'MODEL_RESPONSE', turn: 1, text: 'Lisbon is cheapest.', toolCalls: [] });
  });

  it("puts each turn's usage and finish reason on MODEL_RESPONSE, the last usage part standing, and sums them in RunResult.usage", async () => {
    const provider = new ScriptedProvider([
      () => from<ModelStreamPart[]>([{ type: 'usage', inputTokens: 100, outputTokens: 1 }, { type: 'tool-call', id: 'a', name: 'work', arguments: '{}' }, { type: 'usage', inputTokens: 100, outputTokens: 30 }, { type: 'finish', finishReason: 'tool-calls' }]),
      { text: 'done', usage: { inputTokens: 150, outputTokens: 5 }, finishReason: 'stop' },
    ]);
    const result: RunResult = await new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'work' }, () => 1) }).run(planner, 'go');
    const responses = result.events.filter((e) => e.type === 'MODEL_RESPONSE');
    expect(responses).to.deep.equal([
      { type: 'MODEL_RESPONSE', turn: 1, toolCalls: [{ id: 'a', name: 'work', arguments: '{}' }], usage: { inputTokens: 100, outputTokens: 30 }, finishReason: 'tool-calls' },
      { type: 'MODEL_RESPONSE', turn: 2, text: 'done', toolCalls: [], usage: { inputTokens: 150, outputTokens: 5 }, finishReason: 'stop' },
    ]);
    expect(result.usage).to.deep.equal({ inputTokens: 250, outputTokens: 35 });
    // A run whose provider reports no usage has none.
    const plain = await new AgentRunner({ provider: new ScriptedProvider([{ text: 'hi' }]), tools: new ToolRegistry() }).run(planner, 'go');
    expect(plain).not.to.have.property('usage');
  });

  it('reads a stream that is all synchronous', async () => {
    const turn: ModelResponse = { text: 'Two.', toolCalls: [work('a'), work('b')], finishReason: 'tool-calls' };
    const provider = new ScriptedProvider([() => from(partsOf(turn)), () => from(partsOf({ text: 'ok' }))]);
    const result = await new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'work' }, (_a, ctx) => ctx.callId) }).run(planner, 'go');
    expect(result.events.map((e) => e.type)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'TOOL_RESULT', 'TOOL_RESULT', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
    expect(result.output).to.equal('ok');
    expect(result.messages[1]).to.deep.equal({ role: 'assistant', content: 'Two.', toolCalls: [work('a'), work('b')] });
  });

  describe('a stream cut short', () => {
    // Shared lanes (per tool, per tenant) that a call stands in while it runs: each must be idle after.
    const shared = new ConcurrencyConfig({ perTool: { work: 4 }, perTenant: 8 });
    /** A stream of the given parts at the given times (`at`), that then fails, ends, or hangs; it records its abort. */
    function stream(timed: ReadonlyArray<[number, ModelStreamPart]>, end: { failAt: number; error: unknown } | { hang: true }, seen: { aborted?: unknown; unsubscribed?: boolean }): ScriptStep {
      return (_request, signal) =>
        new Observable<ModelStreamPart>((subscriber) => {
          signal.addEventListener('abort', () => (seen.aborted = signal.reason));
          for (const [at, part] of timed) testScheduler.schedule(() => subscriber.next(part), at);
          if ('failAt' in end) testScheduler.schedule(() => subscriber.error(end.error), end.failAt);
          return () => (seen.unsubscribed = true);
        });
    }

    it('fails the run when the stream fails mid-turn, after classifying the calls it had started', () => {
      const seen: { aborted?: unknown } = {};
      const tools = new ToolRegistry()
        .register({ name: 'lookup', idempotent: true }, () => testScheduler.createColdObservable('500ms (a|)', { a: 1 }))
        .register({ name: 'book' }, () => testScheduler.createColdObservable('500ms (a|)', { a: 1 }))
        .register({ name: 'quick' }, () => 'q');
      const parts: Array<[number, ModelStreamPart]> = [
        [0, { type: 'tool-call', id: 'a', name: 'lookup', arguments: {} }],
        [10, { type: 'tool-call', id: 'b', name: 'book', arguments: {} }],
        [20, { type: 'tool-call', id: 'c', name: 'quick', arguments: {} }],
        [30, { type: 'text-delta', delta: 'and then' }],
      ];
      const { lines } = play([stream(parts, { failAt: 50, error: Object.assign(new Error('socket hang up'), { status: 502 }) }, seen)], { tools });
      expect(lines).to.deep.equal([
        '0 START',
        '50 MODEL 1 [a b c]',
        "50 ERROR a CallStoppedError: lookup was in flight when the batch stopped (the model's reply failed mid-stream (socket hang up)). Safe to call again",
        '50 INDET b',
        '50 RESULT c',
        '50 FAILED ProviderError: model provider failed on turn 1: socket hang up',
      ]);
      // The provider ended the request itself: the runner had nothing left to abort.
      expect(seen.aborted).to.equal(undefined);
    });

    it('fails the run as a whole reply does when the stream fails before any call came', () => {
      const { lines } = play([stream([[0, { type: 'text-delta', delta: 'Let me' }]], { failAt: 5, error: new Error('overloaded') }, {})]);
      expect(lines).to.deep.equal(['0 START', '5 FAILED ProviderError: model provider failed on turn 1: overloaded']);
    });

    it('fails the run naming a part that does not decode, aborting the request', () => {
      const seen: { aborted?: unknown } = {};
      const parts: Array<[number, ModelStreamPart]> = [
        [0, { type: 'tool-call', id: 'a', name: 'work', arguments: {} }],
        [10, { type: 'usage', inputTokens: -1, outputTokens: 2 } as never],
      ];
      const { lines } = play([stream(parts, { hang: true }, seen)], { bodyMs: 100 });
      expect(lines).to.deep.equal([
        '0 START',
        '10 MODEL 1 [a]',
        "10 INDET a",
        '10 FAILED ProviderError: model provider failed on turn 1: the reply does not decode: stream part 2 (usage).inputTokens: expected a whole number of tokens from 0 up, got -1',
      ]);
      expect(String(seen.aborted)).to.match(/the run stopped/);
      const unknown = play([stream([[0, { type: 'reasoning-delta', delta: 'hmm' } as never]], { hang: true }, {})]);
      expect(unknown.lines[1]).to.equal('0 FAILED ProviderError: model provider failed on turn 1: the reply does not decode: stream part 1: unknown type "reasoning-delta"; expected text-delta, tool-call, usage, finish or response');
    });

    it('cancels mid-stream: the request aborted, the calls so far classified, then RUN_CANCELLED', () => {
      const seen: { aborted?: unknown; unsubscribed?: boolean } = {};
      const parts: Array<[number, ModelStreamPart]> = [
        [0, { type: 'tool-call', id: 'a', name: 'work', arguments: {} }],
        [10, { type: 'tool-call', id: 'b', name: 'work', arguments: {} }],
        [100, { type: 'tool-call', id: 'late', name: 'work', arguments: {} }],
      ];
      const { lines, activity, lanesAfter } = play([stream(parts, { hang: true }, seen)], { bodyMs: { a: 5, b: 500 }, signalAt: 50, runner: { concurrency: shared } });
      expect(lines).to.deep.equal(['0 START', '50 MODEL 1 [a b]', '50 RESULT a', '50 INDET b', '50 CANCELLED']);
      expect(lanesAfter).to.deep.equal([]);
      expect(seen.unsubscribed).to.equal(true);
      expect(String(seen.aborted)).to.match(/the run stopped/);
      expect(activity.filter((a) => a.type === 'started')).to.have.length(2);
    });

    it('cancels as a turn stopped while asked does when no call had come', () => {
      const seen: { aborted?: unknown } = {};
      const { lines } = play([stream([[0, { type: 'text-delta', delta: 'Think' }]], { hang: true }, seen)], { signalAt: 30 });
      expect(lines).to.deep.equal(['0 START', '30 CANCELLED']);
      expect(seen.aborted).not.to.equal(undefined);
    });

    it('stops reading when the batch stops itself (FAIL_RUN): the rest is never asked for', () => {
      const seen: { aborted?: unknown } = {};
      const parts: Array<[number, ModelStreamPart]> = [
        [0, { type: 'tool-call', id: 'a', name: 'work', arguments: {} }],
        [10, { type: 'tool-call', id: 'b', name: 'work', arguments: { fail: true } }],
        [20, { type: 'tool-call', id: 'c', name: 'work', arguments: {} }],
      ];
      const agent = new Agent({ name: 'planner', instructions: '', model: 'm', onToolError: OnToolError.FAIL_RUN });
      const { lines, lanesAfter } = play([stream(parts, { hang: true }, seen)], { agent, bodyMs: 100, runner: { concurrency: shared } });
      expect(lines).to.deep.equal(['0 START', '10 MODEL 1 [a b]', '10 INDET a', '10 ERROR b Error: b failed', '10 FAILED Error: b failed']);
      expect(lanesAfter).to.deep.equal([]);
      expect(seen.aborted).not.to.equal(undefined);
    });

    it('aborts the request when the run is left mid-stream', () => {
      const seen: { aborted?: unknown; unsubscribed?: boolean } = {};
      const { lines, lanesAfter } = play([stream([[0, { type: 'tool-call', id: 'a', name: 'work', arguments: {} }]], { hang: true }, seen)], { unsubscribeAt: 40, runner: { concurrency: shared } });
      expect(lines).to.deep.equal(['0 START']);
      expect(lanesAfter).to.deep.equal([]);
      expect(seen.unsubscribed).to.equal(true);
      expect(seen.aborted).not.to.equal(undefined);
    });
  });

  it('asks for approval of a streamed call though the turn began with calls that need none', async () => {
    const asked: string[] = [];
    const tools = new ToolRegistry().register({ name: 'work' }, () => 'w').register({ name: 'pay', needsApproval: true }, () => 'paid');
    const provider = new ScriptedProvider([() => from<ModelStreamPart[]>([{ type: 'tool-call', ...work('a') }, { type: 'tool-call', id: 'p', name: 'pay', arguments: {} }]), { text: 'ok' }]);
    const runner = new AgentRunner({ provider, tools, approve: (call) => (asked.push(call.callId), false) });
    const result = await runner.run(planner, 'go');
    expect(asked).to.deep.equal(['p']);
    expect(result.events.find((e) => e.type === 'TOOL_ERROR')).to.deep.include({ callId: 'p', error: { name: 'ToolRejectedError', message: 'approval rejected the call: not approved' } });
  });

  it('runs a streamed turn inside the lanes: a turn cap of 2 holds while calls keep arriving', () => {
    const turn: ModelResponse = { toolCalls: ['c1', 'c2', 'c3', 'c4'].map((id) => work(id)) };
    const { activity } = play([spaced(partsOf(turn), 10), { text: 'ok' }], { runner: { concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }) }, bodyMs: 100 });
    expect(activity.filter((a) => a.type === 'started').map((a) => a.at)).to.deep.equal([0, 10, 100, 110]);
  });

  it('takes the whole reply of a provider that answers whole, as before', async () => {
    const result = await lastValueFrom(new AgentRunner({ provider: new ScriptedProvider([{ text: 'hi' }]), tools: new ToolRegistry() }).run$(planner, 'go').pipe(toArray()));
    expect(result.map((e) => e.type)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
  });
});
