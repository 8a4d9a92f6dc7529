// OpenTelemetry spans for runs, by the GenAI semantic conventions: an `invoke_agent` span per
// run, a `chat` span per model turn, an `execute_tool` span per call (with the time it waited in
// its lanes, and which lanes held it). Built beside the engine from what it reports already (the
// runner's call activity, the run's transcript, the provider's answers), so the batch and the turn
// loop know nothing of tracing, and a runner without a tracer pays nothing for it.
// @opentelemetry/api is loaded only when a tracer is given: the library imports without it.
import { createRequire } from 'node:module';
import type * as otel from '@opentelemetry/api';
import { isObservable, Observable, type Observer, type SchedulerLike } from 'rxjs';
import { isPromiseLike } from '../batch/index.js';
import { ConfigError, toErrorInfo } from '../errors.js';
import type { RunEvent } from './events.js';
import type { ModelProvider, ModelRequest } from './model.js';
import type { RunnerParts, RunPlan } from './parts.js';
import type { RunnerActivity, RunParent } from './types.js';

import { CallSpan, ChatSpan, type Usage } from './traceSpans.js';
import { TracingAttributes, TracingEvents } from './tracingNames.js';

export { TracingAttributes, TracingEvents };

// Loaded once, on the first runner made with a tracer. Node's `import` of the package reads its
// CommonJS build too (its exports map has no `import` condition), so this is the same module a
// caller's `import { trace } from '@opentelemetry/api'` gets.
let api: typeof otel | undefined;
function otelApi(): typeof otel {
  if (api === undefined) {
    try {
      api = createRequire(import.meta.url)('@opentelemetry/api') as typeof otel;
    } catch (error) {
      // Node's message goes on with the require stack: its first line says it all.
      throw new ConfigError('tracer', `a tracer needs @opentelemetry/api installed beside agent-lanes (${toErrorInfo(error).message.split('\n')[0]})`);
    }
  }
  return api;
}

/** A runner's tracing: its tracer, and the runs it is tracing now, by id, fed from the runner's activity. */
export class Tracing {
  readonly api: typeof otel;
  // Runs traced now, by run id: their call activity goes to them, and a nested run finds its caller's span.
  private readonly runs = new Map<string, RunTrace>();

  constructor(
    readonly tracer: otel.Tracer,
    readonly scheduler: SchedulerLike,
    activity: { subscribe(observer: Partial<Observer<RunnerActivity>>): unknown },
  ) {
    if (tracer === null || typeof tracer !== 'object' || typeof tracer.startSpan !== 'function') {
      throw new ConfigError('tracer', `tracer must be an OpenTelemetry Tracer (startSpan), got ${tracer === null ? 'null' : typeof tracer}`);
    }
    this.api = otelApi();
    // For as long as the runner lives: the runner's activity has no end.
    activity.subscribe({
      next: (event) => {
        if (event.type !== 'run-started' && event.type !== 'run-ended' && event.type !== 'text-delta' && event.type !== 'lane-store') this.runs.get(event.runId)?.activity(event);
      },
    });
  }

  /** A run's trace, before the run is made: the run takes `trace.parts`, whose provider is traced. */
  open(parts: RunnerParts, plan: RunPlan): RunTrace {
    return new RunTrace(this, parts, plan);
  }

  /** @internal */ add(runId: string, trace: RunTrace): void {
    this.runs.set(runId, trace);
  }

  /** @internal */ remove(runId: string): void {
    this.runs.delete(runId);
  }

  /** The span of a call running now (a nested run's caller), if it is traced. */
  callSpan(parent: RunParent): otel.Span | undefined {
    return this.runs.get(parent.runId)?.runningCall(parent.callId);
  }
}

type CallEvent = Exclude<RunnerActivity, { type: 'run-started' } | { type: 'run-ended' } | { type: 'text-delta' } | { type: 'lane-store' }>;

/**
 * One run's spans. Its invoke_agent span starts when the run starts (under the calling tool's
 * span for a nested run) and ends with the run's final event, or when the run is left. Its calls'
 * spans are made from the runner's activity and end with their transcript event (or, if the run
 * is left, at once); every span it started is ended on every ending.
 */
