// The AI SDK's language model as aiSdkProvider reads it, for both majors it takes: LanguageModelV3
// (`ai` 6, `@ai-sdk/provider` 3) and LanguageModelV4 (`ai` 7, `@ai-sdk/provider` 4), and the
// mapping of the runner's request and the SDK's whole reply between them. The two versions agree
// on every field read here; a V4 model is described by those fields, so the emitted types name
// only what `@ai-sdk/provider` 3 and 4 both export.
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3FunctionTool,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3ToolCallPart,
  LanguageModelV3ToolResultPart,
} from '@ai-sdk/provider';
import type { FinishReason, ModelRequest, ModelResponse, ResponseInfo, ToolCall, Usage } from '../runner/index.js';

/** The SDK's finish reason, as V3 and V4 send it (V4 adds `interrupted`). */
export interface AiSdkFinishReason {
  readonly unified: string;
  readonly raw?: string | undefined;
}

/** The SDK's token usage, as V3 and V4 send it. */
export interface AiSdkUsage {
  readonly inputTokens: { readonly total?: number | undefined };
  readonly outputTokens: { readonly total?: number | undefined };
}

/** One part of a model's whole reply (`doGenerate`'s content), as far as the runner reads it. */
export type AiSdkContentPart =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'tool-call'; readonly toolCallId: string; readonly toolName: string; readonly input: string; readonly providerExecuted?: boolean | undefined }
  | { readonly type: Exclude<string, 'text' | 'tool-call'> };

/**
 * One part of a model's streamed reply (`doStream`), as far as the runner reads it. The parts
 * the runner does not read (reasoning, files, sources, metadata, approval requests) pass as
 * the last member.
 */
export type AiSdkStreamPart =
  | { readonly type: 'text-delta'; readonly id?: string; readonly delta: string }
  | {
      readonly type: 'tool-input-start';
      readonly id: string;
      readonly toolName: string;
      readonly providerExecuted?: boolean | undefined;
      /** V4: `text` when the deltas are raw text (a custom tool's), not JSON; absent means JSON. */
      readonly inputEncoding?: 'json' | 'text' | undefined;
    }
  | { readonly type: 'tool-input-delta'; readonly id: string; readonly delta: string }
  | { readonly type: 'tool-input-end'; readonly id: string }
  | { readonly type: 'tool-call'; readonly toolCallId: string; readonly toolName: string; readonly input: string; readonly providerExecuted?: boolean | undefined }
  | { readonly type: 'finish'; readonly finishReason: AiSdkFinishReason | string; readonly usage?: AiSdkUsage | undefined }
  | { readonly type: 'error'; readonly error: unknown }
  | { readonly type: 'response-metadata'; readonly id?: string | undefined; readonly modelId?: string | undefined }
  | { readonly type: Exclude<string, 'text-delta' | 'tool-input-start' | 'tool-input-delta' | 'tool-input-end' | 'tool-call' | 'finish' | 'error' | 'response-metadata'> };

/** What a whole reply says of the response it is (`doGenerate`'s `response`). */
export interface AiSdkResponseMetadata {
  readonly id?: string | undefined;
  readonly modelId?: string | undefined;
}

/** The response's id and model as the runner's `response` facts, or undefined when it named neither. */
export function responseInfoOf(metadata: AiSdkResponseMetadata | undefined): ResponseInfo | undefined {
  const id = typeof metadata?.id === 'string' ? metadata.id : undefined;
  const model = typeof metadata?.modelId === 'string' ? metadata.modelId : undefined;
  if (id === undefined && model === undefined) return undefined;
  return { ...(id !== undefined ? { id } : {}), ...(model !== undefined ? { model } : {}) };
}

// The OpenTelemetry GenAI conventions' names (gen_ai.provider.name) for the AI SDK's provider
// packages, by the first segment of a model's `provider` (`openai.chat`, `google.generative-ai`).
const conventionNames: Readonly<Record<string, string>> = {
  openai: 'openai',
  azure: 'azure.ai.openai',
  anthropic: 'anthropic',
  google: 'gcp.gemini',
  'google-vertex': 'gcp.vertex_ai',
  vertex: 'gcp.vertex_ai',
  'amazon-bedrock': 'aws.bedrock',
  bedrock: 'aws.bedrock',
  mistral: 'mistral_ai',
  groq: 'groq',
  deepseek: 'deepseek',
  xai: 'x_ai',
  cohere: 'cohere',
  perplexity: 'perplexity',
};

