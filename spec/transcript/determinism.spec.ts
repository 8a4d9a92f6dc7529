// Record once, replay anywhere, whatever finished first: each of the worked example's five
// scenarios is recorded many times with random tool latencies (real timers, 0-15 ms), and
// every cassette must be the same bytes; then each cassette replays to the recorded transcript.
import { expect } from 'chai';
import fc from 'fast-check';
import { CassetteRecorder, CassetteReplay, deterministicTranscript, parseCassette, stringifyCassette, type Recording } from '../../lib/testing.js';
import type { RunnerActivity } from '../../lib/index.js';
import { exampleTools, plannerFor, runnerFor, scenarios, scriptFor, type Latencies, type Scenario } from './scenarios.js';

const RECORDINGS = 10;

/** Records `scenario` once with these latencies; also returns the order the calls settled in. */
async function recordOnce(scenario: Scenario, byCall: Record<string, number>): Promise<{ recording: Recording; text: string; settled: string }> {
  const latencies: Latencies = { byCall, bodiesRun: 0 };
  const recorder = new CassetteRecorder({ provider: scriptFor(scenario), tools: exampleTools(latencies) });
  const runner = runnerFor(scenario, recorder.provider, recorder.tools);
  const settled: string[] = [];
  const watching = runner.activity$.subscribe((activity: RunnerActivity) => {
    if (activity.type === 'ended') settled.push(activity.callId);
  });
  try {
    const recording = await recorder.record(runner, plannerFor(scenario), 'Where should I stay?', { tenant: 'acme' });
    return { recording, text: stringifyCassette(recording.cassette), settled: settled.join(' ') };
  } finally {
    watching.unsubscribe();
  }
}

describe('cassettes of the worked example', () => {
  for (const scenario of scenarios) {
    describe(scenario.title, () => {
      const ids = scenario.turn.toolCalls!.map((call) => call.id);
      // The first recording, in call order at distinct latencies; every other must match it.
      let reference: { recording: Recording; text: string; settled: string };

      before(async () => {
        reference = await recordOnce(scenario, Object.fromEntries(ids.map((id, i) => [id, 2 + i * 4])));
      });

      it(`records the same bytes ${RECORDINGS} times over, whichever call finished first`, async () => {
        const finishOrders = new Set<string>([reference.settled]);
        await fc.assert(
          fc.asyncProperty(fc.array(fc.integer({ min: 0, max: 15 }), { minLength: ids.length, maxLength: ids.length }), async (ms) => {
            const { text, settled } = await recordOnce(scenario, Object.fromEntries(ids.map((id, i) => [id, ms[i]!])));
            finishOrders.add(settled);
            expect(text).to.equal(reference.text);
          }),
          { numRuns: RECORDINGS },
        );
        // Reversed latencies finish in another order than the reference, so at least two orders were recorded.
        const reversed = await recordOnce(scenario, Object.fromEntries(ids.map((id, i) => [id, 2 + (ids.length - 1 - i) * 4])));
        finishOrders.add(reversed.settled);
        expect(reversed.text).to.equal(reference.text);
        expect(finishOrders.size, `finish orders seen: ${[...finishOrders].join(' | ')}`).to.be.greaterThan(1);
      });

      it('holds no run id, and parses back to the same cassette', () => {
        const { recording, text } = reference;
        const runId = (recording.result.events[0] as { runId: string }).runId;
        expect(text).to.not.include(runId);
        expect(text.endsWith('}\n')).to.equal(true);
        expect(stringifyCassette(parseCassette(text))).to.equal(text);
      });

      it('replays to the recorded transcript and state, with no provider and no tool bodies', async () => {
        const latencies: Latencies = { byCall: {}, bodiesRun: 0 };
        const replay = new CassetteReplay(parseCassette(reference.text), { agent: plannerFor(scenario), tools: exampleTools(latencies) });
        const runner = runnerFor(scenario, replay.provider, replay.tools);
        const replayed = await replay.run(runner);
        expect(latencies.bodiesRun).to.equal(0);
        const recorded = reference.recording.result;
        expect(replayed.status).to.equal(recorded.status);
        expect(deterministicTranscript(replayed.events)).to.deep.equal(deterministicTranscript(recorded.events));
        expect(replayed.state).to.deep.equal(JSON.parse(JSON.stringify(recorded.state)));
      });
    });
  }
});
