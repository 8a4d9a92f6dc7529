// A run through aiSdkProvider, with each major's mock model, encoded by toUIMessageStream and
// read by that major's own readUIMessageStream (`ai` 6 and `ai` 7): the message a useChat front
// end of either major renders has the model's text as it streamed, then the tool parts in call
// order with their outputs, then the answer.
import { expect } from 'chai';
import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import * as t from 'io-ts';
import { readUIMessageStream as readV6 } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { readUIMessageStream as readV7 } from 'ai7';
import { MockLanguageModelV4 } from 'ai7/test';
import type { Observable } from 'rxjs';
import { Agent, AgentRunner, ToolRegistry } from '../../lib/index.js';
import { toUIMessageStream, type UIMessageChunk } from '../../lib/streaming.js';
import { aiSdkProvider, type AiSdkLanguageModel } from '../../lib/providers/aiSdkProvider.js';

/** The chunks as the ReadableStream the SDK's reader takes. */
const readable = (chunks$: Observable<UIMessageChunk>): ReadableStream<UIMessageChunk> =>
  new ReadableStream<UIMessageChunk>({
    start(controller) {
      chunks$.subscribe({ next: (chunk) => controller.enqueue(chunk), error: (error: unknown) => controller.error(error), complete: () => controller.close() });
    },
  });

const fromArray = (parts: readonly LanguageModelV3StreamPart[]): ReadableStream<LanguageModelV3StreamPart> =>
  new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(part);
      controller.close();
    },
  });

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const finish = (unified: 'stop' | 'tool-calls'): LanguageModelV3StreamPart => ({ type: 'finish', finishReason: { unified, raw: unified }, usage });

/** The first turn: text in two pieces, then three calls whose input streams; the second: the answer. */
function turns(): Array<{ stream: ReadableStream<LanguageModelV3StreamPart> }> {
  const calls = ['Lisbon', 'Atlantis', 'Porto'].flatMap((city, i): LanguageModelV3StreamPart[] => [
    { type: 'tool-input-start', id: `c${i + 1}`, toolName: 'lookup' },
    { type: 'tool-input-delta', id: `c${i + 1}`, delta: '{"city":' },
    { type: 'tool-input-delta', id: `c${i + 1}`, delta: `"${city}"}` },
    { type: 'tool-input-end', id: `c${i + 1}` },
    { type: 'tool-call', toolCallId: `c${i + 1}`, toolName: 'lookup', input: JSON.stringify({ city }) },
  ]);
  return [
    { stream: fromArray([{ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'Checking ' }, { type: 'text-delta', id: 't', delta: 'all three.' }, { type: 'text-end', id: 't' }, ...calls, finish('tool-calls')]) },
    { stream: fromArray([{ type: 'text-delta', id: 't', delta: 'Lisbon or Porto.' }, finish('stop')]) },
  ];
}

type Reader = (options: { stream: ReadableStream<UIMessageChunk> }) => AsyncIterable<{ role: string; parts: ReadonlyArray<Record<string, unknown>> }>;

const majors: ReadonlyArray<readonly [string, () => AiSdkLanguageModel, Reader]> = [
  ['ai 6', () => new MockLanguageModelV3({ doStream: turns() as never }), readV6 as unknown as Reader],
  ['ai 7', () => new MockLanguageModelV4({ doStream: turns() as never }), readV7 as unknown as Reader],
];

for (const [title, model, read] of majors) {
  it(`a run through aiSdkProvider reads as the message useChat renders, by ${title}'s own readUIMessageStream`, async () => {
    const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ city: t.string }) }, async ({ city }) => {
      if (city === 'Atlantis') throw new Error('no partner covers Atlantis');
      return { city, from: 80 + city.length * 7 };
    });
    const runner = new AgentRunner({ provider: aiSdkProvider(model()), tools });
    const chunks$ = toUIMessageStream(runner.run$(new Agent({ name: 'planner', instructions: '', model: 'mock' }), 'Lisbon, Atlantis or Porto?'), { activity: runner.activity$ });
    let message: { role: string; parts: ReadonlyArray<Record<string, unknown>> } | undefined;
    for await (const snapshot of read({ stream: readable(chunks$) })) message = snapshot;
    expect(message?.role).to.equal('assistant');
    const lines = message!.parts.map((p) =>
      p['type'] === 'text' ? `text ${String(p['text'])}` : 'toolCallId' in p ? `${String(p['type'])} ${String(p['toolCallId'])} ${String(p['state'])} ${JSON.stringify(p['input'])} ${JSON.stringify(p['output'] ?? p['errorText'])}` : String(p['type']),
    );
    expect(lines).to.deep.equal([
      'step-start',
      'text Checking all three.',
      'tool-lookup c1 output-available {"city":"Lisbon"} {"city":"Lisbon","from":122}',
      'tool-lookup c2 output-error {"city":"Atlantis"} "Error: no partner covers Atlantis"',
      'tool-lookup c3 output-available {"city":"Porto"} {"city":"Porto","from":115}',
      'step-start',
      'text Lisbon or Porto.',
    ]);
  });
}
