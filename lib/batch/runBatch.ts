// The heart: one model turn's calls -> one outcome per call, in call order.
//
//   phases, one after another -> the gate, one call at a time in call order
//   -> dispatch inside the lanes, all of a phase at once -> outcomes in finish order
//   -> reorder to call order -> settle, one at a time in call order
//
// This is the pipeline docs/concurrency.md draws with RxJS operators (concatMap over the
// phases, concatMap for the gate, a mergeMap fan-out, a scan-like reorder, concatMap to
// settle), driven here by one state machine per batch: the same steps in the same order,
// without an operator subscriber per step, which is most of what a batch costs
// (docs/performance.md).
//
// A stop (FAIL_RUN on a failure, a cancel, a deadline) tears the dispatches down, which
// gives every permit back and aborts every body in flight, then classifies each call
// that had not settled by what it had done: never dispatched, or stopped in flight.
import { asyncScheduler, from, isObservable, Observable, type ObservableInput, type Subscription, type Unsubscribable } from 'rxjs';
import { canonicalJson } from '../canonical.js';
import { ConcurrencyConfig, own, tighter } from '../config/index.js';
import { DeadlineExceededError, ToolTimedOutError, toErrorInfo, type ErrorInfo } from '../errors.js';
import { LaneTable, type LaneStore, type Permit } from '../lanes/index.js';
import { Ceilings, type Ceiling } from './ceilings.js';
import { assignDelta } from './deltas.js';
import { InvocationAbortedError, isPromiseLike, reportUnhandled } from './invocation.js';
import { failedBy, stoppedOutcome } from './stops.js';
import type { ActivitySink, BatchCall, BatchOptions, CallActivity, Delta, GateVerdict, InvokeContext, Outcome, StopReason } from './types.js';

// Where each call stands; a stop classifies by it.
// 0: not yet through the gate (the value a new status array starts with)
const QUEUED = 1; // through the gate, waiting for its lanes
const RUNNING = 2; // every lane granted, body invoked
const SETTLED = 3; // has its outcome

const noLanes: ReadonlySet<string> = new Set();
const noSteps: readonly LaneStep[] = [];

interface Entry {
  readonly call: BatchCall;
  readonly index: number;
  readonly parallelSafe: boolean;
  /** What the gate said; set only when it refused. */
  refused?: ErrorInfo;
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


function isOutcome(value: unknown): value is Outcome {
  return value !== null && typeof value === 'object' && 'kind' in value && 'index' in value && !isObservable(value) && !isPromiseLike(value);
}

// What a body is handed. Its signal and held lanes are getters (the AbortController and the
// set are made only if the body asks) and own, enumerable properties, so `{ ...context }` keeps
// them. They are defined with one shared descriptor each: a getter written in an object
// literal is a new function per object, hence a hidden class per object, which V8 keeps in old
// space until a full collection.
class CallContext implements InvokeContext {
  declare readonly signal: AbortSignal;
  declare readonly held: ReadonlySet<string>;
  readonly record: (delta: Delta) => void;
  #controller: AbortController | undefined = undefined;
  readonly #steps: readonly LaneStep[];
  readonly #sharedLanes: LaneStore;
  readonly #outer: ReadonlySet<string>;

  static readonly #signal: PropertyDescriptor = {
    enumerable: true,
    get(this: CallContext) {
      return (this.#controller ??= new AbortController()).signal;
    },
  };
  // The shared lanes this call stands in, its caller's included: a nested run does not take them again.
  static readonly #held: PropertyDescriptor = {
    enumerable: true,
    get(this: CallContext) {
      const taken = this.#steps.filter((step) => step.store === this.#sharedLanes).map((step) => step.key);
      return taken.length === 0 ? this.#outer : new Set([...this.#outer, ...taken]);
    },
  };

