// What the AI SDK wrapper's specs share: a scripted model of either major (ai 6's
// LanguageModelV3, ai 7's LanguageModelV4) that asks for a turn's tool calls and then answers in
// text, the four ways an app drives the SDK's loop (generateText and streamText, of ai 6 and ai
// 7, and ai 7's ToolLoopAgent), and a tally the tool bodies keep of themselves.
import type { LanguageModelV3CallOptions, LanguageModelV3Content, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { generateText, stepCountIs, streamText, type ToolSet } from 'ai';
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test';
import * as ai7 from 'ai7';
import { MockLanguageModelV4 } from 'ai7/test';

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** One tool call the model asks for. */
export interface ScriptedCall {
  readonly id: string;
  readonly tool: string;
  readonly input: unknown;
}

/** What the model says on a step: tool calls, or its final text. */
export type ScriptedReply = { readonly calls: readonly ScriptedCall[] } | { readonly text: string };

/** What the model is asked on a step: the prompt as the SDK sent it. */
export type Prompt = LanguageModelV3CallOptions['prompt'];

/** The user's text of a prompt: what the request asked. */
export function askedIn(prompt: Prompt): string {
  for (const message of prompt) {
    if (message.role !== 'user') continue;
    for (const part of message.content) if (part.type === 'text') return part.text;
  }
  return '';
}

/** How many steps the prompt has had (its assistant messages): 0 on the first. */
export function stepOf(prompt: Prompt): number {
  return prompt.filter((message) => message.role === 'assistant').length;
}

/** The tool results the prompt hands the model, by call id: the text or JSON the SDK sent for each. */
export function toolResultsIn(prompt: Prompt): Record<string, { readonly type: string; readonly value: unknown }> {
  const results: Record<string, { type: string; value: unknown }> = {};
  for (const message of prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) if (part.type === 'tool-result') results[part.toolCallId] = part.output as { type: string; value: unknown };
  }
  return results;
}

function contentOf(reply: ScriptedReply): LanguageModelV3Content[] {
  if ('text' in reply) return [{ type: 'text', text: reply.text }];
  return reply.calls.map((call) => ({ type: 'tool-call', toolCallId: call.id, toolName: call.tool, input: JSON.stringify(call.input) }));
}

function partsOf(reply: ScriptedReply): LanguageModelV3StreamPart[] {
  const finish = { unified: 'text' in reply ? 'stop' : 'tool-calls', raw: undefined } as const;
  const body: LanguageModelV3StreamPart[] =
    'text' in reply
      ? [{ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: reply.text }, { type: 'text-end', id: 't' }]
      : reply.calls.map((call) => ({ type: 'tool-call', toolCallId: call.id, toolName: call.tool, input: JSON.stringify(call.input) }));
  return [{ type: 'stream-start', warnings: [] }, ...body, { type: 'finish', finishReason: finish, usage }];
}

/** A model of `major` answering each step with `script(prompt)`; `prompts` records what it was sent. */
export function scriptedModel(major: 6, script: (prompt: Prompt) => ScriptedReply, prompts?: Prompt[]): MockLanguageModelV3;
export function scriptedModel(major: 6 | 7, script: (prompt: Prompt) => ScriptedReply, prompts?: Prompt[]): MockLanguageModelV3 | MockLanguageModelV4;
export function scriptedModel(major: 6 | 7, script: (prompt: Prompt) => ScriptedReply, prompts: Prompt[] = []): MockLanguageModelV3 | MockLanguageModelV4 {
  const doGenerate = async (options: LanguageModelV3CallOptions) => {
    prompts.push(options.prompt);
    const reply = script(options.prompt);
    return { content: contentOf(reply), finishReason: { unified: 'text' in reply ? 'stop' : 'tool-calls', raw: undefined } as const, usage, warnings: [] };
  };
  const doStream = async (options: LanguageModelV3CallOptions) => {
    prompts.push(options.prompt);
    return { stream: convertArrayToReadableStream(partsOf(script(options.prompt))) };
  };
  if (major === 6) return new MockLanguageModelV3({ doGenerate, doStream });
  // The V4 model takes the same content and parts for everything this script says.
  return new MockLanguageModelV4({ doGenerate: doGenerate as never, doStream: doStream as never });
}

