// What can stop a run from outside: the caller's signal and the runner's runSeconds, each an
// Observable of the stop it gives. The run (run.ts) merges them into its one stop.
import { Observable } from 'rxjs';
import { cancelled, type StopReason } from '../../batch/index.js';
import { DeadlineExceededError, toErrorInfo } from '../../errors.js';
import { scheduleAfter } from '../../time.js';
import type { RunnerParts, RunPlan } from '../parts.js';

// The caller's signal as a stop: at once if it is aborted already.
function aborted(signal: AbortSignal): Observable<StopReason> {
  return new Observable<StopReason>((subscriber) => {
    const abort = (): void => {
      subscriber.next(cancelled(signal.reason));
      subscriber.complete();
    };
    if (signal.aborted) return abort();
    signal.addEventListener('abort', abort, { once: true });
    return () => signal.removeEventListener('abort', abort);
  });
}

/** The sources of a run's stop: its signal, its runSeconds; none for a run nothing outside can stop. */
export function stopSources(parts: RunnerParts, plan: RunPlan): Array<Observable<StopReason>> {
  const { runSeconds } = parts.deadline;
  const sources: Array<Observable<StopReason>> = [];
  if (plan.signal !== undefined) sources.push(aborted(plan.signal));
  if (runSeconds !== undefined) {
    // Through scheduleAfter: a runSeconds past 24.8 days would otherwise fire at once.
    sources.push(
      new Observable<StopReason>((subscriber) =>
        scheduleAfter(parts.scheduler, () => {
          const error = new DeadlineExceededError('runSeconds', runSeconds);
          subscriber.next({ kind: 'deadline', why: error.message, error: toErrorInfo(error) });
        }, runSeconds * 1000),
      ),
    );
  }
  return sources;
}
