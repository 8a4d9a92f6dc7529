// withLanes when calls do not end by themselves, under the AI SDK's own loops: the framework
// aborts (its abortSignal), and a queued call never starts while the running ones are classified
// on activity$; the request's own signal stops its calls and the model reads each stop class in
// the SDK's tool error; an execute's 429 pauses the tool. And what withLanes keeps of a tool:
// its type, needsApproval, a client-side tool, an execute that streams.
import { APICallError } from '@ai-sdk/provider';
import { generateText, stepCountIs, streamText, tool, type ToolSet } from 'ai';
import * as ai7 from 'ai7';
import { toStandardJsonSchema } from '@valibot/to-json-schema';
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import * as v from 'valibot';
import { z } from 'zod';
import { CallStoppedError, ConcurrencyConfig, ConfigError, ToolLanes, type RunnerActivity } from '../../lib/index.js';
import { laneContextOf, withLanes } from '../../lib/providers/aiSdkProvider.js';
import { stopAdvice } from '../../lib/stopClass.js';
import { askedIn, loops, scriptedModel, stepOf, toolResultsIn, turns, untilTurns, type Prompt, type ScriptedReply } from './aiSdkFixture.js';

// The model's first step: three bookings (one lane) and a lookup; then its answer.
function script(prompt: Prompt): ScriptedReply {
  if (stepOf(prompt) > 0) return { text: 'done' };
  const asked = askedIn(prompt);
  return {
    calls: [
      { id: `${asked}-b0`, tool: 'book', input: { seat: '1A' } },
      { id: `${asked}-b1`, tool: 'book', input: { seat: '1B' } },
      { id: `${asked}-b2`, tool: 'book', input: { seat: '1C' } },
      { id: `${asked}-l0`, tool: 'lookup', input: { seat: '1A' } },
    ],
  };
}

// Bodies that run until their call's signal aborts, and say so; `started` counts them by call id.
function stoppableTools(major: 6 | 7, started: string[]) {
  const make = (major === 6 ? tool : ai7.tool) as typeof tool;
  const untilAborted = (toolCallId: string, signal: AbortSignal | undefined): Promise<string> => {
    started.push(toolCallId);
    return new Promise((_, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true }));
  };
  return {
    book: make({ inputSchema: z.object({ seat: z.string() }), execute: async (_input, { toolCallId, abortSignal }) => untilAborted(toolCallId, abortSignal) }),
    lookup: make({ inputSchema: z.object({ seat: z.string() }), execute: async (_input, { toolCallId, abortSignal }) => untilAborted(toolCallId, abortSignal) }),
  };
}

const concurrency = new ConcurrencyConfig({ perTool: { book: 1, lookup: 1 } });
const lanesOptions = { idempotent: { lookup: true } } as const;

// The stop class each call's settled activity carries, by call id.
function classesIn(activity: readonly RunnerActivity[]): Record<string, string | undefined> {
  const classes: Record<string, string | undefined> = {};
  for (const a of activity) if (a.type === 'settled') classes[a.callId] = a.stopClass;
  return classes;
}

