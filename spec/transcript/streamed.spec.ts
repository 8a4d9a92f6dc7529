// Recording a streamed turn: the cassette keeps the whole response the stream amounted to
// (usage and finish reason included), and a replay, which answers it whole, gives the same
// transcript; a part that does not decode is recorded as the failure the run ended with.
import { expect } from 'chai';
import * as t from 'io-ts';
import { from } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type ModelStreamPart } from '../../lib/index.js';
import { CassetteRecorder, CassetteReplay, deterministicTranscript, parseCassette, stringifyCassette } from '../../lib/testing.js';

const planner = new Agent({ name: 'planner', instructions: 'Find hotels.', model: 'm' });
const tools = (): ToolRegistry => new ToolRegistry().register({ name: 'lookup', args: t.type({ city: t.string }) }, async ({ city }) => ({ city, from: city.length * 10 }));

describe('a streamed turn in a cassette', () => {
  it('is kept as the whole response it amounts to, and replays to the same transcript', async () => {
    const parts: ModelStreamPart[] = [
      { type: 'text-delta', delta: 'Checking ' },
      { type: 'text-delta', delta: 'two.' },
      { type: 'tool-call', id: 'a', name: 'lookup', arguments: '{"city":"Lisbon"}' },
      { type: 'tool-call', id: 'b', name: 'lookup', arguments: { city: 'Porto' } },
      { type: 'usage', inputTokens: 80, outputTokens: 30 },
      { type: 'finish', finishReason: 'tool-calls' },
    ];
    const provider = new ScriptedProvider([() => from(parts), () => from<ModelStreamPart[]>([{ type: 'text-delta', delta: 'Porto.' }, { type: 'finish', finishReason: 'stop' }])]);
    const recorder = new CassetteRecorder({ provider, tools: tools() });
    const { result, cassette } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools }), planner, 'Cheapest?');
    expect(result.status).to.equal('completed');
    expect(cassette.turns[0]!.reply).to.deep.equal({
      response: {
        text: 'Checking two.',
        toolCalls: [
          { id: 'a', name: 'lookup', arguments: '{"city":"Lisbon"}' },
          { id: 'b', name: 'lookup', arguments: { city: 'Porto' } },
        ],
        usage: { inputTokens: 80, outputTokens: 30 },
        finishReason: 'tool-calls',
      },
    });
    const replay = new CassetteReplay(parseCassette(stringifyCassette(cassette)), { agent: planner, tools: tools() });
    const replayed = await replay.run(new AgentRunner({ provider: replay.provider, tools: replay.tools }));
    expect(deterministicTranscript(replayed.events)).to.deep.equal(deterministicTranscript(result.events));
    expect(replayed.usage).to.deep.equal({ inputTokens: 80, outputTokens: 30 });
  });

  it('records a part that does not decode as the failure the run ended with, and replays it the same', async () => {
    const provider = new ScriptedProvider([() => from([{ type: 'text-delta', delta: 7 }] as unknown as ModelStreamPart[])]);
    const recorder = new CassetteRecorder({ provider, tools: tools() });
    const { result, cassette } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools }), planner, 'Cheapest?');
    expect(result.error?.message).to.equal('model provider failed on turn 1: the reply does not decode: stream part 1 (text-delta): delta: expected string, got 7');
    const replay = new CassetteReplay(cassette, { agent: planner, tools: tools() });
    const replayed = await replay.run(new AgentRunner({ provider: replay.provider, tools: replay.tools }));
    expect(replayed.error).to.deep.equal(result.error);
  });
});
