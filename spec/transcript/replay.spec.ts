// Replaying a cassette through AgentRunner: the fingerprint refuses a changed tool and lets a
// flipped parallelSafe through; a request or call the cassette does not hold and an entry left
// unused each fail loudly, naming the turn and call; stopped batches (FAIL_RUN, a cancel, a
// deadline) replay to the same classification; nested runs and provider failures replay too.
import { expect } from 'chai';
import * as t from 'io-ts';
import { map, timer } from 'rxjs';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  DeadlineConfig,
  OnToolError,
  ScriptedProvider,
  ToolRegistry,
  type ModelProvider,
  type ModelResponse,
  type RunEvent,
  type RunOptions,
  type ScriptStep,
} from '../../lib/index.js';
import {
  CassetteMissError,
  CassetteRecorder,
  CassetteReplay,
  CassetteUnusedError,
  FingerprintMismatchError,
  TranscriptMismatchError,
  deterministicTranscript,
  fingerprint,
  parseCassette,
  stringifyCassette,
  type Cassette,
  type RecordedTurn,
} from '../../lib/testing.js';
import { exampleTools, plannerFor, runnerFor, scenarios, scriptFor, sleep, type Latencies } from './scenarios.js';

const [fourAtOnce, , , , bookingBetween] = scenarios as [(typeof scenarios)[number], unknown, unknown, unknown, (typeof scenarios)[number]];

async function recordScenario(scenario = fourAtOnce, tools = exampleTools({ byCall: {}, bodiesRun: 0 })): Promise<Cassette> {
  const recorder = new CassetteRecorder({ provider: scriptFor(scenario), tools });
  const { cassette } = await recorder.record(runnerFor(scenario, recorder.provider, recorder.tools), plannerFor(scenario), 'Where should I stay?', { tenant: 'acme' });
  return cassette;
}

/** A deep copy to edit, as a person editing the file would. */
const edited = (cassette: Cassette, edit: (copy: { -readonly [K in keyof Cassette]: any }) => void): Cassette => {
  const copy = JSON.parse(stringifyCassette(cassette));
  edit(copy);
  return copy as Cassette;
};

