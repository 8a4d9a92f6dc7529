// The form a model request is stored in and compared in. JSON inside it (a tool message's
// content, a call's arguments) is compared as canonical JSON, so a result's key order never
// makes a replayed request "differ"; what the fingerprint pins (tool definitions) is named only.
import type { Message, ModelRequest, ToolCall } from '../runner/index.js';
import type { RecordedRequest } from './Cassette.js';
import { scrubbed, scrubbedJsonText, scrubString, type Scrub } from './scrub.js';

function recordedCall(call: ToolCall, scrub: Scrub): ToolCall {
  const args = typeof call.arguments === 'string' ? scrubbedJsonText(call.arguments, scrub, true) : (scrubbed(call.arguments, scrub) as ToolCall['arguments']);
  return { id: call.id, name: call.name, arguments: args };
}

/** One message as a cassette holds it: JSON inside it canonical, redacted keys scrubbed. */
export function recordedMessage(message: Message, scrub: Scrub): Message {
  const { role, content, toolCalls, toolCallId, isError } = message;
  return {
    role,
    content: role === 'tool' ? scrubbedJsonText(content, scrub, true) : scrubString(content, scrub),
    ...(toolCalls !== undefined ? { toolCalls: toolCalls.map((call) => recordedCall(call, scrub)) } : {}),
    ...(toolCallId !== undefined ? { toolCallId } : {}),
    ...(isError !== undefined ? { isError } : {}),
  };
}

/**
 * `request` as a cassette holds it: its messages (JSON inside them canonical and scrubbed) and
 * the names of the tools it offered. The agent, model, instructions and tool definitions are
 * the fingerprint's, which a replay checks before it starts.
 */
export function recordedRequest(request: ModelRequest, scrub: Scrub): RecordedRequest {
  return {
    messages: request.messages.map((message) => recordedMessage(message, scrub)),
    tools: request.tools.map((tool) => tool.name),
  };
}
