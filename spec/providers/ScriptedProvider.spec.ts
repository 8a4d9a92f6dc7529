// ScriptedProvider, and the runner's side of talking to any provider, driven through
// AgentRunner: the script plays in order and every request is recorded; steps may be
// functions of the request; a script runs out, or is keyed by agent, clearly; a provider
// that fails or answers nonsense ends the run; and what a provider is shown of a tool.
import { expect } from 'chai';
import * as t from 'io-ts';
import { of, throwError, timer, map, type Observable } from 'rxjs';
import {
  Agent,
  AgentRunner,
  ScriptedProvider,
  ToolRegistry,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type RunResult,
  type ScriptStep,
} from '../../lib/index.js';

const agent = (name = 'planner'): Agent => new Agent({ name, instructions: `you are ${name}`, model: 'test-model' });

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A registry with `ping`, answering `pong`. */
const pingTools = (): ToolRegistry => new ToolRegistry().register({ name: 'ping' }, () => 'pong');
const ping = { toolCalls: [{ id: 'p1', name: 'ping', arguments: '{}' }] };

const run = (provider: ModelProvider, tools = pingTools(), who = agent()): Promise<RunResult> => new AgentRunner({ provider, tools }).run(who, 'hello');

/** The error the run failed with (fails the test for any other ending). */
function failure(result: RunResult): { name: string; message: string } {
  const last = result.events[result.events.length - 1];
  expect(last?.type, `expected RUN_FAILED, got ${JSON.stringify(last)}`).to.equal('RUN_FAILED');
  return last?.type === 'RUN_FAILED' ? last.error : { name: '', message: '' };
}

describe('ScriptedProvider', () => {
  it('plays its responses in order and records every request, the second carrying the tool messages in call order', async () => {
    // `a` finishes last and `b` fails: the messages still follow call order.
    const tools = new ToolRegistry().register({ name: 'quote', args: t.type({ hotel: t.string }) }, async ({ hotel }) => {
      if (hotel === 'b') throw new Error('sold out');
      await sleep(hotel === 'a' ? 15 : 1);
      return { hotel, price: hotel === 'a' ? 120 : 95 };
    });
    const toolCalls = ['a', 'b', 'c'].map((hotel) => ({ id: `call-${hotel}`, name: 'quote', arguments: JSON.stringify({ hotel }) }));
    const provider = new ScriptedProvider([{ text: 'let me look', toolCalls }, { text: 'c is cheapest' }]);
    const result = await run(provider, tools);
    expect(result.status).to.equal('completed');
    expect(result.output).to.equal('c is cheapest');
    expect(provider.requests).to.have.length(2);
    expect(provider.requests[0]).to.deep.include({ agent: 'planner', model: 'test-model', instructions: 'you are planner', messages: [{ role: 'user', content: 'hello' }] });
    expect(provider.requests[1]!.messages).to.deep.equal([
      { role: 'user', content: 'hello' },
      { role: 'assistant', content: 'let me look', toolCalls },
      { role: 'tool', toolCallId: 'call-a', content: '{"hotel":"a","price":120}' },
      { role: 'tool', toolCallId: 'call-b', content: 'Error: sold out', isError: true },
      { role: 'tool', toolCallId: 'call-c', content: '{"hotel":"c","price":95}' },
    ]);
  });

  // What a function step may give back: a response, a Promise of one, or an Observable of one.
  type Reply = ReturnType<Extract<ScriptStep, (...args: never[]) => unknown>>;
  const functionSteps: ReadonlyArray<{ title: string; reply: (answer: ModelResponse) => Reply }> = [
    { title: 'a response', reply: (answer) => answer },
    { title: 'a Promise', reply: (answer) => sleep(1).then(() => answer) },
    { title: 'an Observable', reply: (answer) => timer(1).pipe(map(() => answer)) },
  ];
  for (const { title, reply } of functionSteps) {
    it(`plays a step that is a function of the request returning ${title}`, async () => {
      const received: Array<{ request: ModelRequest; signal: AbortSignal }> = [];
      const provider = new ScriptedProvider([
        ping,
        (request, signal) => {
          received.push({ request, signal });
          const last = request.messages[request.messages.length - 1]!;
          return reply({ text: `the tool said ${last.content}` });
        },
      ]);
      const result = await run(provider);
      expect(result.output).to.equal('the tool said pong');
      expect(received).to.have.length(1);
      expect(received[0]!.request).to.equal(provider.requests[1]);
      expect(received[0]!.signal).to.be.instanceOf(AbortSignal);
    });
  }

  it('ends the run with RUN_FAILED, a ProviderError naming the turn, when the script runs out', async () => {
    const provider = new ScriptedProvider([ping]);
    const error = failure(await run(provider));
    expect(error.name).to.equal('ProviderError');
    expect(error.message).to.match(/^model provider failed on turn 2: ScriptedProvider ran out of script/);
    expect(provider.requests).to.have.length(2);
  });

  it('serves each agent its own steps from a script keyed by agent name', async () => {
    const researcher = agent('researcher');
    const tools = new ToolRegistry().register({ name: 'delegate' }, async (_args, ctx) => (await ctx.runAgent(researcher, 'dig')).output);
    const provider = new ScriptedProvider({
      planner: [
        { toolCalls: [{ id: 'd1', name: 'delegate', arguments: '{}' }] },
        (request) => ({ text: `planner heard: ${request.messages[request.messages.length - 1]!.content}` }),
      ],
      researcher: [{ text: 'the researcher found it' }],
    });
    const result = await run(provider, tools);
    expect(result.output).to.equal('planner heard: the researcher found it');
    expect(provider.requests.map((request) => request.agent)).to.deep.equal(['planner', 'researcher', 'planner']);
  });

  it('ends the run with RUN_FAILED when the script has no steps for the agent', async () => {
    const error = failure(await run(new ScriptedProvider({ someoneElse: [{ text: 'hi' }] })));
    expect(error).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 1: ScriptedProvider has no script for agent planner' });
  });
});

