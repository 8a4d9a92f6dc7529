export { ScriptedProvider, type Script, type ScriptStep } from './ScriptedProvider.js';
export { OpenAIChatProvider, toChatCompletionRequest, fromChatCompletion, type ChatMessage, type OpenAIChatOptions } from './OpenAIChatProvider.js';
export {
  AnthropicMessagesProvider,
  toMessagesRequest,
  fromMessagesReply,
  type AnthropicBlock,
  type AnthropicMessage,
  type AnthropicMessagesOptions,
} from './AnthropicMessagesProvider.js';
export { ProviderHttpError, ProviderReplyError, ProviderStreamError, ProviderTimeoutError } from './errors.js';
export { postJson, postForStream, retryAfterMs, retryDelay, retryPolicy, retryableFlag, abortableSleep, type JsonPost, type RetryOptions, type RetryPolicy } from './http.js';
export { streamedReply, type EventDecoder } from './streamedReply.js';
// aiSdkProvider is its own entry point, `agent-lanes/ai-sdk`: its types name @ai-sdk/provider,
// an optional peer that an app without the AI SDK does not have.
