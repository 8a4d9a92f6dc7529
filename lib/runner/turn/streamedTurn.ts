// A streamed turn: its calls handed to its batch as the model writes them, its outcomes kept back
// until the response is complete, so its transcript is the whole turn's.
import { catchError, concat, concatMap, connectable, defer, EMPTY, filter, finalize, from, ignoreElements, map, merge, type Observable, of, ReplaySubject, Subject, takeUntil, tap } from 'rxjs';
import type { Outcome, StopReason } from '../../batch/index.js';
import { toErrorInfo } from '../../errors.js';
import { finalAnswer, providerFailure } from '../model/ask.js';
import { ending, type RunEvent, type ToolOutcomeEvent } from '../events.js';
import type { ModelResponse } from '../model/model.js';
import { WrittenTurn } from '../model/modelStream.js';
import type { TurnRun } from './turnRun.js';
import { callOf, type RunnerCall } from './turnCalls.js';

/**
 * A streamed turn. Its batch starts at once and takes each call as soon as the stream completes
 * it, so the call is gated and enters its lanes while the model writes the next one.
 * The transcript is the whole turn's: MODEL_RESPONSE (every call) once the stream has ended,
 * then the outcomes in call order, those that settled before it kept back until then. The model's
 * text goes to activity$ as it is written.
 *
 * A stop (the run's, or the batch's own: FAIL_RUN, toolCallSeconds) ends the reading, the
 * request aborted: the response is what had come, and the batch classifies its calls. A stream
 * that fails, or sends a part that does not decode, stops the batch likewise, and the run then
 * fails with it. A turn cut short before any call came has no MODEL_RESPONSE, as a turn stopped
 * while it was asked has none.
 */
export function streamed(run: TurnRun, n: number, first: unknown, rest$: Observable<unknown>): Observable<RunEvent> {
  return defer(() => {
    const writing = new WrittenTurn();
    const scope = run.scope();
    // The turn's call ids so far, for duplicates.
    const seen = new Set<string>();
    // The calls, to the batch, one by one.
    const calls = new Subject<RunnerCall>();
    // The stream's failure, as a stop of the batch.
    const broken = new Subject<StopReason>();
    let failure: RunEvent | undefined;
    // Fires when the batch ends: before the stream does, only a stop ends it.
    const batchEnded = new Subject<void>();
    const contents: Array<string | undefined> = [];
    // The batch runs from now on; its outcomes are kept until the response is out.
    const batch = connectable(run.batchOf(n, calls, contents, run.stop$ === undefined ? broken : merge(run.stop$, broken)).pipe(finalize(() => batchEnded.next())), {
      connector: () => new ReplaySubject<Outcome>(),
      resetOnDisconnect: false,
    });
    const reading$ = concat(of(first), rest$).pipe(
      takeUntil(batchEnded),
      tap((part) => {
        const call = writing.read(part);
        if (call !== undefined) {
          const position = writing.calls - 1;
          // Known to the journal before anything else of it: a crash from here on finds it.
          run.journal?.called(n, position, call);
          run.activityCall(n, position, call);
          calls.next(callOf(run, call, position, writing.problemAt(position), seen, scope));
        } else if ((part as { type: string }).type === 'text-delta') run.activityText(n, (part as { delta: string }).delta);
      }),
      catchError((error: unknown) => {
        failure = providerFailure(n, error);
        const { message } = toErrorInfo(error);
        broken.next({ kind: 'cancelled', why: `the model's reply failed mid-stream (${message})` });
        return EMPTY;
      }),
      tap({ complete: () => calls.complete() }),
      ignoreElements(),
    );
    const connection = batch.connect();
    return concat(
      reading$,
      defer(() => {
        const { response } = writing.response();
        // Cut short before any call came: the run ends as a turn stopped while asked does.
        if (response.toolCalls === undefined && (failure !== undefined || run.stopped !== undefined)) return finishing(run, failure ?? ending(run.stopped!));
        return respond(run, n, response, contents, batch, failure);
      }),
    ).pipe(finalize(() => connection.unsubscribe()));
  });
}

// A streamed turn's response, then the final answer, or the outcomes in call order from
// `outcomes$` (its batch, whose settle step fills `contents` with each result's JSON) and what
// comes after them. `failure` is the run's ending once they are out (a broken stream).
function respond(run: TurnRun, n: number, response: ModelResponse, contents: Array<string | undefined>, outcomes$: Observable<Outcome>, failure: RunEvent | undefined): Observable<RunEvent> {
  const event = run.responded(n, response);
  if ((response.toolCalls ?? []).length === 0) return concat(of(event), finishing(run, finalAnswer(run.plan.agent, response.text)));
  const outcomes: Outcome[] = [];
  return concat(
    of(event),
    outcomes$.pipe(
      map((outcome) => {
        outcomes.push(outcome);
        return run.tookOutcome(n, outcome, contents);
      }),
      filter((event): event is ToolOutcomeEvent => event !== undefined),
    ),
    defer(() => from(run.after(n, outcomes, failure))),
  );
}

// The run's final event, if it has not ended already; a final answer whose output schema checks
// asynchronously, once it has.
function finishing(run: TurnRun, event: RunEvent | Promise<RunEvent>): Observable<RunEvent> {
  const end = (final: RunEvent): Observable<RunEvent> => {
    const last = run.end(final);
    return last === undefined ? EMPTY : of(last);
  };
  return event instanceof Promise ? from(event).pipe(concatMap(end)) : defer(() => end(event));
}
