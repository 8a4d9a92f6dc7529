// A tool that joins the registry while a run goes on (an MCP server's list changed, or a body
// that registers one) is held to its declaration from the next turn on: a streamed turn's gate
// is worked out again for the tools the agent has now, not once per run.
import { expect } from 'chai';
import { from } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type ModelStreamPart, type RunEvent } from '../../lib/index.js';

const planner = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });
const streamedCall = (id: string, name: string, args: Record<string, unknown> = {}) => () => from<ModelStreamPart[]>([{ type: 'tool-call', id, name, arguments: args }]);
const outcomeOf = (events: readonly RunEvent[], callId: string) => events.find((event) => 'callId' in event && event.callId === callId);

describe('a tool registered while a run goes on', () => {
  it('asks approval for a later tool that needs it, in a streamed turn whose first turn had none to ask', async () => {
    const asked: string[] = [];
    let paid = false;
    const tools = new ToolRegistry();
    tools.register({ name: 'work' }, () => {
      tools.register({ name: 'pay', needsApproval: true }, () => {
        paid = true;
        return 'paid';
      });
      return 'worked';
    });
    const provider = new ScriptedProvider([streamedCall('a', 'work'), streamedCall('p', 'pay'), { text: 'ok' }]);
    const runner = new AgentRunner({ provider, tools, approve: (call) => (asked.push(call.callId), false) });
    const result = await runner.run(planner, 'go');
    expect(asked).to.deep.equal(['p']);
    expect(paid).to.equal(false);
    expect(outcomeOf(result.events, 'p')?.type).to.equal('TOOL_ERROR');
  });

  it('waits for the verdict of a later tool whose Standard Schema checks asynchronously, and refuses its bad arguments', async () => {
    const refuses = { '~standard': { version: 1 as const, vendor: 'spec', validate: async () => ({ issues: [{ message: 'x must be a string', path: ['x'] }] }) } };
    let ran = false;
    const tools = new ToolRegistry();
    tools.register({ name: 'work' }, () => {
      tools.register({ name: 'check', args: refuses, parameters: { type: 'object' } }, () => {
        ran = true;
        return 'ran';
      });
      return 'worked';
    });
    const provider = new ScriptedProvider([streamedCall('a', 'work'), streamedCall('c', 'check', { x: 1 }), { text: 'ok' }]);
    const result = await new AgentRunner({ provider, tools }).run(planner, 'go');
    expect(ran).to.equal(false);
    const outcome = outcomeOf(result.events, 'c');
    expect(outcome?.type).to.equal('TOOL_ERROR');
    expect(outcome?.type === 'TOOL_ERROR' ? outcome.error.name : undefined).to.equal('ToolArgumentsError');
  });
});