export class RunTrace {
  readonly api: typeof otel;
  /** What the run is made with: the runner's parts, with a traced provider. */
  readonly parts: RunnerParts;
  private span: otel.Span | undefined = undefined;
  // The run span's context: the parent of its chat and execute_tool spans.
  private context: otel.Context | undefined = undefined;
  private runId = '';
  // The calls of the current turn, by index.
  private turn = 0;
  private calls: Array<CallSpan | undefined> = [];
  // The calls whose bodies run now, by id (a turn dispatches one call per id): a body's span, and
  // a nested run's caller, found without a search.
  private readonly running = new Map<string, CallSpan>();
  // The call whose settled activity came last: its transcript event comes next, and ends its span.
  private awaiting: CallSpan | undefined = undefined;
  // Model requests not yet answered, and how many there were.
  private readonly chats = new Set<ChatSpan>();
  private requests = 0;
  // The tokens every model turn reported, summed for the run.
  private inputTokens: number | undefined = undefined;
  private outputTokens: number | undefined = undefined;
  // The run was left by its subscriber; its final event went out; its spans were all ended.
  private left = false;
  private ended = false;

  constructor(
    private readonly tracing: Tracing,
    parts: RunnerParts,
    private readonly plan: RunPlan,
  ) {
    this.api = tracing.api;
    const provider = parts.provider;
    const traced: ModelProvider = { respond: (request, signal) => this.chat(provider, request, signal) };
    this.parts = { ...parts, provider: traced };
  }

  now(): number {
    return this.tracing.scheduler.now();
  }

  /** The run was made (its id known): its span starts, under its caller's span if it is nested. */
  begin(runId: string): void {
    const { api, plan } = this;
    this.runId = runId;
    const active = api.context.active();
    const caller = plan.nesting === undefined ? undefined : this.tracing.callSpan(plan.nesting.parent);
    const parent = caller === undefined ? active : api.trace.setSpan(active, caller);
    const span = this.tracing.tracer.startSpan(
      `invoke_agent ${plan.agent.name}`,
      {
        kind: api.SpanKind.INTERNAL,
        startTime: this.now(),
        attributes: {
          [TracingAttributes.OPERATION]: 'invoke_agent',
          [TracingAttributes.AGENT_NAME]: plan.agent.name,
          [TracingAttributes.REQUEST_MODEL]: plan.agent.model,
          [TracingAttributes.RUN_ID]: runId,
          [TracingAttributes.TENANT]: plan.tenant,
        },
      },
      parent,
    );
    this.span = span;
    this.context = api.trace.setSpan(parent, span);
    this.tracing.add(runId, this);
  }

  /**
   * The run's transcript with its spans kept up to date: each call's span ends with its event, the
   * run's with its final event; a run left (or failing) ends every span still open.
   */
  follow(run$: Observable<RunEvent>): Observable<RunEvent> {
    return new Observable<RunEvent>((subscriber) => {
      // Added first, so it runs first when the run is left: before the batch classifies the calls it stops.
      subscriber.add(() => this.leaving());
      subscriber.add(
        run$.subscribe({
          next: (event) => {
            this.event(event);
            subscriber.next(event);
          },
          error: (error: unknown) => subscriber.error(error),
          complete: () => subscriber.complete(),
        }),
      );
      subscriber.add(() => this.close());
    });
  }

  /** Runs a call's body with its span as the active context, so spans the body makes nest under it. */
  within(callId: string, body: () => unknown): unknown {
    const span = this.runningCall(callId);
    return span === undefined || this.context === undefined ? body() : this.api.context.with(this.api.trace.setSpan(this.context, span), body);
  }

  /** @internal The span of this run's call `callId` while its body runs. */
  runningCall(callId: string): otel.Span | undefined {
    return this.running.get(callId)?.span;
  }

  /** @internal A call's scheduling event, from the runner's activity. */
  activity(event: CallEvent): void {
    if (this.ended) return;
    if (event.turn !== this.turn) this.nextTurn(event.turn);
    const call = this.calls[event.index] ?? this.callOf(event);
    if (!call.open) return;
    const { span } = call;
    switch (event.type) {
      case 'queued':
        call.queuedAt ??= event.at;
        (call.lanes ??= []).push(event.lane);
        span.addEvent(TracingEvents.QUEUED, { [TracingAttributes.LANE]: event.lane }, event.at);
        return;
      case 'started':
        call.started = true;
        this.running.set(call.callId, call);
        span.addEvent(TracingEvents.STARTED, event.at);
        this.waited(call, event.at);
        return;
      case 'ended':
        call.endedAt = event.at;
        if (this.running.get(call.callId) === call) this.running.delete(call.callId);
        if (event.overrun) span.setAttribute(TracingAttributes.OVERRUN, true);
        if (this.left) call.stoppedByLeaving = true;
        if (!call.started) this.waited(call, event.at);
        return;
      case 'released':
        span.addEvent(TracingEvents.RELEASED, { [TracingAttributes.ABANDONED]: event.abandoned }, event.at);
        return;
      case 'settled':
        call.kind = event.outcome;
        // A run being left emits no more events: what the activity said is all there is.
        if (this.left) this.endCall(call, ...this.fromKind(call));
        else this.awaiting = call;
        return;
    }
  }