/**
 * The provider's name for tracing, from an AI SDK model's `provider` (`openai.responses` ->
 * `openai`, `google.generative-ai` -> `gcp.gemini`): the conventions' name where it has one,
 * else the package's own first segment (a custom name, as the conventions allow), else undefined.
 */
export function providerNameOf(provider: unknown): string | undefined {
  if (typeof provider !== 'string' || provider === '') return undefined;
  const head = provider.split('.')[0]!;
  return Object.hasOwn(conventionNames, head) ? conventionNames[head] : head;
}

/** What the adapter sends a model: V3's call options, which a V4 model takes as they are. */
export type AiSdkModelCallOptions = LanguageModelV3CallOptions;

/**
 * A LanguageModelV4 (`ai` 7, `@ai-sdk/provider` 4: `openai('gpt-4.1')` of `@ai-sdk/openai` 4,
 * `MockLanguageModelV4` of `ai/test`), described by what the adapter uses of it. Its methods take
 * V4's call options, which `@ai-sdk/provider` 3 cannot name: they are typed `never` here, so any
 * V4 model fits, and the adapter sends them the options it builds (a V3 prompt is a V4 prompt).
 */
export interface AiSdkLanguageModelV4 {
  readonly specificationVersion: 'v4';
  readonly provider: string;
  readonly modelId: string;
  doGenerate(options: never): PromiseLike<{ readonly content: ReadonlyArray<AiSdkContentPart>; readonly finishReason: AiSdkFinishReason; readonly usage: AiSdkUsage }>;
  doStream(options: never): PromiseLike<{ readonly stream: ReadableStream<AiSdkStreamPart> }>;
}

/** A language model of either major the adapter takes: V3 (`ai` 6) or V4 (`ai` 7). */
export type AiSdkLanguageModel = LanguageModelV3 | AiSdkLanguageModelV4;

/** The one shape the adapter calls, whichever major the model is of. */
export interface AiSdkModel {
  readonly specificationVersion: 'v3' | 'v4';
  readonly provider: string;
  readonly modelId: string;
  doGenerate(options: AiSdkModelCallOptions): PromiseLike<{ readonly content: ReadonlyArray<AiSdkContentPart>; readonly finishReason: AiSdkFinishReason | string; readonly usage?: AiSdkUsage | undefined; readonly response?: AiSdkResponseMetadata | undefined }>;
  doStream(options: AiSdkModelCallOptions): PromiseLike<{ readonly stream: ReadableStream<AiSdkStreamPart> }>;
}

// The SDK's unified finish reasons are the runner's; V4's `interrupted`, and a bare string from a
// model of another version (`unknown` among them), are read as their nearest.
export function finishReasonOf(reason: AiSdkFinishReason | string | undefined): FinishReason | undefined {
  const unified = typeof reason === 'string' ? reason : reason?.unified;
  switch (unified) {
    case undefined:
      return undefined;
    case 'stop':
    case 'length':
    case 'content-filter':
    case 'tool-calls':
    case 'error':
      return unified;
    default:
      return 'other';
  }
}

// The SDK's usage, when the model reported any.
export function usageOf(usage: AiSdkUsage | undefined): Usage | undefined {
  const input = usage?.inputTokens?.total;
  const output = usage?.outputTokens?.total;
  if (input === undefined && output === undefined) return undefined;
  return { inputTokens: input ?? 0, outputTokens: output ?? 0 };
}

