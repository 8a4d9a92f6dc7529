// agent-lanes/providers: the model vendors' HTTP wires over fetch, with no SDK (docs/providers.md,
// docs/streaming-models.md). Any Vercel AI SDK model is agent-lanes/ai-sdk.
export { OpenAIChatProvider, toChatCompletionRequest, fromChatCompletion, type ChatMessage, type OpenAIChatOptions } from './providers/OpenAIChatProvider.js';
export {
  AnthropicMessagesProvider,
  toMessagesRequest,
  fromMessagesReply,
  type AnthropicBlock,
  type AnthropicMessage,
  type AnthropicMessagesOptions,
} from './providers/AnthropicMessagesProvider.js';
export { retryAfterMs, retryDelay, retryPolicy, type RetryOptions, type RetryPolicy } from './providers/http.js';
export { ProviderHttpError, ProviderReplyError, ProviderStreamError, ProviderTimeoutError } from './providers/errors.js';
