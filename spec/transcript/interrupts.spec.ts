// A cassette recorded of a run approved in process replays through an interrupt: replayed on a
// runner that defers approvals, the run waits, is resumed with the approval, and the two halves
// make the recorded transcript, which verify() accepts.
import { expect } from 'chai';
import { Agent, AgentRunner, ScriptedProvider, type RunEvent } from '../../lib/index.js';
import { CassetteRecorder, CassetteReplay } from '../../lib/testing.js';
import { toolsWithSpies } from '../runner/approvalTools.js';

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });
const withoutIds = (events: readonly RunEvent[]) => events.map((event) => (event.type === 'RUN_STARTED' ? { ...event, runId: '' } : event));

describe('a cassette through an interrupt', () => {
  it('replays as the interrupted run and its resumption, whose transcripts together are the recorded one', async () => {
    const { tools } = toolsWithSpies();
    const turn = { toolCalls: [{ id: 'a', name: 'lookup', arguments: { q: 'lisbon' } }, { id: 'b', name: 'book', arguments: { room: 7 } }, { id: 'c', name: 'lookup', arguments: { q: 'porto' } }] };
    const recorder = new CassetteRecorder({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools });
    const recording = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools, approve: () => true }), agent, 'go');
    expect(recording.result.status).to.equal('completed');

    const again = toolsWithSpies();
    const replay = new CassetteReplay(recording.cassette, { agent, tools: again.tools });
    const runner = new AgentRunner({ provider: replay.provider, tools: replay.tools });
    const options = replay.runOptions();
    const interrupted = await runner.run(agent, 'go', options);
    if (interrupted.status !== 'interrupted') throw new Error(interrupted.status);
    const resumed = await runner.resume(agent, interrupted.snapshot, { ...options, approvals: { b: true } });
    const whole = [...interrupted.events.slice(0, -1), ...resumed.events];
    expect(withoutIds(whole)).to.deep.equal(withoutIds(recording.result.events));
    expect(() => replay.verify(whole)).to.not.throw();
    // No tool body ran: the replay answered every call from the cassette.
    expect(again.book.called || again.lookup.called).to.equal(false);
  });
});
