// A scripted chat model for LangChain, with no network: bindTools gives itself back (the script
// decides the calls), each turn's answer is a function of the messages it was sent, and every
// turn's messages are kept, so a spec reads what the model was told about each call.
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';

export type ChatTurn = (messages: readonly BaseMessage[]) => AIMessage;

export class ScriptedChatModel extends BaseChatModel {
  readonly requests: BaseMessage[][] = [];
  constructor(private readonly script: readonly ChatTurn[]) {
    super({});
  }

  _llmType(): string {
    return 'scripted';
  }

  // The tools are the script's business: binding them changes nothing.
  override bindTools(): this {
    return this;
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const turn = this.script[this.requests.length];
    this.requests.push(messages);
    if (turn === undefined) throw new Error(`the script has no turn ${this.requests.length}`);
    const message = turn(messages);
    return { generations: [{ message, text: typeof message.content === 'string' ? message.content : '' }] };
  }
}

/** A turn that asks for `calls` (tool name, call id, arguments) at once. */
export function callsTurn(calls: ReadonlyArray<readonly [string, string, Record<string, unknown>]>): ChatTurn {
  return () => new AIMessage({ content: '', tool_calls: calls.map(([name, id, args]) => ({ id, name, args, type: 'tool_call' as const })) });
}

/** A turn that answers with text. */
export function textTurn(text: string): ChatTurn {
  return () => new AIMessage(text);
}

/** What the model was told of each call, by call id: the content of its ToolMessage. */
export function resultsSeen(messages: readonly BaseMessage[]): Record<string, string> {
  const seen: Record<string, string> = {};
  for (const message of messages) {
    if (message.getType() !== 'tool') continue;
    const { tool_call_id: id } = message as BaseMessage & { tool_call_id: string };
    seen[id] = typeof message.content === 'string' ? message.content : JSON.stringify(message.content);
  }
  return seen;
}