  private callOf(event: CallEvent): CallSpan {
    const { api } = this;
    const span = this.tracing.tracer.startSpan(
      `execute_tool ${event.tool}`,
      {
        kind: api.SpanKind.INTERNAL,
        startTime: event.at,
        attributes: {
          [TracingAttributes.OPERATION]: 'execute_tool',
          [TracingAttributes.TOOL_NAME]: event.tool,
          [TracingAttributes.TOOL_CALL_ID]: event.callId,
          [TracingAttributes.TOOL_TYPE]: 'function',
          [TracingAttributes.TURN]: event.turn,
          [TracingAttributes.CALL_INDEX]: event.index,
        },
      },
      this.context,
    );
    const call = new CallSpan(span, event.callId);
    this.calls[event.index] = call;
    return call;
  }

  // The time a call waited in its lanes, and which held it, as it starts (or ends, never started).
  private waited(call: CallSpan, at: number): void {
    const { span, queuedAt, lanes } = call;
    span.setAttribute(TracingAttributes.LANE_WAIT_MS, queuedAt === undefined ? 0 : at - queuedAt);
    if (lanes === undefined) return;
    span.setAttribute(TracingAttributes.LANES_QUEUED_ON, lanes);
    span.setAttribute(TracingAttributes.LANE_HELD_BY, lanes[lanes.length - 1]!);
  }

  private nextTurn(turn: number): void {
    // Every call of a turn has its event before the next turn starts; anything left is ended as it stands.
    for (const call of this.calls) if (call?.open) this.endCall(call, ...this.fromKind(call));
    this.turn = turn;
    this.calls = [];
    this.running.clear();
    this.awaiting = undefined;
  }

  /** @internal An event of the run's transcript. */
  event(event: RunEvent): void {
    switch (event.type) {
      case 'TOOL_RESULT':
      case 'TOOL_ERROR':
      case 'TOOL_INDETERMINATE': {
        const call = this.awaiting;
        this.awaiting = undefined;
        if (call === undefined || call.callId !== event.callId || !call.open) return;
        if (event.type === 'TOOL_RESULT') this.endCall(call, undefined, undefined, undefined);
        else if (event.type === 'TOOL_INDETERMINATE') this.endCall(call, 'indeterminate', 'indeterminate', event.message);
        else {
          const { name, message } = event.error;
          const stop = name === 'CallStoppedError' ? (call.started ? 'safe_to_call_again' : 'never_dispatched') : undefined;
          this.endCall(call, name, stop, message);
        }
        return;
      }
      case 'RUN_COMPLETED':
        this.endRun('completed', undefined, undefined);
        return;
      case 'RUN_FAILED':
        this.endRun('failed', event.error.name, event.error.message);
        return;
      case 'RUN_CANCELLED':
        this.endRun('cancelled', 'cancelled', event.reason);
        return;
      default:
        return;
    }
  }

  // What a call's span says when no transcript event came for it (the run was left): its kind,
  // and, if the leaving stopped it, its stop class. A failure the batch had decided before gives
  // no name here: `_OTHER`, as the conventions say for an error type not known.
  private fromKind(call: CallSpan): [string | undefined, string | undefined, string | undefined] {
    switch (call.kind) {
      case 'result':
        return [undefined, undefined, undefined];
      case 'indeterminate':
        return ['indeterminate', 'indeterminate', 'the run was left while the call was in flight'];
      case 'error':
        if (call.stoppedByLeaving) return ['CallStoppedError', call.started ? 'safe_to_call_again' : 'never_dispatched', 'the run was left before the call ended'];
        return ['_OTHER', undefined, undefined];
      default:
        return ['cancelled', call.started ? 'indeterminate' : 'never_dispatched', 'the run was left before the call ended'];
    }
  }

