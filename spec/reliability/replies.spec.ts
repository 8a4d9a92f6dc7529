// A provider's reply in another shape than the contract (another wire's keys, nothing said, not
// an object) fails the run with a ProviderError saying what came and what was expected, as a
// whole reply and as a streamed turn's part. docs/reliability.md lists the same cases.
import { expect } from 'chai';
import { Observable, of } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type ModelProvider, type ModelResponse, type ModelStreamPart, type RunResult } from '../../lib/index.js';

const agent = new Agent({ name: 'a', instructions: '', model: 'm' });

async function runWith(provider: ModelProvider, tools = new ToolRegistry()): Promise<RunResult> {
  return new AgentRunner({ provider, tools }).run(agent, 'go');
}

// A provider that answers `reply` whole, as a Promise or as an Observable's one value.
const whole = {
  promise: (reply: unknown): ModelProvider => ({ respond: async () => reply as ModelResponse }),
  observable: (reply: unknown): ModelProvider => ({ respond: () => of(reply as ModelResponse) }),
};

describe('a reply in another shape than the contract', () => {
  const cases: ReadonlyArray<{ readonly title: string; readonly reply: unknown; readonly says: string }> = [
    { title: '{ content } (another wire\'s text)', reply: { content: 'hi' }, says: 'response.content: not a key of a reply (expected text, toolCalls, usage, finishReason or response), got {"content":"hi"}' },
    { title: '{ tool_calls } beside a text', reply: { text: 'hi', tool_calls: [{ id: 'c1' }] }, says: 'response.tool_calls: not a key of a reply (expected text, toolCalls, usage, finishReason or response)' },
    { title: '{ choices } (a whole chat completion)', reply: { choices: [{ message: { content: 'hi' } }] }, says: 'response.choices: not a key of a reply' },
    { title: 'null', reply: null, says: 'response: expected an object with text, toolCalls, usage, finishReason or response, got null' },
    { title: 'a string', reply: 'hi', says: 'response: expected an object with text, toolCalls, usage, finishReason or response, got "hi"' },
    { title: '{} (nothing said)', reply: {}, says: 'response: expected text or toolCalls (or a finishReason saying why there are neither), got {}' },
    { title: 'usage alone', reply: { usage: { inputTokens: 5, outputTokens: 0 } }, says: 'response: expected text or toolCalls' },
  ];
  for (const [how, provider] of Object.entries(whole)) {
    for (const c of cases) {
      it(`fails the run on ${c.title} given as a ${how}, naming what came and what was expected`, async () => {
        const result = await runWith(provider(c.reply));
        expect(result.status).to.equal('failed');
        expect(result.output).to.equal(undefined);
        expect(result.error!.name).to.equal('ProviderError');
        expect(result.error!.message).to.contain('model provider failed on turn 1: the reply does not decode: ');
        expect(result.error!.message).to.contain(c.says);
        expect(result.events.at(-1)!.type).to.equal('RUN_FAILED');
      });
    }
  }

  it('fails on a later turn after the calls of an earlier one ran, keeping their results in the events', async () => {
    const tools = new ToolRegistry().register({ name: 'search' }, () => 'hits');
    const result = await runWith(new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'search', arguments: '{}' }] }, { content: 'done' } as unknown as ModelResponse]), tools);
    expect(result.status).to.equal('failed');
    expect(result.error!.message).to.match(/^model provider failed on turn 2: the reply does not decode: response\.content: not a key of a reply/);
    expect(result.events.find((e) => e.type === 'TOOL_RESULT')).to.deep.include({ callId: 'c1', result: 'hits' });
  });

  const answers: ReadonlyArray<{ readonly title: string; readonly reply: ModelResponse; readonly output: string }> = [
    { title: 'an empty text', reply: { text: '' }, output: '' },
    { title: 'a finish reason saying why there is no text', reply: { finishReason: 'content-filter' }, output: '' },
  ];
  for (const c of answers) {
    it(`completes on ${c.title}`, async () => {
      const result = await runWith(whole.promise(c.reply));
      expect(result.status).to.equal('completed');
      expect(result.output).to.equal(c.output);
    });
  }
});

