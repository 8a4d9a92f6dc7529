// The caller's AbortSignal as a run's stop: a cancel, with the reason the caller aborted with.
import { Observable } from 'rxjs';
import { cancelled, type StopReason } from '../batch/index.js';

// The caller's signal as a stop: at once if it is aborted already.
export function aborted(signal: AbortSignal): Observable<StopReason> {
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
