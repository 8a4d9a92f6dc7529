// A cassette of a run whose calls were cut off in flight by themselves (a CallInterruptedError:
// an MCP request that timed out, say), not by a stop of their batch: the replay gives the same
// outcomes at once, rather than waiting for a stop that never comes.
import { expect } from 'chai';
import { Agent, AgentRunner, CallInterruptedError, ScriptedProvider, ToolRegistry } from '../../lib/index.js';
import { CassetteRecorder, CassetteReplay, deterministicTranscript, parseCassette, stringifyCassette } from '../../lib/testing.js';

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });

function tools(ran: string[]): ToolRegistry {
  const cutOff = (name: string) => async () => {
    ran.push(name);
    await new Promise((resolve) => setTimeout(resolve, 1));
    throw new CallInterruptedError('its request to MCP server files got no answer in time (MCP error -32001: Request timed out)', { code: -32001 });
  };
  return new ToolRegistry()
    .register({ name: 'hold' }, cutOff('hold'))
    .register({ name: 'put', idempotent: true }, cutOff('put'))
    .register({ name: 'look' }, () => (ran.push('look'), 'seen'));
}

describe('a cassette of calls cut off in flight', () => {
  it('records them as they ended, and replays the same outcomes without running a body', async () => {
    const recordedRan: string[] = [];
    const turn = { toolCalls: [{ id: 'h', name: 'hold', arguments: {} }, { id: 'p', name: 'put', arguments: {} }, { id: 'l', name: 'look', arguments: {} }] };
    const recorder = new CassetteRecorder({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools: tools(recordedRan) });
    const { result: recorded, cassette } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools }), agent, 'go');
    expect(recorded.events.map((event) => event.type)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'TOOL_INDETERMINATE', 'TOOL_ERROR', 'TOOL_RESULT', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
    expect(cassette.turns[0]!.calls.map((call) => call.stopped)).to.deep.equal([false, false, false]);

    const replayedRan: string[] = [];
    const replay = new CassetteReplay(parseCassette(stringifyCassette(cassette)), { agent, tools: tools(replayedRan), waitSeconds: 0.5 });
    const result = await replay.run(new AgentRunner({ provider: replay.provider, tools: replay.tools }));
    expect(replayedRan).to.deep.equal([]);
    expect(deterministicTranscript(result.events)).to.deep.equal(deterministicTranscript(recorded.events));
  });
});