describe('a streamed part in another shape than the contract', () => {
  const stream = (...parts: unknown[]): ModelProvider => ({ respond: () => of(...(parts as ModelStreamPart[])) });
  const cases: ReadonlyArray<{ readonly title: string; readonly parts: readonly unknown[]; readonly says: string }> = [
    { title: 'a text delta under another name (textDelta)', parts: [{ type: 'text-delta', textDelta: 'hi' }], says: 'stream part 1 (text-delta).textDelta: not a key of a text-delta part (expected type, delta), got {"type":"text-delta","textDelta":"hi"}' },
    { title: 'a text delta with an extra key', parts: [{ type: 'text-delta', delta: 'a' }, { type: 'text-delta', delta: 'b', id: 't1' }], says: 'stream part 2 (text-delta).id: not a key of a text-delta part (expected type, delta)' },
    { title: 'a call in another library\'s shape (toolCallId, toolName, input)', parts: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'search', input: '{}' }], says: 'stream part 1 (tool-call).toolCallId: not a key of a tool-call part (expected type, id, name, arguments)' },
    { title: 'usage under another name (promptTokens)', parts: [{ type: 'text-delta', delta: 'a' }, { type: 'usage', promptTokens: 1, completionTokens: 2 }], says: 'stream part 2 (usage).promptTokens: not a key of a usage part (expected type, inputTokens, outputTokens)' },
    { title: 'a finish part with a reason under another name', parts: [{ type: 'text-delta', delta: 'a' }, { type: 'finish', reason: 'stop' }], says: 'stream part 2 (finish).reason: not a key of a finish part (expected type, finishReason)' },
    { title: 'an unknown type', parts: [{ type: 'reasoning', text: 'hmm' }], says: 'stream part 1: unknown type "reasoning"; expected text-delta, tool-call, usage, finish or response' },
  ];
  for (const c of cases) {
    it(`fails the run on ${c.title}, naming the part, what came and what was expected`, async () => {
      const result = await runWith(stream(...c.parts));
      expect(result.status).to.equal('failed');
      expect(result.error!.name).to.equal('ProviderError');
      expect(result.error!.message).to.contain(`model provider failed on turn 1: the reply does not decode: ${c.says}`);
    });
  }

  it('stops reading the stream at the part that does not decode', async () => {
    let unsubscribed = false;
    let afterBad = 0;
    const provider: ModelProvider = {
      respond: () =>
        new Observable<ModelStreamPart>((subscriber) => {
          subscriber.next({ type: 'text-delta', delta: 'a' });
          subscriber.next({ type: 'text-delta', delta: 'b', extra: true } as unknown as ModelStreamPart);
          if (!subscriber.closed) afterBad++;
          return () => {
            unsubscribed = true;
          };
        }),
    };
    const result = await runWith(provider);
    expect(result.status).to.equal('failed');
    expect(afterBad).to.equal(0);
    expect(unsubscribed).to.equal(true);
  });

  it('completes a streamed turn of well-formed parts, its calls run', async () => {
    const tools = new ToolRegistry().register({ name: 'search' }, () => 'hits');
    let turn = 0;
    const provider: ModelProvider = {
      respond: () =>
        ++turn === 1
          ? of<ModelStreamPart[]>({ type: 'tool-call', id: 'c1', name: 'search', arguments: '{}' }, { type: 'usage', inputTokens: 1, outputTokens: 2 }, { type: 'finish', finishReason: 'tool-calls' })
          : of<ModelStreamPart[]>({ type: 'text-delta', delta: 'do' }, { type: 'text-delta', delta: 'ne' }, { type: 'finish', finishReason: 'stop' }),
    };
    const result = await runWith(provider, tools);
    expect(result.status).to.equal('completed');
    expect(result.output).to.equal('done');
  });
});
