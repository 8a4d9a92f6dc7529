// The first turn of a resumed run (resume/resumePoint.ts): its batch as it was left, the model
// not asked again. Calls with an outcome are never run again; their events go out in call order
// among the others' (those told before left out), then the run ends or goes on to its next turn.
import { concat, defer, filter, from, map, type Observable } from 'rxjs';
import type { Outcome } from '../../batch/index.js';
import type { RunEvent, ToolOutcomeEvent } from '../events.js';
import { resumedCalls, type ResumePoint } from '../resume/resumePoint.js';
import { callsOf } from './turnCalls.js';
import type { TurnRun } from './turnRun.js';

const noMalformed: ReadonlyMap<number, string> = new Map();

/**
 * The resumed turn, as an Observable of its events: the outcomes of the turn's batch in call
 * order (those told before left out; those known already re-emitted, never run again), then the
 * run's final event, or nothing when it goes on to its next turn. No MODEL_RESPONSE: the
 * transcript it goes on from has the turn's.
 */
export function resumedTurn(run: TurnRun, point: ResumePoint): Observable<RunEvent> {
  return defer(() => {
    const { toolCalls, asked } = resumedCalls(point);
    const { turn: n, messages } = point;
    // The turn's bodies read the conversation as the model was sent it: up to its answer.
    const calls = callsOf(run, toolCalls, noMalformed, run.scope(messages.slice(0, asked)));
    const contents = new Array<string | undefined>(calls.length);
    point.calls.forEach((resumed, index) => {
      if (resumed === undefined) return;
      const call = calls[index]!;
      const { outcome } = resumed;
      call.outcome = outcome;
      call.told = resumed.told === true;
      call.settled = call.told || resumed.settled === true;
      call.gated = resumed.gated === true;
      call.resumes = resumed.nested;
      // A result settled before goes back to the model as it was told: its JSON form's text.
      if (call.settled && outcome?.kind === 'result') contents[index] = typeof outcome.result === 'string' ? outcome.result : JSON.stringify(outcome.result);
    });
    const outcomes: Outcome[] = [];
    return concat(
      run.batchOf(n, calls, contents).pipe(
        filter((outcome) => {
          outcomes.push(outcome);
          return !calls[outcome.index]!.told;
        }),
        map((outcome) => run.tookOutcome(n, outcome, contents)),
        filter((event): event is ToolOutcomeEvent => event !== undefined),
      ),
      defer(() => from(run.after(n, outcomes))),
    );
  });
}