/** Replays `cassette` for the four-lookups scenario; returns the rejection. */
async function replayError(cassette: Cassette, runOptions?: (replay: CassetteReplay, runner: AgentRunner) => Promise<readonly RunEvent[]>): Promise<Error> {
  const replay = new CassetteReplay(cassette, { agent: plannerFor(fourAtOnce), tools: exampleTools({ byCall: {}, bodiesRun: 0 }), waitSeconds: 0.5 });
  const runner = runnerFor(fourAtOnce, replay.provider, replay.tools);
  try {
    if (runOptions === undefined) await replay.run(runner);
    else replay.verify(await runOptions(replay, runner));
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the replay to fail');
}

/** Summaries of the tool events and the ending: `RESULT c1`, `INDET c2`, `ERROR c4 CallStoppedError`, `FAILED Error`. */
function outline(events: readonly RunEvent[]): string[] {
  return events.flatMap((event) => {
    switch (event.type) {
      case 'TOOL_RESULT':
        return [`RESULT ${event.callId}`];
      case 'TOOL_ERROR':
        return [`ERROR ${event.callId} ${event.error.name}`];
      case 'TOOL_INDETERMINATE':
        return [`INDET ${event.callId}`];
      case 'RUN_FAILED':
        return [`FAILED ${event.error.name}`];
      case 'RUN_CANCELLED':
        return ['CANCELLED'];
      case 'RUN_COMPLETED':
        return ['COMPLETED'];
      default:
        return [];
    }
  });
}

describe('CassetteReplay', () => {
  describe('the fingerprint', () => {
    it('refuses a cassette whose tool description changed, and says what changed', async () => {
      const cassette = await recordScenario();
      const tools = exampleTools({ byCall: {}, bodiesRun: 0 }, { lookupDescription: 'Cheapest room in a city' });
      let refused: unknown;
      try {
        new CassetteReplay(cassette, { agent: plannerFor(fourAtOnce), tools });
      } catch (error) {
        refused = error;
      }
      expect(refused).to.be.instanceOf(FingerprintMismatchError);
      const error = refused as FingerprintMismatchError;
      expect(error.changes).to.deep.equal([{ path: 'tools.lookup.description', recorded: 'Hotel prices in a city', current: 'Cheapest room in a city' }]);
      expect(error.recorded).to.equal(cassette.fingerprint.sha256);
      expect(error.current).to.equal(fingerprint(plannerFor(fourAtOnce), tools).sha256);
      expect(error.message).to.include('tools.lookup.description: recorded "Hotel prices in a city", now "Cheapest room in a city"');
    });

    it('replays a cassette recorded before parallelSafe was flipped', async () => {
      const cassette = await recordScenario(bookingBetween);
      const flipped = exampleTools({ byCall: {}, bodiesRun: 0 }, { bookingParallelSafe: true });
      expect(flipped.get('booking')!.declaration.parallelSafe).to.equal(true);
      const replay = new CassetteReplay(cassette, { agent: plannerFor(bookingBetween), tools: flipped });
      const replayed = await replay.run(runnerFor(bookingBetween, replay.provider, replay.tools));
      expect(replayed.status).to.equal('completed');
      expect(outline(replayed.events)).to.deep.equal(['RESULT c1', 'RESULT c2', 'RESULT c3', 'RESULT c4', 'COMPLETED']);
    });
  });

  describe('a request the cassette does not hold', () => {
    it('fails a model request that differs from the recorded one, naming the turn and where', async () => {
      const cassette = await recordScenario();
      const error = await replayError(cassette, async (replay, runner) => (await runner.run(replay.agent, 'Somewhere cheaper?', replay.runOptions())).events);
      expect(error).to.be.instanceOf(CassetteMissError);
      const miss = error as CassetteMissError;
      expect([miss.turn, miss.callId, miss.closest]).to.deep.equal([1, undefined, { turn: 1 }]);
      expect(miss.difference).to.deep.equal({ path: 'messages[0].content', recorded: 'Where should I stay?', current: 'Somewhere cheaper?' });
      expect(miss.message).to.equal(
        'cassette miss at turn 1: the request differs from the recorded one at messages[0].content: recorded "Where should I stay?", now "Somewhere cheaper?"; the closest recorded entry is turn 1',
      );
    });

    it('fails a request whose tool results changed (a guardrail now refuses one), at the next turn', async () => {
      const cassette = await recordScenario();
      const replay = new CassetteReplay(cassette, { agent: plannerFor(fourAtOnce), tools: exampleTools({ byCall: {}, bodiesRun: 0 }) });
      const runner = new AgentRunner({
        provider: replay.provider,
        tools: replay.tools,
        guardrails: { output: (call) => (call.callId === 'c2' ? 'Porto is off limits' : undefined) },
      });
      const error = await replay.run(runner).then(() => undefined, (e: unknown) => e);
      expect(error).to.be.instanceOf(CassetteMissError);
      const miss = error as CassetteMissError;
      expect(miss.turn).to.equal(2);
      expect(miss.difference?.path).to.equal('messages[3].content');
      expect(miss.message).to.include('turn 2').and.include('messages[3].content').and.include('Porto is off limits');
    });

    it('fails a turn past the end of the cassette, pointing at the last recorded turn', async () => {
      const cassette = edited(await recordScenario(), (copy) => {
        copy.turns = copy.turns.slice(0, 1);
      });
      const miss = (await replayError(cassette)) as CassetteMissError;
      expect(miss).to.be.instanceOf(CassetteMissError);
      expect([miss.turn, miss.closest]).to.deep.equal([2, { turn: 1 }]);
      expect(miss.message).to.equal(
        'cassette miss at turn 2: the run asked the model for turn 2 and the cassette holds 1 (the recorded run ended there with RUN_COMPLETED); the closest recorded entry is turn 1',
      );
    });

    it('fails a tool call the cassette holds no outcome for, naming the turn and call and the closest entry', async () => {
      const cassette = edited(await recordScenario(), (copy) => {
        copy.turns[0].calls[1].callId = 'c2-renamed';
      });
      const miss = (await replayError(cassette)) as CassetteMissError;
      expect(miss).to.be.instanceOf(CassetteMissError);
      expect([miss.turn, miss.index, miss.callId, miss.tool]).to.deep.equal([1, 1, 'c2', 'lookup']);
      expect(miss.closest).to.deep.equal({ turn: 1, index: 1, callId: 'c2-renamed', tool: 'lookup' });
      expect(miss.message).to.equal(
        'cassette miss at turn 1, call c2 (lookup, index 1): the cassette holds no outcome for call c2 to lookup in turn 1; ' +
          'the closest recorded entry is turn 1, call c2-renamed (lookup, index 1)',
      );
    });
  });

  describe('an entry left unused', () => {
    it('fails when the run ends before a recorded turn, naming the turn', async () => {
      const cassette = edited(await recordScenario(), (copy) => {
        copy.turns.push({ ...copy.turns[1], turn: 3 } as RecordedTurn);
      });
      const error = await replayError(cassette);
      expect(error).to.be.instanceOf(CassetteUnusedError);
      expect((error as CassetteUnusedError).unused).to.deep.equal([{ turn: 3 }]);
      expect(error.message).to.equal('the replay ended with 1 recorded entry unused: turn 3. The run did less than the recorded one');
    });

    it('fails when a recorded dispatch does not happen, naming the turn and call', async () => {
      // c2's arguments do not decode, so the runner never dispatches it; the edited cassette claims it was.
      const scenario = { ...fourAtOnce, turn: { toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{"city":"Lisbon"}' }, { id: 'c2', name: 'lookup', arguments: '{"town":"Porto"}' }] } };
      const cassette = edited(await recordScenario(scenario), (copy) => {
        expect(copy.turns[0].calls[1]).to.include({ dispatched: false, kind: 'error' });
        copy.turns[0].calls[1].dispatched = true;
      });
      const error = await replayError(cassette);
      expect(error).to.be.instanceOf(CassetteUnusedError);
      expect((error as CassetteUnusedError).unused).to.deep.equal([{ turn: 1, index: 1, callId: 'c2', tool: 'lookup' }]);
      expect(error.message).to.include('turn 1, call c2 (lookup, index 1)');
    });

    it('leaves verify() quiet after a faithful replay driven by hand', async () => {
      const cassette = await recordScenario();
      const replay = new CassetteReplay(cassette, { agent: plannerFor(fourAtOnce), tools: exampleTools({ byCall: {}, bodiesRun: 0 }) });
      const runner = runnerFor(fourAtOnce, replay.provider, replay.tools);
      const result = await runner.run(replay.agent, cassette.run.input, replay.runOptions());
      expect(() => replay.verify(result.events)).to.not.throw();
      expect(() => replay.verify(result.events.slice(0, -1))).to.throw(TranscriptMismatchError, 'event 7');
    });
  });

  describe('stopped batches', () => {
    // lookup (idempotent) and charge (not idempotent), with latencies by call id.
    const stopTools = (latencies: Latencies) =>
      exampleTools(latencies).register({ name: 'charge', description: 'Charge a card', args: t.type({ city: t.string }) }, async ({ city }, ctx) => {
        latencies.bodiesRun++;
        await sleep(latencies.byCall[ctx.callId] ?? 0, ctx.signal);
        return { charged: city };
      });
    const ask = (...calls: Array<[tool: string, city: string]>) => ({
      toolCalls: calls.map(([name, city], i) => ({ id: `c${i + 1}`, name, arguments: JSON.stringify({ city }) })),
    });
    // c2 is a charge that runs long; the rest are lookups (Atlantis fails).
    const turn = ask(['lookup', 'Lisbon'], ['charge', 'Porto'], ['lookup', 'Atlantis'], ['lookup', 'Madrid']);
    const cases: Array<{
      title: string;
      agent: Agent;
      turn: ModelResponse;
      concurrency: ConcurrencyConfig;
      latencies: Record<string, number>;
      deadline?: DeadlineConfig;
      cancelAfterMs?: number;
      expected: string[];
    }> = [
      {
        // The failing c1 is dispatched first, yet fails only after c3 and c4 were dispatched: its replay waits for them.
        title: 'a failure under FAIL_RUN: in flight is indeterminate or safe to call again, queued never dispatched',
        agent: new Agent({ name: 'planner', instructions: 'Plan.', model: 'scripted', onToolError: OnToolError.FAIL_RUN }),
        turn: ask(['lookup', 'Atlantis'], ['charge', 'Porto'], ['lookup', 'Lisbon'], ['lookup', 'Madrid'], ['lookup', 'Seville']),
        concurrency: new ConcurrencyConfig({ maxConcurrentTools: 3 }),
        latencies: { c1: 30, c2: 400, c3: 1, c4: 300, c5: 1 },
        expected: ['ERROR c1 Error', 'INDET c2', 'RESULT c3', 'ERROR c4 CallStoppedError', 'ERROR c5 CallStoppedError', 'FAILED Error'],
      },
      {
        title: 'a cancel: the replay cancels where the recording was',
        agent: new Agent({ name: 'planner', instructions: 'Plan.', model: 'scripted' }),
        turn,
        concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }),
        // Room for a loaded machine: c1 settles well before the cancel, c2 and c3 run well past it.
        latencies: { c1: 1, c2: 2000, c3: 2000, c4: 1 },
        cancelAfterMs: 200,
        expected: ['RESULT c1', 'INDET c2', 'ERROR c3 CallStoppedError', 'ERROR c4 CallStoppedError', 'CANCELLED'],
      },
      {
        title: 'the toolCallSeconds deadline after siblings settled: the replaying runner enforces it again',
        agent: new Agent({ name: 'planner', instructions: 'Plan.', model: 'scripted' }),
        turn,
        concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }),
        // Room for a loaded machine: c3 and c4 settle well inside the deadline, c2 well past it.
        latencies: { c1: 1, c2: 1000, c3: 10, c4: 1 },
        deadline: new DeadlineConfig({ toolCallSeconds: 0.25 }),
        expected: ['RESULT c1', 'INDET c2', 'ERROR c3 Error', 'RESULT c4', 'FAILED DeadlineExceededError'],
      },
    ];
    for (const c of cases) {
      it(`replays ${c.title}`, async () => {
        const latencies: Latencies = { byCall: c.latencies, bodiesRun: 0 };
        const recorder = new CassetteRecorder({ provider: new ScriptedProvider([c.turn, { text: 'done' }]), tools: stopTools(latencies) });
        const runnerOptions = { concurrency: c.concurrency, ...(c.deadline ? { deadline: c.deadline } : {}) };
        const recordingRunner = new AgentRunner({ provider: recorder.provider, tools: recorder.tools, ...runnerOptions });
        const options: RunOptions = c.cancelAfterMs === undefined ? {} : { signal: AbortSignal.timeout(c.cancelAfterMs) };
        const { result: recorded, cassette } = await recorder.record(recordingRunner, c.agent, 'Book it', options);
        expect(outline(recorded.events)).to.deep.equal(c.expected);

        const replayed: Latencies = { byCall: {}, bodiesRun: 0 };
        const replay = new CassetteReplay(parseCassette(stringifyCassette(cassette)), { agent: c.agent, tools: stopTools(replayed) });
        const result = await replay.run(new AgentRunner({ provider: replay.provider, tools: replay.tools, ...runnerOptions }));
        expect(replayed.bodiesRun).to.equal(0);
        expect(deterministicTranscript(result.events)).to.deep.equal(deterministicTranscript(recorded.events));
      });
    }

    it('replays a run cancelled while the model was asked, and one cancelled before it started', async () => {
      const agent = plannerFor(fourAtOnce);
      const slowModel = () => new ScriptedProvider([() => timer(300).pipe(map(() => ({ text: 'too late' })))]);
      const cancelled = [AbortSignal.timeout(20), AbortSignal.abort()];
      for (const signal of cancelled) {
        const recorder = new CassetteRecorder({ provider: slowModel(), tools: exampleTools({ byCall: {}, bodiesRun: 0 }) });
        const { result: recorded, cassette } = await recorder.record(runnerFor(fourAtOnce, recorder.provider, recorder.tools), agent, 'Where?', { signal });
        expect(recorded.events.map((e) => e.type)).to.deep.equal(['RUN_STARTED', 'RUN_CANCELLED']);
        expect(cassette.turns.map((turn) => turn.reply)).to.deep.equal(signal.reason?.name === 'TimeoutError' ? [{ stopped: true }] : []);
        const replay = new CassetteReplay(cassette, { agent, tools: exampleTools({ byCall: {}, bodiesRun: 0 }) });
        const replayed = await replay.run(runnerFor(fourAtOnce, replay.provider, replay.tools));
        expect(deterministicTranscript(replayed.events)).to.deep.equal(deterministicTranscript(recorded.events));
      }
    });

    it('fails loudly when the stop a recorded call waits for does not come', async () => {
      const agent = new Agent({ name: 'planner', instructions: 'Plan.', model: 'scripted' });
      // Room for a loaded machine: c2 runs well past the stop, which comes well after the others settled.
      const latencies: Latencies = { byCall: { c1: 1, c2: 3000, c3: 1, c4: 1 }, bodiesRun: 0 };
      const recorder = new CassetteRecorder({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools: stopTools(latencies) });
      const concurrency = new ConcurrencyConfig({ maxConcurrentTools: 2 });
      const { cassette } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools, concurrency }), agent, 'Book it', { signal: AbortSignal.timeout(250) });
      const replay = new CassetteReplay(cassette, { agent, tools: stopTools({ byCall: {}, bodiesRun: 0 }), waitSeconds: 0.03 });
      const runner = new AgentRunner({ provider: replay.provider, tools: replay.tools, concurrency });
      // Driven by hand without the replay's signal: nobody cancels, so c2 would wait for ever.
      replay.runOptions();
      const result = await runner.run(agent, cassette.run.input);
      let thrown: unknown;
      try {
        replay.verify(result.events);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).to.be.instanceOf(CassetteMissError);
      expect((thrown as CassetteMissError).callId).to.equal('c2');
      expect((thrown as Error).message).to.equal(
        'cassette miss at turn 1, call c2 (charge, index 1): the recorded run stopped this call in flight (RUN_CANCELLED); the replay waited 0.03s for that stop and it did not come',
      );
    });
  });

  describe('runs that leave the happy path', () => {
    it('records only the outer run of a tool that starts a sub-agent, and replays without it', async () => {
      const planner = new Agent({ name: 'planner', instructions: 'Plan.', model: 'scripted' });
      const expert = new Agent({ name: 'expert', instructions: 'Know hotels.', model: 'scripted' });
      const tools = () =>
        new ToolRegistry().register({ name: 'ask_expert', args: t.type({ question: t.string }) }, async ({ question }, ctx) => {
          const answer = await ctx.runAgent(expert, question);
          return { answer: answer.output };
        });
      const script: Record<string, ScriptStep[]> = {
        planner: [{ toolCalls: [{ id: 'c1', name: 'ask_expert', arguments: '{"question":"Lisbon or Porto?"}' }] }, { text: 'Porto it is.' }],
        expert: [{ text: 'Porto, in May.' }],
      };
      const provider = new ScriptedProvider(script);
      const recorder = new CassetteRecorder({ provider, tools: tools() });
      const { result: recorded, cassette } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools }), planner, 'Where?');
      expect(provider.requests.map((r) => r.agent)).to.deep.equal(['planner', 'expert', 'planner']);
      expect(cassette.turns.map((turn) => turn.turn)).to.deep.equal([1, 2]);
      expect(cassette.turns[0]!.calls[0]).to.deep.include({ kind: 'result', result: { answer: 'Porto, in May.' } });

      const replay = new CassetteReplay(cassette, { agent: planner, tools: tools() });
      const replayed = await replay.run(new AgentRunner({ provider: replay.provider, tools: replay.tools }));
      expect(deterministicTranscript(replayed.events)).to.deep.equal(deterministicTranscript(recorded.events));
    });

    it('replays a provider that failed, and a reply that did not decode, as the same failure', async () => {
      const agent = plannerFor(fourAtOnce);
      const failing: Array<[string, ModelProvider]> = [
        ['threw', new ScriptedProvider([fourAtOnce.turn, () => { throw new Error('HTTP 529: overloaded'); }])],
        ['answered nonsense', new ScriptedProvider([fourAtOnce.turn, () => ({ toolCalls: 'all of them' }) as never])],
      ];
      for (const [how, provider] of failing) {
        const recorder = new CassetteRecorder({ provider, tools: exampleTools({ byCall: {}, bodiesRun: 0 }) });
        const { result: recorded, cassette } = await recorder.record(runnerFor(fourAtOnce, recorder.provider, recorder.tools), agent, 'Where should I stay?');
        expect(recorded.status, how).to.equal('failed');
        const replay = new CassetteReplay(cassette, { agent, tools: exampleTools({ byCall: {}, bodiesRun: 0 }) });
        const replayed = await replay.run(runnerFor(fourAtOnce, replay.provider, replay.tools));
        expect(deterministicTranscript(replayed.events), how).to.deep.equal(deterministicTranscript(recorded.events));
        expect(replayed.error?.message, how).to.equal(recorded.error?.message);
      }
    });

    it('refuses a runner that was not built with the replay\'s provider and tools', async () => {
      const cassette = await recordScenario();
      const replay = new CassetteReplay(cassette, { agent: plannerFor(fourAtOnce), tools: exampleTools({ byCall: {}, bodiesRun: 0 }) });
      const runner = new AgentRunner({ provider: scriptFor(fourAtOnce), tools: replay.tools });
      let thrown: unknown;
      await replay.run(runner).catch((error: unknown) => (thrown = error));
      expect(thrown).to.be.instanceOf(TypeError);
      expect((thrown as Error).message).to.include('replay.provider');
    });
  });
});
