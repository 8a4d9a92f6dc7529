// The scheduling invariants, checked on generated worlds (fast-check) in virtual time:
// random lanes and narrowing agents, several runs over several tenants, random
// latencies, failures, ceilings and cancellations. A failure prints the shrunk world,
// which reads as the setup of a spec.
import { expect } from 'chai';
import fc from 'fast-check';
import { seed } from './seed.js';
import { TestScheduler } from 'rxjs/testing';
import type { LaneTable, RunEvent, ToolOutcomeEvent } from '../../lib/index.js';
import { startWorld, toolFacts, worldPlan, type ToolName, type WorldPlan } from './world.js';

const numRuns = 150;

function simulate(plan: WorldPlan) {
  const scheduler = new TestScheduler(() => undefined);
  let world: ReturnType<typeof startWorld> | undefined;
  scheduler.run(({ flush }) => {
    world = startWorld(plan, (work, delay) => scheduler.schedule(work, delay));
    flush();
  });
  return world!;
}

const isOutcome = (e: RunEvent): e is ToolOutcomeEvent => e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE';

describe('scheduling invariants (properties)', () => {
  it('never lets a lane exceed its bound: turn, per tool across runs, per tenant across runs', () => {
    fc.assert(
      fc.property(worldPlan, (plan) => {
        const { observed } = simulate(plan);
        for (const [tool, peak] of observed.peakPerTool) {
          const bound = plan.perTool[tool as ToolName];
          if (bound !== undefined) expect(peak, `tool ${tool}`).to.be.at.most(bound);
        }
        if (plan.perTenant !== undefined) {
          for (const [tenant, peak] of observed.peakPerTenant) expect(peak, `tenant ${tenant}`).to.be.at.most(plan.perTenant);
        }
        for (const [key, peak] of observed.peakPerTurn) {
          const run = plan.runs[Number(key.split(':')[0])]!;
          const bounds = [plan.maxConcurrentTools, run.agentTurnLimit].filter((b): b is number => b !== undefined);
          if (bounds.length > 0) expect(peak, `turn ${key}`).to.be.at.most(Math.min(...bounds));
        }
      }),
      { numRuns, seed },
    );
  });

  it('ends every call in exactly one outcome, in call order, and every run in one final event', () => {
    fc.assert(
      fc.property(worldPlan, (plan) => {
        const { observed } = simulate(plan);
        observed.events.forEach((events, r) => {
          const finals = events.filter((e) => e.type === 'RUN_COMPLETED' || e.type === 'RUN_FAILED' || e.type === 'RUN_CANCELLED');
          expect(finals, `run ${r} final events`).to.have.length(1);
          expect(events[events.length - 1], `run ${r} ends with its final event`).to.equal(finals[0]);
          events.forEach((event, i) => {
            if (event.type !== 'MODEL_RESPONSE' || event.toolCalls.length === 0) return;
            const outcomes = events.slice(i + 1, i + 1 + event.toolCalls.length);
            expect(outcomes.every(isOutcome), `run ${r} turn ${event.turn}: one outcome per call right after the response`).to.equal(true);
            expect(outcomes.map((o) => (o as ToolOutcomeEvent).callId)).to.deep.equal(event.toolCalls.map((c) => c.id));
          });
        });
      }),
      { numRuns, seed },
    );
  });

  it('never runs a parallelSafe:false call beside anything else of its run', () => {
    fc.assert(
      fc.property(worldPlan, (plan) => {
        expect(simulate(plan).observed.overlaps).to.deep.equal([]);
      }),
      { numRuns, seed },
    );
  });

  it('classifies each stopped call by what it actually did', () => {
    fc.assert(
      fc.property(worldPlan, (plan) => {
        const { observed } = simulate(plan);
        observed.events.forEach((events, r) => {
          for (const event of events.filter(isOutcome)) {
            const started = observed.started.has(`${r}:${event.turn}:${event.callId}`);
            const facts = toolFacts[event.tool as ToolName];
            if (event.type === 'TOOL_RESULT') expect(started, `${event.callId} has a result, so it ran`).to.equal(true);
            if (event.type === 'TOOL_INDETERMINATE') {
              expect(started, `${event.callId} is indeterminate, so it ran`).to.equal(true);
              expect(facts.idempotent, `${event.callId} is indeterminate, so it is not idempotent`).to.equal(false);
            }
            if (event.type === 'TOOL_ERROR' && event.error.name === 'CallStoppedError') {
              if (event.error.message.startsWith('never dispatched: ')) expect(started, `${event.callId} never dispatched`).to.equal(false);
              else {
                expect(started, `${event.callId} stopped in flight`).to.equal(true);
                expect(facts.idempotent).to.equal(true);
                expect(event.error.message).to.match(/Safe to call again$/);
              }
            }
          }
        });
      }),
      { numRuns, seed },
    );
  });

  it('leaves every permit released and every shared lane dropped', () => {
    fc.assert(
      fc.property(worldPlan, (plan) => {
        const { runner } = simulate(plan);
        expect(runner.lanes.occupancy()).to.deep.equal([]);
        expect((runner.lanes as LaneTable).size).to.equal(0);
      }),
      { numRuns, seed },
    );
  });

  it('gives the same transcript whatever order the calls finish in', () => {
    const calmWorld = worldPlan.map((plan) => ({
      ...plan,
      perToolSeconds: {},
      runs: plan.runs.map((run) => ({ ...run, cancelAt: undefined, turns: run.turns.map((calls) => calls.map((c) => ({ ...c, fails: false }))) })),
    }));
    fc.assert(
      fc.property(calmWorld, fc.integer({ min: 1, max: 1000 }), (plan, shift) => {
        // The same script with the latencies shuffled: the calls finish in another order.
        const shuffled: WorldPlan = {
          ...plan,
          runs: plan.runs.map((run, r) => ({
            ...run,
            turns: run.turns.map((calls, t) => calls.map((c, i) => ({ ...c, latency: 1 + ((c.latency * 7 + shift + r * 3 + t * 5 + i * 11) % 12) }))),
          })),
        };
        const strip = (events: RunEvent[][]) => events.map((run) => run.map((e) => (e.type === 'RUN_STARTED' ? { ...e, runId: '' } : e)));
        expect(strip(simulate(shuffled).observed.events)).to.deep.equal(strip(simulate(plan).observed.events));
      }),
      { numRuns: 100, seed },
    );
  });
});