describe('AgentRunner with a failing provider', () => {
  /** A provider that asks for `ping` on turn 1 and fails as `fail` says on turn 2. */
  const failingOnTurn2 = (fail: () => Promise<ModelResponse> | Observable<ModelResponse>): ModelProvider => {
    let turn = 0;
    return { respond: () => (++turn === 1 ? of(ping) : fail()) };
  };
  const failures: ReadonlyArray<{ title: string; provider: () => ModelProvider }> = [
    {
      title: 'throws',
      provider: () =>
        failingOnTurn2(() => {
          throw new Error('connection reset');
        }),
    },
    { title: 'rejects', provider: () => failingOnTurn2(() => Promise.reject(new Error('connection reset'))) },
    { title: 'errors (Observable)', provider: () => failingOnTurn2(() => throwError(() => new Error('connection reset'))) },
    {
      title: 'is a scripted step that throws',
      provider: () =>
        new ScriptedProvider([
          ping,
          () => {
            throw new Error('connection reset');
          },
        ]),
    },
  ];
  for (const { title, provider } of failures) {
    it(`ends the run with RUN_FAILED, a ProviderError naming the turn, when the provider ${title}`, async () => {
      const result = await run(provider());
      expect(result.status).to.equal('failed');
      expect(failure(result)).to.deep.equal({ name: 'ProviderError', message: 'model provider failed on turn 2: connection reset' });
    });
  }

  it('ends the run with RUN_FAILED saying what respond must return when it returns a bare reply', async () => {
    const provider = { respond: () => ({ text: 'not wrapped' }) } as unknown as ModelProvider;
    expect(failure(await run(provider))).to.deep.equal({
      name: 'ProviderError',
      message: 'model provider failed on turn 1: respond must return a Promise or an Observable of the reply (wrap a ready one in Promise.resolve or of), got {"text":"not wrapped"}',
    });
  });

  it('takes the first reply of a respond that returns an async iterable, as RxJS reads one', async () => {
    const provider = {
      async *respond() {
        yield { text: 'streamed' };
      },
    } as unknown as ModelProvider;
    const result = await run(provider);
    expect(result.status).to.equal('completed');
    expect(result.output).to.equal('streamed');
  });

  it('ends the run with RUN_FAILED naming the path and what was expected when the reply does not decode', async () => {
    const provider: ModelProvider = {
      respond: async () => ({ text: 42, toolCalls: 'none' }) as unknown as ModelResponse,
    };
    const error = failure(await run(provider));
    expect(error.name).to.equal('ProviderError');
    expect(error.message).to.match(/^model provider failed on turn 1: the reply does not decode: /);
    expect(error.message).to.include('response.text: expected string or null or undefined, got 42');
  });

  it('fails a malformed call alone, naming the path, while its siblings run', async () => {
    let turns = 0;
    const provider: ModelProvider = {
      respond: async () =>
        (++turns === 1
          ? { toolCalls: [{ id: 5, name: 'x', arguments: '{}' }, { id: 'ok', name: 'x', arguments: '{}' }] }
          : { text: 'done' }) as unknown as ModelResponse,
    };
    const tools = new ToolRegistry().register({ name: 'x' }, () => 'fine');
    const result = await new AgentRunner({ provider, tools }).run(new Agent({ name: 'a', instructions: '', model: 'm' }), 'go');
    expect(result.status).to.equal('completed');
    const [malformed, sibling] = result.events.filter((e) => e.type === 'TOOL_ERROR' || e.type === 'TOOL_RESULT');
    expect(malformed).to.deep.include({ type: 'TOOL_ERROR', callId: 'malformed-1', tool: 'x' });
    expect(malformed!.type === 'TOOL_ERROR' && malformed!.error).to.deep.equal({
      name: 'MalformedToolCallError',
      message: "the model's call #1 is malformed and was not dispatched: toolCalls.0.id: expected string, got 5",
    });
    expect(sibling).to.deep.include({ type: 'TOOL_RESULT', callId: 'ok', result: 'fine' });
  });
});

describe('what a provider sees of a tool', () => {
  it('shows exactly name, description and the JSON Schema of its arguments, never parallelSafe, idempotent or needsApproval', async () => {
    const tools = new ToolRegistry().register(
      { name: 'search', description: 'Search the web', args: t.type({ q: t.string }), parallelSafe: false, idempotent: true, needsApproval: true },
      ({ q }) => q,
    );
    const provider = new ScriptedProvider([{ text: 'nothing to search' }]);
    await run(provider, tools);
    const [spec] = provider.requests[0]!.tools;
    expect(provider.requests[0]!.tools).to.have.length(1);
    expect(spec).to.have.all.keys('name', 'description', 'parameters');
    expect(spec).to.deep.equal({
      name: 'search',
      description: 'Search the web',
      parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'], additionalProperties: true },
    });
  });
});