  private endCall(call: CallSpan, errorType: string | undefined, stop: string | undefined, message: string | undefined): void {
    if (!call.open) return;
    call.open = false;
    const { span } = call;
    span.setAttribute(TracingAttributes.OUTCOME, call.kind ?? (errorType === undefined ? 'result' : 'error'));
    span.setAttribute(TracingAttributes.DISPATCHED, call.started);
    if (stop !== undefined) span.setAttribute(TracingAttributes.STOP_CLASS, stop);
    if (errorType !== undefined) {
      span.setAttribute(TracingAttributes.ERROR_TYPE, errorType);
      span.setStatus({ code: this.api.SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) });
    }
    // The call's time is until its outcome was decided, not until it went out in call order.
    span.end(call.endedAt ?? this.now());
  }

  private endRun(status: 'completed' | 'failed' | 'cancelled', errorType: string | undefined, message: string | undefined): void {
    const { span } = this;
    if (span === undefined || this.ended) return;
    this.ended = true;
    span.setAttribute(TracingAttributes.RUN_STATUS, status);
    if (this.inputTokens !== undefined) span.setAttribute(TracingAttributes.INPUT_TOKENS, this.inputTokens);
    if (this.outputTokens !== undefined) span.setAttribute(TracingAttributes.OUTPUT_TOKENS, this.outputTokens);
    if (errorType !== undefined) {
      span.setAttribute(TracingAttributes.ERROR_TYPE, errorType);
      span.setStatus({ code: this.api.SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) });
    }
    span.end(this.now());
  }

  // The run's subscriber is leaving: calls the batch now stops were stopped by the leaving.
  private leaving(): void {
    if (!this.ended) this.left = true;
  }

  // The run is over, however it ended: every span still open ends, and the run is forgotten.
  private close(): void {
    for (const call of this.calls) if (call?.open) this.endCall(call, ...this.fromKind(call));
    for (const chat of [...this.chats]) chat.left();
    this.endRun('cancelled', 'cancelled', 'the run was left before it ended');
    this.calls = [];
    this.running.clear();
    this.awaiting = undefined;
    this.tracing.remove(this.runId);
  }

  /** @internal A model turn's usage, added to the run's. */
  usage(usage: Usage): void {
    if (usage.input !== undefined) this.inputTokens = (this.inputTokens ?? 0) + usage.input;
    if (usage.output !== undefined) this.outputTokens = (this.outputTokens ?? 0) + usage.output;
  }

  /** @internal */ chatEnded(chat: ChatSpan): void {
    this.chats.delete(chat);
  }

  // One model request, inside its chat span: the provider's answer passes through as it came (a
  // Promise, an Observable, a value), watched for its ending.
  private chat(provider: ModelProvider, request: ModelRequest, signal: AbortSignal): Answer {
    const { api } = this;
    const turn = ++this.requests;
    const span = this.tracing.tracer.startSpan(
      `chat ${request.model}`,
      {
        kind: api.SpanKind.CLIENT,
        startTime: this.now(),
        attributes: { [TracingAttributes.OPERATION]: 'chat', [TracingAttributes.REQUEST_MODEL]: request.model, [TracingAttributes.AGENT_NAME]: request.agent, [TracingAttributes.TURN]: turn },
      },
      this.context,
    );
    const chat = new ChatSpan(this, span);
    this.chats.add(chat);
    let produced: unknown;
    try {
      produced = api.context.with(api.trace.setSpan(this.context ?? api.context.active(), span), () => provider.respond(request, signal));
    } catch (error) {
      chat.fail(error);
      throw error;
    }
    if (isObservable(produced)) {
      const answer$ = produced;
      return new Observable<unknown>((subscriber) => {
        subscriber.add(() => chat.left());
        subscriber.add(
          answer$.subscribe({
            next: (value) => {
              chat.saw(value);
              subscriber.next(value);
            },
            error: (error: unknown) => {
              chat.fail(error);
              subscriber.error(error);
            },
            complete: () => {
              chat.done();
              subscriber.complete();
            },
          }),
        );
      }) as Answer;
    }
    if (isPromiseLike(produced)) {
      // A provider that ignores its signal may never settle: the run's stop ends the span.
      const abandoned = (): void => chat.left();
      signal.addEventListener('abort', abandoned, { once: true });
      return Promise.resolve(produced).then(
        (value) => {
          signal.removeEventListener('abort', abandoned);
          chat.saw(value);
          chat.done();
          return value;
        },
        (error: unknown) => {
          signal.removeEventListener('abort', abandoned);
          chat.fail(error);
          throw error;
        },
      ) as Answer;
    }
    chat.saw(produced);
    chat.done();
    return produced as Answer;
  }
}

/** What a provider's respond gives back, whatever its kind. */
type Answer = ReturnType<ModelProvider['respond']>;
