// The heart: one model turn's calls -> one outcome per call, in call order.
//
//   phases (concatMap) -> gate, one call at a time (concatMap) -> dispatch inside the lanes (mergeMap)
//   -> outcomes in finish order -> reorder -> settle, one at a time in call order (concatMap)
//
// A stop (FAIL_RUN on a failure, a cancel, a deadline) tears the dispatches down, which
// gives every permit back and aborts every body in flight, then classifies each call
// that had not settled by what it had done: never dispatched, or stopped in flight.
import {
  asyncScheduler,
  concat,
  concatMap,
  defer,
  EMPTY,
  from,
  identity,
  map,
  merge,
  mergeMap,
  NEVER,
  Observable,
  of,
  Subject,
  takeUntil,
  tap,
  throwError,
  timeout,
  catchError,
  type MonoTypeOperatorFunction,
  type ObservableInput,
} from 'rxjs';
import { canonicalJson } from '../canonical.js';
import { ConcurrencyConfig, own, tighter } from '../config/index.js';
import { DeadlineExceededError, ToolTimedOutError, toErrorInfo, type ErrorInfo } from '../errors.js';
import { inLane, LaneTable, type LaneStore } from '../lanes/index.js';
import { assignDelta } from './deltas.js';
import { inCallOrder } from './inCallOrder.js';
import { invocation } from './invocation.js';
import { toPhases } from './phases.js';
import { failedBy, stoppedOutcome } from './stops.js';
import type { BatchCall, BatchOptions, Delta, GateVerdict, Outcome, StopReason } from './types.js';

// Where each call stands; a stop classifies by it.
// 0: not yet through the gate (the value a new status array starts with)
const QUEUED = 1; // through the gate, waiting for its lanes
const RUNNING = 2; // every lane granted, body invoked
const SETTLED = 3; // has its outcome

const noLanes: ReadonlySet<string> = new Set();

interface Entry {
  readonly call: BatchCall;
  readonly index: number;
  readonly parallelSafe: boolean;
}

interface LaneStep {
  readonly store: LaneStore;
  readonly key: string;
  readonly limit: number;
  readonly party: string;
}

// A bound the turn adds on top of a shared lane: only when it is tighter than the shared one.
function narrower(turn: number | undefined, shared: number | undefined): number | undefined {
  return turn !== undefined && (shared === undefined || turn < shared) ? turn : undefined;
}

function verdictError(verdict: unknown): ErrorInfo | undefined {
  if (verdict === undefined || verdict === null) return undefined;
  if (typeof verdict === 'string') return { name: 'ToolRejectedError', message: verdict };
  return toErrorInfo(verdict);
}

/**
 * Runs one turn's calls concurrently inside their lanes and emits one outcome per call,
 * in call order, as soon as each and every earlier call have settled.
 *
 * Lanes are taken in one fixed order: tenant, turn, tool (then the identical-arguments
 * lane of a call that is not parallel-safe). A call's `perToolSeconds` ceiling runs from
 * dispatch, not from queueing. The Observable is cold: each subscription is a new batch.
 *
 * ## Example
 * ```ts
 * const calls = ['a', 'b', 'c', 'd'].map((q) => ({ callId: q, tool: 'lookup', invoke: () => fetchIt(q) }));
 * runBatch(calls, { concurrency: new ConcurrencyConfig({ maxConcurrentTools: 2 }) })
 *   .subscribe((o) => console.log(o.callId, o.kind));
 * // a result, b result, c result, d result: in call order, whichever finished first
 * ```
 */