describe('withLanes: stopped calls under the AI SDK', function () {
  this.timeout(30_000);

  for (const loop of loops) {
    it(`${loop.title}: when the framework aborts, a queued call never starts and the running ones are classified on activity$`, async () => {
      const toolLanes = new ToolLanes({ concurrency });
      const activity: RunnerActivity[] = [];
      const subscription = toolLanes.activity$.subscribe((a) => activity.push(a));
      const started: string[] = [];
      const controller = new AbortController();
      const ran = loop.run(scriptedModel(loop.major, script), withLanes(stoppableTools(loop.major, started), toolLanes, lanesOptions), 'r', controller.signal);
      await untilTurns(() => started.length === 2, 'a booking and the lookup running');
      controller.abort(new Error('the user pressed stop'));
      const ending = await ran.then(
        () => 'answered',
        () => 'rejected',
      );
      expect(ending, 'how the framework ended the request').to.equal('rejected');
      await untilTurns(() => Object.keys(classesIn(activity)).length === 4, 'every call settled');
      await turns(20);
      subscription.unsubscribe();
      expect(started, 'bodies that started').to.deep.equal(['r-b0', 'r-l0']);
      expect(classesIn(activity)).to.deep.equal({ 'r-b0': 'indeterminate', 'r-b1': 'never_dispatched', 'r-b2': 'never_dispatched', 'r-l0': 'safe_to_call_again' });
    });
  }

  for (const major of [6, 7] as const) {
    it(`ai ${major}: the request's signal stops its calls, and the model reads each stop class in the SDK's tool error`, async () => {
      const toolLanes = new ToolLanes({ concurrency });
      const started: string[] = [];
      const prompts: Prompt[] = [];
      const request = new AbortController();
      const tools = withLanes(stoppableTools(major, started), toolLanes, { ...lanesOptions, signal: request.signal });
      const loop = loops.find((l) => l.major === major && l.title.endsWith('generateText'))!;
      const ran = loop.run(scriptedModel(major, script, prompts), tools, 'r');
      await untilTurns(() => started.length === 2, 'a booking and the lookup running');
      request.abort(new Error('the chat was closed'));
      // The SDK's own loop goes on: its next step sends the model every call's error.
      expect(await ran).to.equal('done');
      const results = toolResultsIn(prompts[1]!);
      const texts = Object.fromEntries(Object.entries(results).map(([id, output]) => [id, `${output.type}: ${String(output.value)}`]));
      expect(Object.keys(texts).sort()).to.deep.equal(['r-b0', 'r-b1', 'r-b2', 'r-l0']);
      expect(texts['r-b0']).to.include(`error-text: `).and.include(stopAdvice('indeterminate'));
      expect(texts['r-b1']).to.include(stopAdvice('never_dispatched')).and.include('never dispatched: the request was cancelled: the chat was closed');
      expect(texts['r-b2']).to.include(stopAdvice('never_dispatched'));
      expect(texts['r-l0']).to.include(stopAdvice('safe_to_call_again'));
      expect(started).to.deep.equal(['r-b0', 'r-l0']);
    });
  }

  it("hands the SDK's step a CallStoppedError with the call's stop class, tool and call id", async () => {
    const toolLanes = new ToolLanes({ concurrency });
    const started: string[] = [];
    const request = new AbortController();
    const tools = withLanes(stoppableTools(6, started), toolLanes, { signal: request.signal });
    const ran = generateText({ model: scriptedModel(6, script), tools, prompt: 'r', stopWhen: stepCountIs(2) });
    await untilTurns(() => started.length === 2, 'a booking and the lookup running');
    request.abort();
    const { steps } = await ran;
    const errors = steps[0]!.content.flatMap((part) => (part.type === 'tool-error' ? [part.error] : []));
    expect(errors.every((error) => error instanceof CallStoppedError)).to.equal(true);
    const told = errors.map((error) => {
      const { stopClass, tool: name, callId } = error as CallStoppedError;
      return { stopClass, tool: name, callId };
    });
    expect(told.sort((a, b) => String(a.callId).localeCompare(String(b.callId)))).to.deep.equal([
      { stopClass: 'indeterminate', tool: 'book', callId: 'r-b0' },
      { stopClass: 'never_dispatched', tool: 'book', callId: 'r-b1' },
      { stopClass: 'never_dispatched', tool: 'book', callId: 'r-b2' },
      { stopClass: 'indeterminate', tool: 'lookup', callId: 'r-l0' },
    ]);
  });

  it("an execute's 429 (the SDK's APICallError with its Retry-After) pauses the tool's lane: its next call starts after the wait", async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perToolRate: { quote: { limit: 100, perSeconds: 1 } } }) });
    const starts: number[] = [];
    const prompts: Prompt[] = [];
    const tools = {
      quote: tool({
        inputSchema: z.object({ n: z.number() }),
        execute: async ({ n }) => {
          starts.push(performance.now());
          if (n === 0) {
            throw new APICallError({ message: 'Too Many Requests', url: 'https://quotes.example/v1', requestBodyValues: {}, statusCode: 429, responseHeaders: { 'retry-after-ms': '400' } });
          }
          return `quote ${n}`;
        },
      }),
    };
    const model = scriptedModel(6, (prompt) => (stepOf(prompt) < 2 ? { calls: [{ id: `q${stepOf(prompt)}`, tool: 'quote', input: { n: stepOf(prompt) } }] } : { text: 'done' }), prompts);
    const { text } = await generateText({ model, tools: withLanes(tools, toolLanes), prompt: 'quote', stopWhen: stepCountIs(3) });
    expect(text).to.equal('done');
    expect(toolResultsIn(prompts[1]!)['q0']).to.deep.include({ type: 'error-text' });
    expect(String(toolResultsIn(prompts[1]!)['q0']!.value)).to.include('Too Many Requests');
    expect(toolResultsIn(prompts[2]!)['q1']).to.deep.equal({ type: 'text', value: 'quote 1' });
    // Read as a 429 with no wait, the next call would start at once.
    expect(starts[1]! - starts[0]!, 'ms from the 429 to the next start').to.be.at.least(380);
  });

  it('keeps needsApproval: the SDK asks for approval and the body does not run', async () => {
    let ran = 0;
    const tools = {
      refund: tool({ inputSchema: z.object({ order: z.string() }), needsApproval: true, execute: async () => ++ran }),
    };
    const wrapped = withLanes(tools, new ToolLanes({ concurrency: {} }));
    expect(wrapped.refund.needsApproval).to.equal(true);
    const model = scriptedModel(6, (prompt) => (stepOf(prompt) === 0 ? { calls: [{ id: 'c1', tool: 'refund', input: { order: 'o-1' } }] } : { text: 'done' }));
    const { content } = await generateText({ model, tools: wrapped, prompt: 'refund o-1', stopWhen: stepCountIs(3) });
    expect(content.map((part) => part.type)).to.deep.equal(['tool-call', 'tool-approval-request']);
    expect(ran).to.equal(0);
  });

  it('passes a tool without execute (run on the client) through as it is, and keeps every other field of a wrapped tool', () => {
    const ask = tool({ description: 'Asks the user', inputSchema: z.object({ question: z.string() }) });
    const search = tool({ description: 'Searches', inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => q, strict: true });
    const wrapped = withLanes({ ask, search }, new ToolLanes({ concurrency: {} }));
    expect(wrapped.ask).to.equal(ask);
    expect(wrapped.search).to.not.equal(search);
    const { execute: _a, ...kept } = wrapped.search;
    const { execute: _b, ...given } = search;
    expect(kept).to.deep.equal(given);
  });

  it("ai 7: keeps a tool caller's own hidden field (experimental_toolCaller): the SDK binds the caller, and the tools it calls run in the lanes", async () => {
    const prompts: Prompt[] = [];
    // The lookup's body: whether it ran inside the lanes (its lane context), by its input.
    const bodies: Array<{ seat: string; inLanes: boolean }> = [];
    const lookup = ai7.tool({
      inputSchema: z.object({ seat: z.string() }),
      execute: async ({ seat }, options) => {
        bodies.push({ seat, inLanes: laneContextOf(options) !== undefined });
        return `seat ${seat} is free`;
      },
    });
    // A local caller (code mode): bound by the SDK to the tools it may call, it calls them itself.
    const codeMode = ai7.experimental_toolCaller(ai7.tool({ inputSchema: z.object({ seats: z.array(z.string()) }), execute: async () => 'the caller was not bound' }), {
      type: 'local',
      bind: (callable) =>
        ai7.tool({
          inputSchema: z.object({ seats: z.array(z.string()) }),
          execute: async ({ seats }: { seats: string[] }, options) =>
            Promise.all(seats.map((seat, i) => callable['lookup']!.execute!({ seat }, { ...options, toolCallId: `${options.toolCallId}-${i}` }))),
        }),
    });
    const tools = withLanes({ lookup, codeMode }, new ToolLanes({ concurrency }));
    const model = scriptedModel(7, (prompt) => (stepOf(prompt) === 0 ? { calls: [{ id: 'c1', tool: 'codeMode', input: { seats: ['1A', '1B'] } }] } : { text: 'done' }), prompts);
    const { text } = await ai7.generateText({ model, tools, prompt: 'r', stopWhen: ai7.isStepCount(3), experimental_toolCallers: { lookup: ['codeMode'] } });
    expect(text).to.equal('done');
    expect(toolResultsIn(prompts[1]!)['c1']).to.deep.equal({ type: 'json', value: ['seat 1A is free', 'seat 1B is free'] });
    expect(bodies).to.deep.equal([
      { seat: '1A', inLanes: true },
      { seat: '1B', inLanes: true },
    ]);
  });

  // The SDK reads a Standard Schema result as valid when it has a `value` field, and valibot's
  // failure result carries `value` beside its `issues`: the SDK (ai 6 and 7, with or without
  // withLanes) hands the execute an input its valibot schema refuses. withLanes does not validate
  // again (the input is the SDK's), so the call enters the lanes: the execute must check its input.
  for (const major of [6, 7] as const) {
    it(`(a known limit) ai ${major}: an input a valibot schema refuses is not refused by the SDK, and runs in the lanes`, async () => {
      const make = (major === 6 ? tool : ai7.tool) as typeof tool;
      const inputs: unknown[] = [];
      const tools = { seat: make({ inputSchema: toStandardJsonSchema(v.object({ row: v.number() })), execute: async (input) => inputs.push(input) }) };
      const model = scriptedModel(major, (prompt) => (stepOf(prompt) === 0 ? { calls: [{ id: 'c1', tool: 'seat', input: { row: 'one' } }] } : { text: 'done' }));
      const loop = loops.find((l) => l.major === major && l.title.endsWith('generateText'))!;
      expect(await loop.run(model, withLanes(tools, new ToolLanes({ concurrency: {} })), 'r')).to.equal('done');
      expect(inputs).to.deep.equal([{ row: 'one' }]);
    });
  }

  it('keeps the ToolSet type: keys, inputs and outputs as the SDK infers them', async () => {
    const tools = { search: tool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => ({ hits: [q] }) }) };
    const wrapped = withLanes(tools, new ToolLanes({ concurrency: {} }), { idempotent: { search: true } });
    const same: typeof tools = wrapped;
    const set: ToolSet = same;
    // @ts-expect-error only the tools' own names are keys of the per-tool options
    expect(() => withLanes(tools, new ToolLanes({ concurrency: {} }), { idempotent: { serch: true } })).to.throw(ConfigError, 'idempotent names serch, which is not one of the tools (search)');
    const output = await wrapped.search.execute!({ q: 'x' }, { toolCallId: 'c1', messages: [] });
    expect(output).to.deep.equal({ hits: ['x'] });
    expect(Object.keys(set)).to.deep.equal(['search']);
  });

  it('hands an execute its lane context through laneContextOf: the idempotency key is the request id and the call id', async () => {
    const keys: Array<string | undefined> = [];
    const tools = { pay: tool({ inputSchema: z.object({}), execute: async (_input, options) => keys.push(laneContextOf(options)?.idempotencyKey) }) };
    const wrapped = withLanes(tools, new ToolLanes({ concurrency: {} }), { requestId: 'chat-7', tenant: 'acme' });
    await wrapped.pay.execute!({}, { toolCallId: 'call_1', messages: [] });
    expect(keys).to.deep.equal(['chat-7:call_1']);
    expect(laneContextOf({ abortSignal: new AbortController().signal })).to.equal(undefined);
  });

  it('keeps a call\'s lane context findable by its signal after the call has settled, and shows no field of its own on the signal', async () => {
    const signals: AbortSignal[] = [];
    const tools = { pay: tool({ inputSchema: z.object({}), execute: async (_input, { abortSignal }) => signals.push(abortSignal!) }) };
    const wrapped = withLanes(tools, new ToolLanes({ concurrency: {} }), { requestId: 'chat-8' });
    await wrapped.pay.execute!({}, { toolCallId: 'call_1', messages: [] });
    await wrapped.pay.execute!({}, { toolCallId: 'call_2', messages: [] });
    // Each call its own signal, each signal its own call's context, as long as the signal is held.
    expect(signals.map((signal) => laneContextOf({ abortSignal: signal })?.idempotencyKey)).to.deep.equal(['chat-8:call_1', 'chat-8:call_2']);
    // Found by a symbol of the lanes that is not enumerable: a copy or a listing of the signal carries nothing of it.
    expect(Object.keys(signals[0]!)).to.deep.equal(Object.keys(new AbortController().signal));
    expect(laneContextOf({ abortSignal: { ...signals[0]! } as AbortSignal })).to.equal(undefined);
  });

  it('streams an async generator execute through the lanes: preliminary results as it yields, its permit held until it ends', async () => {
    let running = 0;
    let most = 0;
    const tools = {
      progress: tool({
        inputSchema: z.object({ n: z.number() }),
        async *execute({ n }) {
          running++;
          most = Math.max(most, running);
          yield { n, step: 'started' };
          await turns(3);
          running--;
          yield { n, step: 'done' };
        },
      }),
    };
    const wrapped = withLanes(tools, new ToolLanes({ concurrency: { perTool: { progress: 1 } } }));
    const model = scriptedModel(6, (prompt) => (stepOf(prompt) === 0 ? { calls: [0, 1].map((n) => ({ id: `p${n}`, tool: 'progress', input: { n } })) } : { text: 'done' }));
    const result = streamText({ model, tools: wrapped, prompt: 'go', stopWhen: stepCountIs(3) });
    const results: Array<{ id: string; preliminary: boolean; output: unknown }> = [];
    for await (const part of result.fullStream) if (part.type === 'tool-result') results.push({ id: part.toolCallId, preliminary: part.preliminary === true, output: part.output });
    expect(most, 'streaming bodies running at once').to.equal(1);
    expect(results.filter((r) => !r.preliminary)).to.deep.equal([
      { id: 'p0', preliminary: false, output: { n: 0, step: 'done' } },
      { id: 'p1', preliminary: false, output: { n: 1, step: 'done' } },
    ]);
    expect(results.filter((r) => r.preliminary).map((r) => r.output)).to.deep.include({ n: 1, step: 'started' });
  });

  it('stops a streaming execute whose output is no longer read (return()): its generator ends, its permit goes back, the next call starts', async () => {
    const toolLanes = new ToolLanes({ concurrency: { perTool: { progress: 1 } } });
    const activity: RunnerActivity[] = [];
    const watching = toolLanes.activity$.subscribe((a) => activity.push(a));
    let yielded = 0;
    let finished = 0;
    let sawAbort = false;
    const tools = {
      progress: tool({
        inputSchema: z.object({}),
        async *execute(_input, { abortSignal }) {
          try {
            // Bounded, so a generator nobody stops still ends.
            while (yielded < 1000) {
              yielded++;
              yield yielded;
              await turns(2);
              if (abortSignal?.aborted === true) sawAbort = true;
            }
          } finally {
            finished++;
          }
        },
      }),
    };
    const wrapped = withLanes(tools, toolLanes);
    const execute = wrapped.progress.execute as unknown as (input: object, options: { toolCallId: string; messages: []; abortSignal: AbortSignal }) => AsyncGenerator<unknown>;
    // The SDK's signal, one for the whole request.
    const sdk = new AbortController();
    const first = execute({}, { toolCallId: 'p0', messages: [], abortSignal: sdk.signal });
    expect((await first.next()).value).to.equal(1);
    // The consumer stops reading, as a for await's break does.
    expect(await first.return(undefined)).to.deep.equal({ value: undefined, done: true });
    await untilTurns(() => finished === 1, "the generator's finally", 100);
    const yieldedThen = yielded;
    await turns(10);
    expect(yielded, 'values made once nobody reads them').to.equal(yieldedThen);
    expect(sawAbort, "the execute's signal aborted").to.equal(true);
    expect(toolLanes.lanes.occupancy(), 'permits held').to.deep.equal([]);
    // The one permit is back: the next call starts.
    const second = execute({}, { toolCallId: 'p1', messages: [], abortSignal: sdk.signal });
    expect((await second.next()).value).to.equal(yielded);
    await second.return(undefined);
    await untilTurns(() => finished === 2, "the second generator's finally", 100);
    await turns(5);
    watching.unsubscribe();
    expect(classesIn(activity)).to.deep.equal({ p0: 'indeterminate', p1: 'indeterminate' });
    expect(getEventListeners(sdk.signal, 'abort'), "listeners left on the SDK's signal").to.have.length(0);
  });

  it("returns a stopped streaming execute's generator at its next value, when it ignores its abort: nothing is read on, its permit goes back", async () => {
    const toolLanes = new ToolLanes({ concurrency: { perTool: { progress: 1 } } });
    const stop = new AbortController();
    let yielded = 0;
    let finished = 0;
    const tools = {
      progress: tool({
        inputSchema: z.object({}),
        // Never looks at its abortSignal; bounded, so it still ends if nobody returns it.
        async *execute() {
          try {
            while (yielded < 1000) {
              yielded++;
              yield yielded;
              await turns(2);
            }
          } finally {
            finished++;
          }
        },
      }),
    };
    const wrapped = withLanes(tools, toolLanes, { signal: stop.signal, idempotent: { progress: true } });
    const execute = wrapped.progress.execute as unknown as (input: object, options: { toolCallId: string; messages: [] }) => AsyncGenerator<unknown>;
    const stream = execute({}, { toolCallId: 'p0', messages: [] });
    expect((await stream.next()).value).to.equal(1);
    stop.abort();
    const error = await (async () => {
      for (;;) if ((await stream.next()).done === true) return undefined;
    })().catch((caught: unknown) => caught);
    expect((error as CallStoppedError).stopClass).to.equal('safe_to_call_again');
    await untilTurns(() => finished === 1, "the generator's finally", 100);
    const yieldedThen = yielded;
    await turns(10);
    expect(yielded, 'values made once the call was stopped').to.equal(yieldedThen);
    expect(toolLanes.lanes.occupancy(), 'permits held').to.deep.equal([]);
  });

  it('refuses an array of tools (the shape the other frameworks\' withLanes take): a ToolSet is keyed by tool name', () => {
    const search = tool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => q });
    // From JavaScript, or through a cast: the type refuses an array.
    expect(() => withLanes([search] as never, new ToolLanes({ concurrency: {} })))
      .to.throw(ConfigError, 'withLanes: tools must be a ToolSet (a record of AI SDK tools keyed by name), got an array')
      .with.property('field', 'tools');
  });

  it('refuses what is not a ToolSet, a ToolLanes or a known option, naming the field', () => {
    const tools = { search: tool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => q }) };
    const toolLanes = new ToolLanes({ concurrency: {} });
    expect(() => withLanes(null as never, toolLanes)).to.throw(ConfigError, 'withLanes: tools must be a ToolSet');
    expect(() => withLanes(tools, {} as never)).to.throw(ConfigError, 'withLanes: toolLanes must be a ToolLanes');
    expect(() => withLanes(tools, toolLanes, { tenat: 'acme' } as never)).to.throw(ConfigError, 'tenat');
    expect(() => withLanes(tools, toolLanes, { idempotent: { search: 'yes' } } as never)).to.throw(ConfigError, 'idempotent.search must be true or false');
    expect(() => withLanes(tools, toolLanes, { cost: { search: -1 } })).to.throw(ConfigError, 'cost.search must be a finite number from 0 up');
    expect(() => withLanes({ search: { execute: 'run' } } as never, toolLanes)).to.throw(ConfigError, "tool search's execute must be a function");
  });
});

describe('docs/frameworks.md on the AI SDK', () => {
  it('shows the model the words each stop class opens with', async () => {
    const { readFile } = await import('node:fs/promises');
    const page = await readFile(new URL('../../docs/frameworks.md', import.meta.url), 'utf8');
    for (const stopClass of ['never_dispatched', 'safe_to_call_again', 'indeterminate'] as const) expect(page).to.include(`| \`${stopClass}\` | ${stopAdvice(stopClass)} |`);
  });
});