/** One of the ways an app drives the SDK's loop: the request's prompt, its tools, its abort signal; resolves with the final text. */
export interface Loop {
  readonly title: string;
  readonly major: 6 | 7;
  run(model: MockLanguageModelV3 | MockLanguageModelV4, tools: Record<string, unknown>, prompt: string, abortSignal?: AbortSignal): Promise<string>;
}

export const loops: readonly Loop[] = [
  {
    title: 'ai 6 generateText',
    major: 6,
    run: async (model, tools, prompt, abortSignal) =>
      (await generateText({ model: model as MockLanguageModelV3, tools: tools as ToolSet, prompt, stopWhen: stepCountIs(5), ...(abortSignal === undefined ? {} : { abortSignal }) })).text,
  },
  {
    title: 'ai 6 streamText',
    major: 6,
    run: async (model, tools, prompt, abortSignal) => {
      const result = streamText({ model: model as MockLanguageModelV3, tools: tools as ToolSet, prompt, stopWhen: stepCountIs(5), ...(abortSignal === undefined ? {} : { abortSignal }), onError: () => undefined });
      // Read to its end, as a route handler's response would be.
      for await (const part of result.fullStream) if (part.type === 'abort') throw new DOMException('the stream was aborted', 'AbortError');
      return await result.text;
    },
  },
  {
    title: 'ai 7 generateText',
    major: 7,
    run: async (model, tools, prompt, abortSignal) =>
      (await ai7.generateText({ model: model as MockLanguageModelV4, tools: tools as ai7.ToolSet, prompt, stopWhen: ai7.isStepCount(5), ...(abortSignal === undefined ? {} : { abortSignal }) })).text,
  },
  {
    title: 'ai 7 streamText',
    major: 7,
    run: async (model, tools, prompt, abortSignal) => {
      const result = ai7.streamText({ model: model as MockLanguageModelV4, tools: tools as ai7.ToolSet, prompt, stopWhen: ai7.isStepCount(5), ...(abortSignal === undefined ? {} : { abortSignal }), onError: () => undefined });
      for await (const part of result.fullStream) if (part.type === 'abort') throw new DOMException('the stream was aborted', 'AbortError');
      return await result.text;
    },
  },
  {
    title: "ai 7's ToolLoopAgent",
    major: 7,
    run: async (model, tools, prompt, abortSignal) => {
      // An agent per request, made with that request's wrapped tools.
      const agent = new ai7.ToolLoopAgent({ model: model as MockLanguageModelV4, tools: tools as ai7.ToolSet, stopWhen: ai7.isStepCount(5) });
      return (await agent.generate({ prompt, ...(abortSignal === undefined ? {} : { abortSignal }) })).text;
    },
  },
];

/** The tool bodies' own count of themselves: how many run now, and the most that ever ran at once, by a key. */
export class BodyTally {
  /** Every body that started, in order: `<key>`. */
  readonly started: string[] = [];
  private readonly now = new Map<string, number>();
  private readonly most = new Map<string, number>();

  /** A body started under each of `keys`. */
  enter(...keys: string[]): void {
    this.started.push(keys[0]!);
    for (const key of keys) {
      const running = (this.now.get(key) ?? 0) + 1;
      this.now.set(key, running);
      if (running > (this.most.get(key) ?? 0)) this.most.set(key, running);
    }
  }

  /** A body under each of `keys` ended. */
  leave(...keys: string[]): void {
    for (const key of keys) this.now.set(key, this.now.get(key)! - 1);
  }

  /** The most that ever ran at once under `key`. */
  mostAt(key: string): number {
    return this.most.get(key) ?? 0;
  }

  /** How many run now under `key`. */
  running(key: string): number {
    return this.now.get(key) ?? 0;
  }
}

/** Lets `n` turns of the event loop go by (a body's work, of a length set by the spec, with no clock). */
export async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Waits, turn by turn, until `check` holds; fails after `most` turns. */
export async function untilTurns(check: () => boolean, what: string, most = 10_000): Promise<void> {
  for (let i = 0; i < most; i++) {
    if (check()) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  throw new Error(`never came: ${what}`);
}
