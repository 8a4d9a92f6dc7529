// docs/testing.md, run as written: the marble test of a user's own tool against the lanes,
// and a replay in virtual time (replay bodies answer synchronously; a recorded deadline fires
// again on the virtual clock, at its frame).
import { expect } from 'chai';
import * as t from 'io-ts';
import { filter, map, type Observable } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import {
  Agent,
  AgentRunner,
  ConcurrencyConfig,
  DeadlineConfig,
  ScriptedProvider,
  ToolRegistry,
  type RunEvent,
  type ToolErrorEvent,
  type ToolResultEvent,
} from '../../lib/index.js';
import { CassetteRecorder, CassetteReplay, deterministicTranscript } from '../../lib/testing.js';
import { sleep } from './scenarios.js';

// Your tool, with its partner injected.
interface Partner {
  prices(city: string): Observable<{ from: number }>;
}
const lookupTool = (partner: Partner) =>
  new ToolRegistry().register({ name: 'lookup', description: 'Hotel prices in a city', args: t.type({ city: t.string }), idempotent: true }, ({ city }) => partner.prices(city));

const planner = new Agent({ name: 'planner', instructions: 'Compare prices.', model: 'any' });
const fourCities = {
  toolCalls: ['Lisbon', 'Porto', 'Madrid', 'Seville'].map((city, i) => ({ id: `c${i + 1}`, name: 'lookup', arguments: { city } })),
};

describe('docs/testing.md', () => {
  let testScheduler: TestScheduler;
  beforeEach(() => {
    testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
  });

  it('runs two lookups at a time, reports in call order, and cuts off a partner that hangs', () => {
    testScheduler.run(({ cold, expectObservable }) => {
      const partner: Partner = {
        // Porto's partner never answers; the others take 5 frames (Madrid 2).
        prices: (city) => (city === 'Porto' ? cold('-') : cold(city === 'Madrid' ? '--(p|)' : '-----(p|)', { p: { from: 100 } })),
      };
      const runner = new AgentRunner({
        provider: new ScriptedProvider([fourCities, { text: 'done' }]),
        tools: lookupTool(partner),
        concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2, perToolSeconds: { lookup: 0.008 } }),
        scheduler: testScheduler, // the runner's timers in virtual time, whichever rxjs it loaded
      });
      const outcomes$ = runner.run$(planner, 'Where is it cheapest?').pipe(
        filter((e): e is ToolResultEvent | ToolErrorEvent => e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR'),
        map((e) => `${e.callId} ${e.type === 'TOOL_ERROR' ? e.error.name : 'ok'}`),
      );
      // c1 and c2 start at 0; c1 ends at 5, so c3 starts and ends at 7; c4 starts at 7 and
      // ends at 12, and so does the run; c2 is cut off at 8 by its 8 ms ceiling. c3 waits for c2: call order.
      expectObservable(outcomes$).toBe('-----a--(bc)(d|)', {
        a: 'c1 ok',
        b: 'c2 ToolTimedOutError',
        c: 'c3 ok',
        d: 'c4 ok',
      });
    });
  });

  it('replays in virtual time: answers at frame 0, a recorded deadline at its own frame', async () => {
    // Recorded with real timers: c2 runs past toolCallSeconds (60 ms) and ends the run.
    const deadline = new DeadlineConfig({ toolCallSeconds: 0.06 });
    const realTools = () =>
      new ToolRegistry().register({ name: 'lookup', args: t.type({ city: t.string }) }, async ({ city }, ctx) => {
        await sleep(city === 'Porto' ? 1000 : 1, ctx.signal);
        return { city };
      });
    const recorder = new CassetteRecorder({ provider: new ScriptedProvider([fourCities, { text: 'done' }]), tools: realTools() });
    const { result: recorded, cassette } = await recorder.record(new AgentRunner({ provider: recorder.provider, tools: recorder.tools, deadline }), planner, 'go');
    expect(recorded.status).to.equal('failed');

    const replay = new CassetteReplay(cassette, { agent: planner, tools: realTools() });
    const events: RunEvent[] = [];
    const frames: string[] = [];
    testScheduler.run(({ flush }) => {
      const runner = new AgentRunner({ provider: replay.provider, tools: replay.tools, deadline });
      runner.run$(planner, cassette.run.input, replay.runOptions()).subscribe((event) => {
        events.push(event);
        frames.push(`${testScheduler.now()} ${event.type}`);
      });
      flush();
    });
    expect(frames).to.deep.equal([
      '0 RUN_STARTED',
      '0 MODEL_RESPONSE',
      '0 TOOL_RESULT',
      '60 TOOL_INDETERMINATE',
      '60 TOOL_RESULT',
      '60 TOOL_RESULT',
      '60 RUN_FAILED',
    ]);
    expect(() => replay.verify(events)).to.not.throw();
    expect(deterministicTranscript(events)).to.deep.equal(deterministicTranscript(recorded.events));
  });
});
