// The frameworks bench's app, written the plain way in each framework: one user request is one
// run of the framework's own loop, whose scripted model asks in its first turn for `calls` calls of
// one tool (`partner_lookup`, whose body is one request to the simulated partner) and then answers
// in text. The tools are made per request, as a route handler makes them (the tenant is the
// request's). `wrap` is where an app puts its lanes around the tools: the identity for the plain
// app, `withLanes` for the app with lanes; the rest of the app is the same.
import { generateText, jsonSchema, stepCountIs, tool as aiTool, type ToolSet } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { Agent as OpenAIAgent, run as openaiRun, setTracingDisabled, tool as openaiTool, Usage, type Model, type ModelRequest, type ModelResponse } from '@openai/agents';
import { AIMessage } from '@langchain/core/messages';
import { tool as langchainTool, type StructuredToolInterface } from '@langchain/core/tools';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';

export type Framework = 'ai-sdk' | 'openai-agents' | 'langchain';
export const frameworks: readonly Framework[] = ['ai-sdk', 'openai-agents', 'langchain'];

/** The tool's body: one request to the partner for `tenant`, cut off by `signal`. */
export type PartnerBody = (tenant: string, signal: AbortSignal | undefined) => Promise<string>;

/** The tools of each framework as its app hands them over. */
export interface FrameworkTools {
  readonly 'ai-sdk': ToolSet;
  readonly 'openai-agents': ReturnType<typeof openaiTool>[];
  readonly langchain: StructuredToolInterface[];
}

/** Where the app puts lanes around its tools: the tools of one request, of `tenant`. */
export type Wrap<F extends Framework> = (tools: FrameworkTools[F], tenant: string, signal: AbortSignal | undefined) => FrameworkTools[F];

/** One user request: the framework's loop, to its final answer. */
export type AppRequest = (tenant: string, calls: number, signal?: AbortSignal) => Promise<void>;

const TOOL = 'partner_lookup';
const description = 'Looks a query up at the partner';

// ---- The AI SDK (ai 6): generateText with the package's mock model, two steps.

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const answered = { content: [{ type: 'text' as const, text: 'done' }], finishReason: { unified: 'stop' as const, raw: 'stop' }, usage, warnings: [] };

function aiSdkApp(body: PartnerBody, wrap: Wrap<'ai-sdk'>): AppRequest {
  const model = new MockLanguageModelV3({
    doGenerate: async ({ prompt }) => {
      const last = prompt[prompt.length - 1]!;
      if (last.role === 'tool') return answered;
      const first = last.content[0];
      const n = first !== undefined && typeof first === 'object' && 'text' in first ? Number(first.text) : 0;
      const content = Array.from({ length: n }, (_, i) => ({ type: 'tool-call' as const, toolCallId: `call_${i}`, toolName: TOOL, input: `{"q":"${i}"}` }));
      return { content, finishReason: { unified: 'tool-calls' as const, raw: 'tool_calls' }, usage, warnings: [] };
    },
  });
  // The mock keeps every call's options; a bench of thousands of requests needs none of them.
  (model as unknown as { doGenerateCalls: { push(): void } }).doGenerateCalls = { push() {} };
  const schema = jsonSchema<{ q: string }>({ type: 'object', properties: { q: { type: 'string' } }, required: ['q'] });
  return async (tenant, calls, signal) => {
    const tools: ToolSet = { [TOOL]: aiTool({ description, inputSchema: schema, execute: (_input, { abortSignal }) => body(tenant, abortSignal) }) };
    await generateText({ model, tools: wrap(tools, tenant, signal), prompt: String(calls), stopWhen: stepCountIs(2), ...(signal ? { abortSignal: signal } : {}) });
  };
}

// ---- The OpenAI Agents SDK: an Agent with a function tool, run() with a scripted Model.

class ScriptedModel implements Model {
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const { input } = request;
    const last = typeof input === 'string' ? undefined : input[input.length - 1];
    const final = { type: 'message' as const, role: 'assistant' as const, status: 'completed' as const, content: [{ type: 'output_text' as const, text: 'done' }] };
    if (last !== undefined && last.type === 'function_call_result') return { usage: new Usage(), output: [final] };
    const first = typeof input === 'string' ? input : input[0];
    const n = Number(typeof first === 'string' ? first : 'content' in first! && typeof first.content === 'string' ? first.content : 0);
    const output = Array.from({ length: n }, (_, i) => ({ type: 'function_call' as const, callId: `call_${i}`, name: TOOL, arguments: `{"q":"${i}"}`, status: 'completed' as const }));
    return { usage: new Usage(), output: n === 0 ? [final] : output };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('the bench does not stream');
  }
}

function openaiAgentsApp(body: PartnerBody, wrap: Wrap<'openai-agents'>): AppRequest {
  setTracingDisabled(true);
  const model = new ScriptedModel();
  return async (tenant, calls, signal) => {
    const tools = [openaiTool({ name: TOOL, description, parameters: z.object({ q: z.string() }), execute: (_input, _context, details) => body(tenant, details?.signal ?? signal) })];
    const agent = new OpenAIAgent({ name: 'bench', instructions: 'bench', model, tools: wrap(tools, tenant, signal) });
    await openaiRun(agent, String(calls), signal ? { signal } : {});
  };
}

// ---- LangChain: ToolNode given the model's message with `calls` tool calls (its loop's tool step).

function langchainApp(body: PartnerBody, wrap: Wrap<'langchain'>): AppRequest {
  return async (tenant, calls, signal) => {
    const tools: StructuredToolInterface[] = [langchainTool((_input: { q: string }, config) => body(tenant, config?.signal ?? signal), { name: TOOL, description, schema: z.object({ q: z.string() }) })];
    const node = new ToolNode(wrap(tools, tenant, signal));
    const toolCalls = Array.from({ length: calls }, (_, i) => ({ name: TOOL, args: { q: String(i) }, id: `call_${i}`, type: 'tool_call' as const }));
    await node.invoke({ messages: [new AIMessage({ content: '', tool_calls: toolCalls })] }, signal ? { signal } : {});
  };
}

/** Each framework's wrap: the identity for the plain app, its `withLanes` for the app with lanes. */
export interface Wraps {
  readonly 'ai-sdk': Wrap<'ai-sdk'>;
  readonly 'openai-agents': Wrap<'openai-agents'>;
  readonly langchain: Wrap<'langchain'>;
}

/** The plain apps' wraps: no lanes. */
export const plain: Wraps = { 'ai-sdk': (tools) => tools, 'openai-agents': (tools) => tools, langchain: (tools) => tools };

/** The app of `framework`, its tools wrapped as `wraps` says. */
export function appOf(framework: Framework, body: PartnerBody, wraps: Wraps): AppRequest {
  switch (framework) {
    case 'ai-sdk':
      return aiSdkApp(body, wraps['ai-sdk']);
    case 'openai-agents':
      return openaiAgentsApp(body, wraps['openai-agents']);
    default:
      return langchainApp(body, wraps.langchain);
  }
}