// A call's arguments as the SDK's prompt holds them: a value. JSON text is parsed; a call whose
// arguments were not a JSON object was refused before dispatch (its result says so) and is
// shown with an empty input, which every provider's wire accepts.
function inputOf(call: ToolCall): unknown {
  if (typeof call.arguments !== 'string') return call.arguments;
  try {
    const parsed: unknown = JSON.parse(call.arguments);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/**
 * The conversation as the SDK's prompt: the instructions as the system message, then the
 * messages in order; an assistant message's calls as tool-call parts, and the tool messages
 * after it as one tool message of tool-result parts, in call order (each named after the call
 * it answers: the n-th tool message after an assistant message answers its n-th call). V3's
 * prompt is also a V4 prompt.
 */
export function toAiSdkPrompt(request: ModelRequest): LanguageModelV3Prompt {
  const prompt: LanguageModelV3Message[] = [];
  if (request.instructions !== '') prompt.push({ role: 'system', content: request.instructions });
  // The last assistant message's calls, and how many of them have had their tool message.
  let calls: readonly ToolCall[] = [];
  let answered = 0;
  let results: LanguageModelV3ToolResultPart[] | undefined;
  for (const message of request.messages) {
    if (message.role !== 'tool') results = undefined;
    switch (message.role) {
      case 'user':
        prompt.push({ role: 'user', content: [{ type: 'text', text: message.content }] });
        break;
      case 'assistant': {
        calls = message.toolCalls ?? [];
        answered = 0;
        const parts: Array<{ type: 'text'; text: string } | LanguageModelV3ToolCallPart> = [];
        if (message.content !== '') parts.push({ type: 'text', text: message.content });
        for (const call of calls) parts.push({ type: 'tool-call', toolCallId: call.id, toolName: call.name, input: inputOf(call) });
        prompt.push({ role: 'assistant', content: parts });
        break;
      }
      case 'tool': {
        const call = calls[answered++];
        const toolName = call?.id === message.toolCallId ? call.name : (calls.find((c) => c.id === message.toolCallId)?.name ?? '');
        const part: LanguageModelV3ToolResultPart = {
          type: 'tool-result',
          toolCallId: message.toolCallId ?? '',
          toolName,
          // The content is what the runner's own wires send: the result's JSON (a string as
          // itself), or the failure's text; sent as text, every provider passes it on unchanged.
          output: message.isError === true ? { type: 'error-text', value: message.content } : { type: 'text', value: message.content },
        };
        if (results === undefined) {
          results = [part];
          prompt.push({ role: 'tool', content: results });
        } else results.push(part);
        break;
      }
    }
  }
  return prompt;
}

/** The tools as the SDK's function tools: their parameters are the JSON Schema derived from each tool's io-ts codec. */
export function toAiSdkTools(request: ModelRequest): LanguageModelV3FunctionTool[] {
  return request.tools.map((tool) => ({
    type: 'function',
    name: tool.name,
    ...(tool.description !== undefined ? { description: tool.description } : {}),
    inputSchema: tool.parameters as LanguageModelV3FunctionTool['inputSchema'],
  }));
}

/**
 * A whole reply (`doGenerate`'s content) as a ModelResponse: text parts joined, the calls in
 * order with their JSON input as arguments. Calls the provider ran itself (`providerExecuted`),
 * their results, reasoning, files and sources are not the runner's to run, and are left out.
 */
export function fromAiSdkContent(content: ReadonlyArray<AiSdkContentPart>, finishReason?: AiSdkFinishReason | string, usage?: AiSdkUsage, metadata?: AiSdkResponseMetadata): ModelResponse {
  const texts: string[] = [];
  const toolCalls: ToolCall[] = [];
  for (const part of content) {
    if (isText(part)) texts.push(part.text);
    else if (isCall(part) && part.providerExecuted !== true) toolCalls.push({ id: part.toolCallId, name: part.toolName, arguments: part.input });
  }
  const text = texts.join('');
  const counted = usageOf(usage);
  const reason = finishReasonOf(finishReason);
  const response = responseInfoOf(metadata);
  return {
    ...(texts.length > 0 && (text !== '' || toolCalls.length === 0) ? { text } : {}),
    ...(toolCalls.length > 0 ? { toolCalls } : {}),
    ...(counted !== undefined ? { usage: counted } : {}),
    ...(reason !== undefined ? { finishReason: reason } : {}),
    ...(response !== undefined ? { response } : {}),
  };
}

const isText = (part: AiSdkContentPart): part is Extract<AiSdkContentPart, { type: 'text' }> => part.type === 'text';
const isCall = (part: AiSdkContentPart): part is Extract<AiSdkContentPart, { type: 'tool-call' }> => part.type === 'tool-call';
