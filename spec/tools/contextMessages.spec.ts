// A body reads the conversation its turn sent the model (ctx.messages): the user's input and
// the earlier turns with their calls and results, without the response that holds its call.
import { expect } from 'chai';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry } from '../../lib/index.js';
import type { ConversationMessage } from '../../lib/tools/ToolContext.js';

describe('ctx.messages', () => {
  it('is the conversation the model was sent on the call\'s turn, shared by the calls of that turn', async () => {
    const seen: Array<{ callId: string; messages: readonly ConversationMessage[] }> = [];
    const tools = new ToolRegistry().register({ name: 'note' }, (_args, ctx) => {
      seen.push({ callId: ctx.callId, messages: ctx.messages });
      return ctx.callId;
    });
    const provider = new ScriptedProvider([
      { toolCalls: [{ id: 'a', name: 'note', arguments: '{}' }] },
      { text: 'thinking', toolCalls: [{ id: 'b', name: 'note', arguments: '{}' }, { id: 'c', name: 'note', arguments: '{}' }] },
      { text: 'done' },
    ]);
    const result = await new AgentRunner({ provider, tools }).run(new Agent({ name: 'n', instructions: 'be brief', model: 'm' }), 'hello');
    expect(result.status).to.equal('completed');
    expect(seen.map((s) => [s.callId, s.messages.map((m) => `${m.role}:${m.content}`)])).to.deep.equal([
      ['a', ['user:hello']],
      ['b', ['user:hello', 'assistant:', 'tool:a']],
      ['c', ['user:hello', 'assistant:', 'tool:a']],
    ]);
    expect(seen[1]!.messages).to.equal(seen[2]!.messages);
    expect(seen[1]!.messages).to.deep.equal(provider.requests[1]!.messages);
  });
});