  constructor(record: (delta: Delta) => void, steps: readonly LaneStep[], sharedLanes: LaneStore, outer: ReadonlySet<string>) {
    this.record = record;
    this.#steps = steps;
    this.#sharedLanes = sharedLanes;
    this.#outer = outer;
    Object.defineProperty(this, 'signal', CallContext.#signal);
    Object.defineProperty(this, 'held', CallContext.#held);
  }

  /** Aborts the body's signal, if it ever asked for it. */
  abort(reason: Error): void {
    this.#controller?.abort(reason);
  }
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
  const { gate, settle, monitor, failFast = false, tenant = 'default' } = options;
  const activity: ActivitySink | undefined = typeof options.onActivity === 'function' ? { observed: true, next: options.onActivity } : options.onActivity;
  const scheduler = options.scheduler ?? asyncScheduler;
  const held = options.held ?? noLanes;
  const toolCallSeconds = options.deadline?.toolCallSeconds;

  return new Observable<Outcome>((subscriber) => {
    // True from the moment the subscriber unsubscribes (or the batch ends). Set before the
    // dispatches are torn down: a permit one of them gives back can then not start another
    // call of this same batch.
    let closing = false;
    // Every call's ceiling and deadline, ended with the batch; made when a call first needs one.
    let ceilings: Ceilings | undefined;
    const arm = (ms: number, expire: () => void): Ceiling => (ceilings ??= new Ceilings(scheduler)).arm(ms, expire);

    const shared = options.shared ?? { lanes: new LaneTable(), concurrency: turn };
    // This batch's own lanes: the turn lane, and per-tool bounds the agent narrowed for its turn.
    let local: LaneTable | undefined;
    const turnLimit = tighter(turn.maxConcurrentTools, narrower(turn.perTenant, shared.concurrency.perTenant));
    const count = calls.length;
    // Where each call stands (0, QUEUED, RUNNING, SETTLED), by index.
    const status = new Uint8Array(count);
    // The first stop wins; later ones change nothing.
    let stopped: StopReason | undefined;
    // Set by a failure under FAIL_RUN from the moment it settles until its stop takes effect.
    let stopping = false;

    // The executing side: phases one after another, the gate one call at a time.
    const entries: Entry[] = calls.map((call, index) => ({ call, index, parallelSafe: call.parallelSafe !== false }));
    // The current phase is entries [phaseStart, phaseEnd); gateNext is the next call to gate.
    let phaseEnd = 0;
    let gateNext = 0;
    // Dispatches of the current phase that have not completed.
    let open = 0;
    // Each dispatch not yet completed, by index: what a stop or an unsubscribe tears down.
    const dispatches: Array<Unsubscribable | undefined> = new Array<Unsubscribable | undefined>(count);
    // A gate answer being waited for.
    let gating: Unsubscribable | undefined;
    // True once every phase is done, or a stop ended the executing side.
    let executed = false;
    // The external stop's subscription.
    let stopSubscription: Subscription | undefined;

    // The settling side: outcomes wait here by index until every earlier call's is out.
    const ready: Array<Outcome | undefined> = new Array<Outcome | undefined>(count);
    // The next index to settle.
    let released = 0;
    // A settle answer being waited for.
    let settling: Subscription | undefined;

    const report = (entry: Entry, outcome?: Outcome['kind']): void => {
      if (activity === undefined || !activity.observed) return;
      const { call, index } = entry;
      const at = scheduler.now();
      tell(
        outcome === undefined
          ? { type: 'started', callId: call.callId, tool: call.tool, index, at }
          : { type: 'settled', callId: call.callId, tool: call.tool, index, at, outcome },
      );
    };

    // A watcher that throws must not cut a call's bookkeeping short (a permit not given back,
    // a call never completed): its error is reported the way RxJS reports a subscriber's.
    const tell = (event: CallActivity): void => {
      try {
        activity!.next(event);
      } catch (error) {
        reportUnhandled(error);
      }
    };

    const addStep = (steps: LaneStep[], store: LaneStore, key: string, limit: number | undefined, party: string): void => {
      if (limit !== undefined && !(store === shared.lanes && held.has(key))) steps.push({ store, key, limit, party });
    };
    // The lanes of a parallel-safe call depend only on its tool: worked out once per tool.
    const stepsByTool = new Map<string, readonly LaneStep[]>();
    const lanesOf = ({ call }: Entry): readonly LaneStep[] => {
      const known = call.parallelSafe === false ? undefined : stepsByTool.get(call.tool);
      if (known !== undefined) return known;
      const steps: LaneStep[] = [];
      addStep(steps, shared.lanes, `tenant:${tenant}`, shared.concurrency.perTenant, tenant);
      const turnTool = narrower(own(turn.perTool, call.tool), own(shared.concurrency.perTool, call.tool));
      if (turnLimit !== undefined || turnTool !== undefined) local ??= new LaneTable();
      if (local !== undefined) {
        addStep(steps, local, 'turn', turnLimit, '');
        addStep(steps, local, `turn-tool:${call.tool}`, turnTool, '');
      }
      addStep(steps, shared.lanes, `tool:${call.tool}`, own(shared.concurrency.perTool, call.tool), tenant);
      if (call.parallelSafe === false) addStep(steps, shared.lanes, `args:${call.tool}:${canonicalJson(call.args)}`, 1, tenant);
      else stepsByTool.set(call.tool, steps);
      return steps;
    };

    /**
     * One call: its lanes taken in order, then its body, under its ceiling and the batch's
     * deadline. The permits go back as soon as the call settles, and again (harmlessly) in
     * the teardown, so every ending gives them back. Its outcome goes to `deliver`; `done`
     * is told once the call is over (outcome out, permits back).
     */
    const dispatch = (entry: Entry, handle: { teardown?: () => void }): void => {
      const { call, index } = entry;
      const refused = call.rejected ?? entry.refused;
      const { callId, tool } = call;
      // The permits held, in the order taken.
      const permits: Permit[] = [];
      // The call's ceiling and the batch deadline's watch over it.
      let ceiling: Ceiling | undefined;
      let deadline: Ceiling | undefined;
      // What the body was handed (its AbortController, if it asked for its signal).
      let invoked: CallContext | undefined;
      // An Observable body's subscription.
      let running: Unsubscribable | undefined;
      // Ends the loop monitor's watch over this call's body.
      let unwatch: (() => void) | undefined;
      // Set once the call has its outcome (or was torn down): later answers are ignored.
      let settled = false;
      // Set once the call is over or torn down.
      let closed = false;

      // The lanes this call takes, in order (none for a call that is refused).
      const steps = refused === undefined ? lanesOf(entry) : noSteps;
      const release = (): void => {
        for (let i = permits.length - 1; i >= 0; i--) {
          // One permit failing to go back (a remote store, say) must not keep the others.
          try {
            permits[i]!.leave();
          } catch (error) {
            reportUnhandled(error);
          }
        }
      };
      const halt = (): void => {
        unwatch?.();
        ceiling?.cancel();
        deadline?.cancel();
        running?.unsubscribe();
      };
      handle.teardown = () => {
        closed = true;
        if (!settled) {
          settled = true;
          halt();
          invoked?.abort(new InvocationAbortedError('the call was stopped before it settled'));
        }
        release();
      };
      const finish = (outcome: Outcome): void => {
        if (settled) return;
        settled = true;
        halt();
        // Marked settled and delivered in one step: anything set off later (an activity watcher,
        // a lane watcher, the permits given back) may stop the batch, and the outcome is in by then.
        status[index] = SETTLED;
        deliver(outcome);
        report(entry, outcome.kind);
        const failing = failFast && outcome.kind === 'error';
        // The permits this failure gives back must not start a sibling the stop is about to end.
        if (failing) stopping = true;
        release();
        // Under FAIL_RUN, a failure stops the batch once its own outcome is in (stopping first
        // would let the classified siblings overtake it), and before this call is over, which
        // could end its phase and let the next phase's gate ask for approvals in vain.
        if (failing) stop(failedBy(outcome, outcome.error));
        if (!closed) {
          closed = true;
          over(entry);
        }
      };
      const fail = (error: unknown): void => finish({ index, callId, tool, kind: 'error', dispatched: true, error: toErrorInfo(error) });

      const start = (): void => {
        // A permit given back while the batch is being torn down can reach a waiter of this
        // same batch before its own teardown runs: such a call must not start now.
        if (stopped !== undefined || stopping || closing || settled) return;
        report(entry);
        // The report may have set off a stop: then the body must not run.
        if (stopped !== undefined || closed) return;
        status[index] = RUNNING;
        // What the call recorded; kept only if it succeeds.
        let delta: Record<string, unknown> | undefined;
        const record = (patch: Delta): void => {
          if (settled) return; // too late: the call has its outcome
          if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) {
            throw new TypeError(`record(delta) expects an object of state keys, got ${patch === null ? 'null' : typeof patch}`);
          }
          delta = assignDelta(delta ?? {}, patch);
        };
        const succeed = (result: unknown): void => finish({ index, callId, tool, kind: 'result', dispatched: true, result, delta });
        const seconds = own(turn.perToolSeconds, call.tool);
        if (seconds !== undefined) {
          ceiling = arm(seconds * 1000, () => {
            invoked?.abort(new InvocationAbortedError(`${call.tool} outran its ${seconds}s ceiling`));
            fail(new ToolTimedOutError(call.tool, seconds, call.idempotent === true));
          });
        }
        if (toolCallSeconds !== undefined) {
          deadline = arm(toolCallSeconds * 1000, () => {
            const error = new DeadlineExceededError('toolCallSeconds', toolCallSeconds, call);
            stop({ kind: 'deadline', why: error.message, error: toErrorInfo(error), callId: call.callId });
          });
        }
        const context = (invoked = new CallContext(record, steps, shared.lanes, held));
        let produced: unknown;
        try {
          if (monitor === undefined) produced = call.invoke?.(context);
          else {
            const watched = monitor.watch(call.tool, () => call.invoke?.(context), fail);
            unwatch = watched.release;
            produced = watched.value;
            // A body that stalled synchronously has failed already; its watch ended before
            // `unwatch` was known, so end it now.
            if (settled) unwatch();
          }
        } catch (error) {
          fail(error);
          return;
        }
        if (settled) {
          // Failed (a synchronous stall) or torn down while the body ran: its answer no longer
          // counts, but a Promise's rejection must still be handled, or Node ends the process.
          if (isPromiseLike(produced)) produced.then(undefined, () => undefined);
          return;
        }
        if (isObservable(produced)) {
          // Its first value is the result; an Observable that completes empty gives undefined.
          running = produced.subscribe({ next: succeed, error: fail, complete: () => succeed(undefined) });
          if (settled) running.unsubscribe();
        } else if (isPromiseLike(produced)) {
          produced.then(succeed, fail);
        } else {
          succeed(produced);
        }
      };

      if (refused !== undefined) {
        finish({ index, callId, tool, kind: 'error', dispatched: false, error: refused });
        return;
      }
      status[index] = QUEUED;
      // Takes the lanes from `first` on, in order. Each permit is stored before the next lane
      // is asked, so the teardown always knows every permit held.
      const acquire = (first: number): void => {
        for (let i = first; i < steps.length; i++) {
          const { store, key, limit, party } = steps[i]!;
          let permit: Permit;
          try {
            // Granted later: carry on from the next lane. Granted at once: the loop carries on.
            permit = store.enter(key, limit, () => permits.length > i && acquire(i + 1), party);
          } catch (error) {
            // A store that cannot take the request: the call fails, never dispatched, and gives back what it holds.
            finish({ index, callId, tool, kind: 'error', dispatched: false, error: toErrorInfo(error) });
            return;
          }
          permits.push(permit);
          // Something the grant set off (a watcher of the lanes, say) may have stopped this call
          // already, its teardown run: give back what it holds and go no further.
          if (closed) {
            release();
            return;
          }
          if (!permit.holding) {
            if (activity?.observed === true) tell({ type: 'queued', callId: call.callId, tool: call.tool, index, lane: key, at: scheduler.now() });
            return;
          }
        }
        start();
      };
      acquire(0);
    };

    // Dispatches one call of the current phase (the fan-out: nothing waits for it here).
    const launch = (entry: Entry): void => {
      const handle: { teardown?: () => void } = {};
      const teardown: Unsubscribable = { unsubscribe: () => handle.teardown?.() };
      open++;
      dispatches[entry.index] = teardown;
      dispatch(entry, handle);
    };

    // A dispatch is over: when it was its phase's last, the next phase may begin.
    const over = (entry: Entry): void => {
      if (executed) return;
      dispatches[entry.index] = undefined;
      open--;
      advance();
    };

    // What the gate said: refused calls are dispatched too, and end at once without their lanes.
    const gated = (entry: Entry, refused: ErrorInfo | undefined): void => {
      entry.refused = refused;
      launch(entry);
    };

    // Moves the executing side on as far as it can go now: through the gate, into the lanes,
    // on to the next phase. Re-entered calls (a dispatch that ends at once) return, and the
    // running loop picks up where they left off.
    let advancing = false;
    const advance = (): void => {
      if (advancing) return;
      advancing = true;
      try {
        while (!executed && stopped === undefined && !closing && gating === undefined) {
          if (gateNext < phaseEnd) {
            // A batch that is stopping asks nobody about calls it will not dispatch.
            if (stopping) return;
            const entry = entries[gateNext++]!;
            if (gate === undefined || entry.call.rejected !== undefined) launch(entry);
            else ask(entry);
          } else if (open === 0) {
            if (phaseEnd === count) {
              executed = true;
              stopSubscription?.unsubscribe();
              pump();
              return;
            }
            // The next phase: consecutive parallel-safe calls, or one call that is not.
            gateNext = phaseEnd;
            phaseEnd = entries[phaseEnd]!.parallelSafe ? nextUnsafe(phaseEnd) : phaseEnd + 1;
          } else {
            return; // waiting for this phase's dispatches
          }
        }
      } finally {
        advancing = false;
      }
    };
    const nextUnsafe = (from: number): number => {
      let i = from;
      while (i < count && entries[i]!.parallelSafe) i++;
      return i;
    };

    // The gate for one call: a plain answer is taken at once; a Promise or an Observable is
    // waited for, the next call's gate behind it. A gate that throws or rejects refuses the
    // call with its message.
    const ask = (entry: Entry): void => {
      let answer: unknown;
      try {
        answer = gate!(entry.call, entry.index);
      } catch (error) {
        gated(entry, toErrorInfo(error));
        return;
      }
      if (!isObservable(answer) && !isPromiseLike(answer)) {
        gated(entry, verdictError(answer));
        return;
      }
      let answered = false;
      const take = (refused: ErrorInfo | undefined): void => {
        if (answered) return;
        answered = true;
        subscription?.unsubscribe();
        gating = undefined;
        gated(entry, refused);
        advance();
      };
      let subscription: Subscription | undefined;
      if (isObservable(answer)) {
        const verdicts = answer;
        gating = { unsubscribe: () => ((answered = true), subscription?.unsubscribe()) };
        subscription = verdicts.subscribe({
          next: (verdict) => take(verdictError(verdict)),
          error: (error: unknown) => take(toErrorInfo(error)),
          complete: () => take(undefined),
        });
        if (answered) subscription.unsubscribe();
      } else {
        gating = { unsubscribe: () => void (answered = true) };
        (answer as PromiseLike<GateVerdict>).then(
          (verdict) => take(verdictError(verdict)),
          (error: unknown) => take(toErrorInfo(error)),
        );
      }
    };

    // The stop: the executing side is torn down (permits back, bodies aborted), then every
    // call without an outcome gets one, by what it had done.
    const stop = (reason: StopReason): void => {
      if (stopped !== undefined) return;
      stopped = reason;
      if (executed) return;
      executed = true;
      stopSubscription?.unsubscribe();
      tearDownExecuting();
      for (const entry of entries) {
        const at = status[entry.index];
        if (at === SETTLED) continue;
        status[entry.index] = SETTLED;
        const outcome = stoppedOutcome(entry.call, entry.index, at === RUNNING, reason);
        report(entry, outcome.kind);
        ready[entry.index] = outcome;
      }
      pump();
    };
    const tearDownExecuting = (): void => {
      for (let i = 0; i < count; i++) {
        const dispatched = dispatches[i];
        if (dispatched !== undefined) {
          dispatches[i] = undefined;
          dispatched.unsubscribe();
        }
      }
      gating?.unsubscribe();
      gating = undefined;
    };

    // An outcome in finish order: it waits for every earlier call's.
    const deliver = (outcome: Outcome): void => {
      ready[outcome.index] = outcome;
      pump();
    };

    // Moves the settling side on: each outcome whose turn has come goes through `settle`, one
    // at a time and in call order, then out. Re-entered calls return; the running loop goes on.
    let pumping = false;
    const pump = (): void => {
      if (pumping) return;
      pumping = true;
      try {
        while (settling === undefined && released < count && !subscriber.closed) {
          const outcome = ready[released];
          if (outcome === undefined) break;
          ready[released++] = undefined;
          if (settle === undefined) {
            subscriber.next(outcome);
            continue;
          }
          let answer: Outcome | ObservableInput<Outcome>;
          try {
            answer = settle(outcome, calls[outcome.index]!);
          } catch (error) {
            subscriber.error(error);
            return;
          }
          if (isOutcome(answer)) {
            settledOut(answer);
            continue;
          }
          let finished = false;
          const subscription = from(answer).subscribe({
            next: settledOut,
            error: (error: unknown) => subscriber.error(error),
            complete: () => {
              finished = true;
              settling = undefined;
              pump();
            },
          });
          if (!finished) settling = subscription;
        }
        if (executed && settling === undefined && !subscriber.closed) {
          // Every call has its outcome by now; one missing is a bug, and it must not pass silently.
          if (released === count) subscriber.complete();
          else subscriber.error(new Error(`internal: the batch ended with call #${released} unsettled`));
        }
      } finally {
        pumping = false;
      }
    };
    // Under FAIL_RUN an outcome a settle step turned into a failure (a rejected output) stops the
    // batch too, once that outcome has gone out.
    const settledOut = (outcome: Outcome): void => {
      subscriber.next(outcome);
      if (failFast && outcome.kind === 'error' && outcome.stopped === undefined) stop(failedBy(outcome, outcome.error));
    };

    subscriber.add(() => {
      closing = true;
      ceilings?.close();
      settling?.unsubscribe();
      stopSubscription?.unsubscribe();
      tearDownExecuting();
    });

    // A stop from outside: a stop that has already happened stops the batch before any call is asked for.
    if (options.stop$ !== undefined) {
      const subscription = options.stop$.subscribe((reason) => stop(reason));
      if (executed) subscription.unsubscribe();
      else stopSubscription = subscription;
    }
    advance();
    // An empty batch, or one stopped before it began, ends here.
    pump();
  });
}
