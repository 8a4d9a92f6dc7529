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
export { ProviderHttpError, ProviderReplyError, ProviderTimeoutError } from './errors.js';
export { postJson, retryAfterMs, retryDelay, retryPolicy, abortableSleep, type JsonPost, type RetryOptions, type RetryPolicy } from './http.js';
