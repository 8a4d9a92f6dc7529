// Cassettes of a run given a conversation: the cassette holds the history (canonical and
// scrubbed, as requests are), the first recorded request carries it, the replay feeds it back
// and matches, and a replay driven with another conversation fails at the first request, naming
// the message that differs.
import { expect } from 'chai';
import * as t from 'io-ts';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type Message, type RunEvent } from '../../lib/index.js';
import {
  CassetteMissError,
  CassetteRecorder,
  CassetteReplay,
  TranscriptMismatchError,
  cassetteTranscript,
  deterministicTranscript,
  parseCassette,
  stringifyCassette,
  type Cassette,
} from '../../lib/testing.js';

const agent = new Agent({ name: 'desk', instructions: 'Find hotels.', model: 'test-model', tools: ['lookup'] });
const tools = (): ToolRegistry =>
  new ToolRegistry().register({ name: 'lookup', args: t.type({ city: t.string }), idempotent: true }, ({ city }) => ({ city, from: 100, account: 'acct-1' }));

const conversation: readonly Message[] = [
  { role: 'user', content: 'Hotels in Lisbon?' },
  { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'lookup', arguments: { city: 'Lisbon' } }] },
  { role: 'tool', toolCallId: 'c1', content: '{"from":122,"city":"Lisbon","account":"acct-9"}' },
  { role: 'assistant', content: 'Lisbon from 122.' },
  { role: 'user', content: 'And Porto?' },
];

async function record(): Promise<Cassette> {
  const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c2', name: 'lookup', arguments: { city: 'Porto' } }] }, { text: 'Porto from 100.' }]);
  const recorder = new CassetteRecorder({ provider, tools: tools(), redact: ['account'] });
  const runner = new AgentRunner({ provider: recorder.provider, tools: recorder.tools });
  const { result, cassette } = await recorder.record(runner, agent, conversation);
  expect(result.status).to.equal('completed');
  return parseCassette(stringifyCassette(cassette));
}

describe('cassettes of a run given a conversation', () => {
  it('hold the history, canonical and scrubbed, and the first request carries it', async () => {
    const cassette = await record();
    expect(cassette.run.input).to.equal('And Porto?');
    const scrubbedResult = '{"account":"[redacted]","city":"Lisbon","from":122}';
    expect(cassette.run.history).to.deep.equal([
      { role: 'user', content: 'Hotels in Lisbon?' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'lookup', arguments: { city: 'Lisbon' } }] },
      { role: 'tool', toolCallId: 'c1', content: scrubbedResult },
      { role: 'assistant', content: 'Lisbon from 122.' },
    ]);
    expect(cassette.turns[0]!.request.messages).to.deep.equal([...cassette.run.history!, { role: 'user', content: 'And Porto?' }]);
    expect(cassetteTranscript(cassette)[0]).to.deep.equal({ type: 'RUN_STARTED', agent: 'desk', tenant: 'default', input: 'And Porto?', history: cassette.run.history });
  });

  it('replay with the recorded conversation, to the recorded transcript', async () => {
    const cassette = await record();
    const replay = new CassetteReplay(cassette, { agent, tools: tools() });
    const result = await replay.run(new AgentRunner({ provider: replay.provider, tools: replay.tools }));
    expect(result.status).to.equal('completed');
    expect(deterministicTranscript(result.events)).to.deep.equal(cassetteTranscript(cassette));
  });

  it('refuse a replay given another conversation, naming the message that differs', async () => {
    const cassette = await record();
    const replay = new CassetteReplay(cassette, { agent, tools: tools() });
    const runner = new AgentRunner({ provider: replay.provider, tools: replay.tools });
    const other = conversation.map((m, i) => (i === 3 ? { ...m, content: 'Lisbon from 99.' } : m));
    const events: RunEvent[] = [];
    await new Promise<void>((resolve) => runner.run$(agent, other, replay.runOptions()).subscribe({ next: (e) => events.push(e), complete: resolve }));
    const miss = (() => {
      try {
        replay.verify(events);
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(miss).to.be.instanceOf(CassetteMissError);
    expect((miss as CassetteMissError).message).to.contain('messages[3].content').and.to.contain('Lisbon from 99.');
  });

  it('tell a transcript whose history differs from the recorded one', async () => {
    const cassette = await record();
    const replay = new CassetteReplay(cassette, { agent, tools: tools() });
    const result = await replay.run(new AgentRunner({ provider: replay.provider, tools: replay.tools }));
    const events = result.events.map((e) => (e.type === 'RUN_STARTED' ? { ...e, history: e.history!.slice(1) } : e));
    expect(() => replay.verify(events)).to.throw(TranscriptMismatchError, 'history');
  });
});