export function runBatch(calls: readonly BatchCall[], options: BatchOptions = {}): Observable<Outcome> {
  const turn = options.concurrency ?? new ConcurrencyConfig();
  if (!(turn instanceof ConcurrencyConfig)) throw new TypeError('runBatch: options.concurrency must be a ConcurrencyConfig');
  const { gate, settle, onActivity, failFast = false, tenant = 'default' } = options;
  const scheduler = options.scheduler ?? asyncScheduler;
  const held = options.held ?? noLanes;
  const toolCallSeconds = options.deadline?.toolCallSeconds;

  return defer(() => {
    const shared = options.shared ?? { lanes: new LaneTable(), concurrency: turn };
    // This batch's own lanes: the turn lane, and per-tool bounds the agent narrowed for its turn.
    const local = new LaneTable();
    // Where each call stands (PENDING, QUEUED, RUNNING, SETTLED), by index.
    const status = new Uint8Array(calls.length);
    // The first stop wins; later ones change nothing.
    let stopped: StopReason | undefined;
    // True from the moment the subscriber unsubscribes.
    let closing = false;
    const stopSignal = new Subject<void>();
    const stop = (reason: StopReason): void => {
      if (stopped !== undefined) return;
      stopped = reason;
      stopSignal.next();
    };

    // Under FAIL_RUN, a failure stops the batch, but only once its own outcome has gone all
    // the way downstream: stopping first would let the classified siblings overtake it.
    const thenStopIfFailed = mergeMap((outcome: Outcome) =>
      failFast && outcome.kind === 'error' && outcome.stopped === undefined
        ? concat(
            of(outcome),
            defer(() => {
              stop(failedBy(outcome, outcome.error));
              return EMPTY;
            }),
          )
        : of(outcome),
    );

    const report = (entry: Entry, outcome?: Outcome['kind']): void => {
      if (onActivity === undefined) return;
      const { call, index } = entry;
      const at = scheduler.now();
      onActivity(
        outcome === undefined
          ? { type: 'started', callId: call.callId, tool: call.tool, index, at }
          : { type: 'settled', callId: call.callId, tool: call.tool, index, at, outcome },
      );
    };

    const lanesOf = ({ call }: Entry): LaneStep[] => {
      const steps: LaneStep[] = [];
      const add = (store: LaneStore, key: string, limit: number | undefined, party: string): void => {
        if (limit !== undefined && !(store === shared.lanes && held.has(key))) steps.push({ store, key, limit, party });
      };
      add(shared.lanes, `tenant:${tenant}`, shared.concurrency.perTenant, tenant);
      add(local, 'turn', tighter(turn.maxConcurrentTools, narrower(turn.perTenant, shared.concurrency.perTenant)), '');
      add(local, `turn-tool:${call.tool}`, narrower(own(turn.perTool, call.tool), own(shared.concurrency.perTool, call.tool)), '');
      add(shared.lanes, `tool:${call.tool}`, own(shared.concurrency.perTool, call.tool), tenant);
      if (call.parallelSafe === false) add(shared.lanes, `args:${call.tool}:${canonicalJson(call.args)}`, 1, tenant);
      return steps;
    };

    // The gate: serial and in call order. A call with rejected arguments skips it.
    const passGate = (entry: Entry): Observable<{ entry: Entry; refused?: ErrorInfo }> => {
      const { call, index } = entry;
      if (call.rejected !== undefined) return of({ entry, refused: call.rejected });
      if (gate === undefined) return of({ entry });
      return invocation(() => gate(call, index) as GateVerdict | PromiseLike<GateVerdict>).pipe(
        map((verdict) => ({ entry, refused: verdictError(verdict) })),
        catchError((error: unknown) => of({ entry, refused: toErrorInfo(error) })),
      );
    };

    const invoke = (entry: Entry, steps: readonly LaneStep[]): Observable<Outcome> =>
      defer(() => {
        const { call, index } = entry;
        // A permit given back while the batch is being torn down can reach a waiter of this
        // same batch before its own teardown runs: such a call must not start now.
        if (stopped !== undefined || closing) return NEVER;
        status[index] = RUNNING;
        report(entry);
        // What the call recorded; kept only if it succeeds.
        let delta: Record<string, unknown> | undefined;
        const record = (patch: Delta): void => {
          if (status[index] !== RUNNING) return; // too late: the call has its outcome
          if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) {
            throw new TypeError(`record(delta) expects an object of state keys, got ${patch === null ? 'null' : typeof patch}`);
          }
          delta = assignDelta(delta ?? {}, patch);
        };
        let callHeld = held;
        const takenShared = steps.filter((step) => step.store === shared.lanes);
        if (takenShared.length > 0) callHeld = new Set([...held, ...takenShared.map((step) => step.key)]);
        const seconds = own(turn.perToolSeconds, call.tool);
        const ceiling: MonoTypeOperatorFunction<unknown> =
          seconds === undefined
            ? identity
            : timeout({
                first: seconds * 1000,
                scheduler,
                with: () => throwError(() => new ToolTimedOutError(call.tool, seconds, call.idempotent === true)),
              });
        return invocation((signal) => call.invoke?.({ signal, record, held: callHeld })).pipe(
          ceiling,
          map((result): Outcome => ({ kind: 'result', index, callId: call.callId, tool: call.tool, dispatched: true, result, delta })),
        );
      }).pipe(
        catchError((error: unknown) =>
          of<Outcome>({ kind: 'error', index: entry.index, callId: entry.call.callId, tool: entry.call.tool, dispatched: true, error: toErrorInfo(error) }),
        ),
      );

    // A call in flight longer than toolCallSeconds stops the whole batch.
    const underDeadline = (entry: Entry, work$: Observable<Outcome>): Observable<Outcome> => {
      if (toolCallSeconds === undefined) return work$;
      return new Observable<Outcome>((subscriber) => {
        const { call } = entry;
        const timer = scheduler.schedule(() => {
          const error = new DeadlineExceededError('toolCallSeconds', toolCallSeconds, call);
          stop({ kind: 'deadline', why: error.message, error: toErrorInfo(error), callId: call.callId });
        }, toolCallSeconds * 1000);
        const subscription = work$.subscribe(subscriber);
        return () => {
          timer.unsubscribe();
          subscription.unsubscribe();
        };
      });
    };

    const dispatch = ({ entry, refused }: { entry: Entry; refused?: ErrorInfo }): Observable<Outcome> => {
      const { call, index } = entry;
      if (refused !== undefined) {
        const outcome: Outcome = { kind: 'error', index, callId: call.callId, tool: call.tool, dispatched: false, error: refused };
        return of(outcome).pipe(thenStopIfFailed);
      }
      return defer(() => {
        status[index] = QUEUED;
        const steps = lanesOf(entry);
        let work$ = underDeadline(entry, invoke(entry, steps));
        // Wrap innermost first, so the outermost (first taken) lane is the tenant's.
        for (let i = steps.length - 1; i >= 0; i--) {
          const { store, key, limit, party } = steps[i]!;
          work$ = work$.pipe(
            inLane<Outcome>(store, key, limit, {
              party,
              onQueued:
                onActivity &&
                ((lane) => onActivity({ type: 'queued', callId: call.callId, tool: call.tool, index, lane, at: scheduler.now() })),
            }),
          );
        }
        return work$;
      }).pipe(thenStopIfFailed);
    };


    const entries: Entry[] = calls.map((call, index) => ({ call, index, parallelSafe: call.parallelSafe !== false }));
    const stopNotifier$ = options.stop$ === undefined ? stopSignal : merge(stopSignal, options.stop$.pipe(tap(stop)));

    const executed$ = from(toPhases(entries)).pipe(
      concatMap((phase) => from(phase).pipe(concatMap(passGate), mergeMap(dispatch))),
      tap((outcome) => {
        status[outcome.index] = SETTLED;
        report(entries[outcome.index]!, outcome.kind);
      }),
      takeUntil(stopNotifier$),
    );

    // After a stop: every call without an outcome gets one, by what it had done.
    const classified$ = defer(() => {
      const outcomes: Outcome[] = [];
      for (const entry of entries) {
        const at = status[entry.index];
        if (at === SETTLED) continue;
        status[entry.index] = SETTLED;
        const outcome = stoppedOutcome(entry.call, entry.index, at === RUNNING, stopped ?? { kind: 'cancelled', why: 'the batch was stopped' });
        report(entry, outcome.kind);
        outcomes.push(outcome);
      }
      return from(outcomes);
    });

    const outcomes$ = concat(executed$, classified$).pipe(
      inCallOrder(calls.length),
      settle === undefined ? identity : concatMap((outcome) => from(toInput(settle(outcome, calls[outcome.index]!)))),
      // An outcome a settle step turned into a failure (a rejected output) also stops the batch under FAIL_RUN.
      thenStopIfFailed,
    );
    return new Observable<Outcome>((subscriber) => {
      // Registered before subscribing, so it runs before the dispatches are torn down.
      subscriber.add(() => {
        closing = true;
      });
      outcomes$.subscribe(subscriber);
    });
  });
}

// A settle step may return the outcome itself, or a Promise or Observable of it.
function toInput(value: Outcome | ObservableInput<Outcome>): ObservableInput<Outcome> {
  return value !== null && typeof value === 'object' && 'kind' in value && 'index' in value ? [value] : value;
}
