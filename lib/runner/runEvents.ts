// A run as a cold Observable of its transcript: the Run (run.ts) made when someone subscribes,
// traced if the runner has a tracer, and its turns played one after another.
import { Observable, type Subscriber } from 'rxjs';
import type { RunEvent } from './events.js';
import type { RunnerParts, RunPlan } from './parts.js';
import { Run } from './run.js';
import { turnByTurn } from './turn/turnByTurn.js';
import { keptForResume } from './resume/snapshotStore.js';

/**
 * One run as a cold Observable of its transcript: RUN_STARTED, then per turn MODEL_RESPONSE
 * and one TOOL_RESULT / TOOL_ERROR / TOOL_INDETERMINATE per call in call order, then the final
 * event. Unsubscribing ends the run where it stands (the request aborted, the batch's calls
 * stopped, permits back). Anything unforeseen thrown along the way ends the run with RUN_FAILED,
 * never the process.
 */
export function runEvents(parts: RunnerParts, plan: RunPlan): Observable<RunEvent> {
  return new Observable<RunEvent>((subscriber) => {
    const { activity, scheduler, tracing } = parts;
    // Traced, the run is made with the trace's parts (its provider's answers traced) and followed by it.
    const trace = tracing?.open(parts, plan);
    const run = new Run(trace === undefined ? parts : trace.parts, plan, trace);
    trace?.begin(run.runId);
    if (activity.observed) {
      activity.next({ type: 'run-started', runId: run.runId, agent: plan.agent.name, tenant: plan.tenant, ...(run.parent ? { parent: run.parent } : {}), at: scheduler.now() });
    }
    if (trace === undefined) return play(run, subscriber);
    return trace.follow(new Observable<RunEvent>((followed) => play(run, followed))).subscribe(subscriber);
  });
}

// The run's transcript to `subscriber`: RUN_STARTED, then its turns one after another. Whatever
// ends it (its final event, a failure, the subscriber leaving), its stop's sources end with it.
function play(run: Run, subscriber: Subscriber<RunEvent>): void {
  const { plan } = run;
  const { history } = plan;
  // A resumed run goes on with the transcript it was left with: it starts no second time (nor in its journal).
  if (plan.resume === undefined) run.journal?.started(plan, plan.initial);
  if (plan.resume === undefined) subscriber.next(
    history.length === 0
      ? { type: 'RUN_STARTED', runId: run.runId, agent: plan.agent.name, tenant: plan.tenant, input: plan.input }
      : { type: 'RUN_STARTED', runId: run.runId, agent: plan.agent.name, tenant: plan.tenant, input: plan.input, history },
  );
  // A top-level run that ends waiting tells it once its one resume can find it (its snapshot kept, its journal written).
  const { snapshots, journal } = run.parts;
  const guarded = plan.nesting === undefined && (snapshots !== undefined || journal !== undefined);
  (guarded ? turnByTurn(run).pipe(keptForResume(snapshots, journal)) : turnByTurn(run)).subscribe(subscriber);
  // After the turns' own teardown, so a run left mid-turn has stopped its batch by then.
  subscriber.add(run);
}
