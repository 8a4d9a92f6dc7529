// One run's spans: its invoke_agent span, its calls' execute_tool spans (from the turns' call
// activity and the run's transcript), the usage its turns reported. A tracer that throws stops
// the run's tracing, told once, and changes nothing else (`broke`).
import type { OtelApi, OtelAttributes, OtelContext, OtelSpan, OtelTracer } from './otelShapes.js';
import { Observable } from 'rxjs';
import type { CallActivity, Outcome } from '../../batch/index.js';
import { stopClassOf } from '../../stopClass.js';
import type { RunEvent } from '../events.js';
import type { RunnerParts, RunPlan } from '../parts.js';
import { providerOf, tracedProvider } from './tracedProvider.js';
import { CallSpan, type ChatSpan, type SpanUsage } from './traceSpans.js';
import type { RunParent } from '../types.js';
import { TracingAttributes, TracingEvents } from './tracingNames.js';

/** What a run's trace needs of the runner's tracing (tracing.ts is the one there is). */
export interface TraceRoot {
  readonly api: OtelApi;
  readonly tracer: OtelTracer;
  readonly scheduler: { now(): number };
  /** The span of a call running now (a nested run's caller), if it is traced. */
  callSpan(parent: RunParent): OtelSpan | undefined;
  /** The run is traced now (a nested run finds its caller's span), and no longer. */
  add(runId: string, trace: RunTrace): void;
  remove(runId: string, trace: RunTrace): void;
  /** A tool's description, for its execute_tool spans. */
  description(tool: string): string | undefined;
  /** The run's tracer threw: said once. */
  failed(runId: string, parent: RunParent | undefined, error: unknown): void;
}

/**
 * One run's spans. Its invoke_agent span starts when the run starts (under the calling tool's
 * span for a nested run) and ends with the run's final event, or when the run is left. Its calls'
 * spans are made from the turns' call activity and end with their transcript event (or, if the
 * run is left, at once); every span it started is ended on every ending. Whatever the tracer
 * throws ends this run's tracing (`broke`), never the run.
 */
export class RunTrace {
  readonly api: OtelApi;
  /** What the run is made with: the runner's parts, with a traced provider. */
  readonly parts: RunnerParts;
  /** @internal What the provider says of itself, for the invoke_agent and chat spans. */
  readonly provider: { readonly name: string; readonly server: OtelAttributes };
  span: OtelSpan | undefined = undefined;
  // The run span's context: the parent of its chat and execute_tool spans.
  context: OtelContext | undefined = undefined;
  // True when a context manager carries a context into a function (the API's default does not):
  // only then is a body run inside its span's context.
  carries = false;
  private runId = '';
  // The calls of the current turn, by index, and how many of their transcript events came.
  private turn = 0;
  private calls: Array<CallSpan | undefined> = [];
  private told = 0;
  // The turn's calls by id (a turn starts one call per id), for a body's span and a nested
  // run's caller: made on the first such lookup of a turn only, most turns never need it.
  private byId: Map<string, CallSpan> | undefined = undefined;
  /** @internal Model requests not yet answered. */
  readonly chats = new Set<ChatSpan>();
  // The tokens every model turn reported, summed for the run.
  private inputTokens: number | undefined = undefined;
  private outputTokens: number | undefined = undefined;
  // The run was left by its subscriber; its final event went out (its span ended).
  private left = false;
  private ended = false;
  /** @internal True once the tracer threw: nothing more is traced for this run. */
  broken = false;

  constructor(
    readonly tracing: TraceRoot,
    parts: RunnerParts,
    readonly plan: RunPlan,
  ) {
    this.api = tracing.api;
    this.provider = providerOf(parts.provider);
    this.parts = { ...parts, provider: tracedProvider(this, parts.provider) };
  }

  now(): number {
    return this.tracing.scheduler.now();
  }

  /** The run was made (its id known): its span starts, under its caller's span if it is nested. */
  begin(runId: string): void {
    this.runId = runId;
    try {
      const { api, plan } = this;
      const active = api.context.active();
      const caller = plan.nesting === undefined ? undefined : this.tracing.callSpan(plan.nesting.parent);
      const parent = caller === undefined ? active : api.trace.setSpan(active, caller);
      const { name, server } = this.provider;
      const span = this.tracing.tracer.startSpan(
        `invoke_agent ${plan.agent.name}`,
        {
          kind: api.SpanKind.INTERNAL,
          startTime: this.now(),
          attributes: {
            [TracingAttributes.OPERATION]: 'invoke_agent',
            [TracingAttributes.PROVIDER_NAME]: name,
            [TracingAttributes.AGENT_NAME]: plan.agent.name,
            [TracingAttributes.REQUEST_MODEL]: plan.agent.model,
            ...server,
            [TracingAttributes.RUN_ID]: runId,
            [TracingAttributes.TENANT]: plan.tenant,
          },
        },
        parent,
      );
      this.span = span;
      const context = (this.context = api.trace.setSpan(parent, span));
      this.carries = api.context.with(context, () => api.context.active() === context);
      this.tracing.add(runId, this);
    } catch (error) {
      this.broke(error);
    }
  }

  /**
   * The run's transcript with its spans kept up to date: each call's span ends with its event, the
   * run's with its final event; a run left (or failing) ends every span still open.
   */
  follow(run$: Observable<RunEvent>): Observable<RunEvent> {
    return new Observable<RunEvent>((subscriber) => {
      // Added first, so it runs first when the run is left: before the batch classifies the calls it stops.
      subscriber.add(() => {
        if (!this.ended) this.left = true;
      });
      subscriber.add(
        run$.subscribe({
          next: (event) => {
            if (!this.broken) {
              try {
                this.event(event);
              } catch (error) {
                this.broke(error);
              }
            }
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
    const { context } = this;
    if (!this.carries || context === undefined || this.broken) return body();
    const call = this.running(callId);
    if (call === undefined) return body();
    return this.api.context.with((call.context ??= this.api.trace.setSpan(context, call.span!)), body);
  }

  /** @internal The span of this run's call `callId` while its body runs. */
  runningCall(callId: string): OtelSpan | undefined {
    return this.broken ? undefined : this.running(callId)?.span;
  }

  // This turn's call `callId`, if its body runs now.
  private running(callId: string): CallSpan | undefined {
    let { byId } = this;
    if (byId === undefined) {
      byId = this.byId = new Map();
      for (const call of this.calls) if (call !== undefined && !byId.has(call.callId)) byId.set(call.callId, call);
    }
    const call = byId.get(callId);
    return call !== undefined && call.started && call.endedAt === undefined ? call : undefined;
  }

  /** A call's scheduling event, from its turn's batch. Never throws: a tracer that does ends the run's tracing. */
  activity(turn: number, event: CallActivity): void {
    if (this.ended || this.broken) return;
    try {
      this.callActivity(turn, event);
    } catch (error) {
      this.broke(error);
    }
  }

  /** A call's final outcome, told just before its `settled` activity: its span keeps the outcome's stop class. Never throws. */
  outcome(turn: number, index: number, outcome: Outcome): void {
    if (this.ended || this.broken || turn !== this.turn) return;
    const call = this.calls[index];
    if (call?.open === true) call.stop = stopClassOf(outcome);
  }

  private callActivity(turn: number, event: CallActivity): void {
    if (turn !== this.turn) this.nextTurn(turn);
    const call = this.calls[event.index] ?? this.callOf(turn, event);
    if (!call.open) return;
    const span = call.span!;
    switch (event.type) {
      case 'queued':
        call.queuedAt ??= event.at;
        (call.lanes ??= []).push(event.lane);
        span.addEvent(TracingEvents.QUEUED, { [TracingAttributes.LANE]: event.lane }, event.at);
        return;
      case 'started':
        call.started = true;
        call.startedAt = event.at;
        span.addEvent(TracingEvents.STARTED, event.at);
        return;
      case 'ended':
        call.endedAt = event.at;
        if (event.overrun) call.overrun = true;
        if (this.left) call.stoppedByLeaving = true;
        return;
      case 'released':
        span.addEvent(TracingEvents.RELEASED, { [TracingAttributes.ABANDONED]: event.abandoned }, event.at);
        return;
      case 'limit-changed':
        span.addEvent(
          TracingEvents.LIMIT_CHANGED,
          {
            [TracingAttributes.LANE]: event.lane,
            [TracingAttributes.LANE_LIMIT]: event.limit,
            [TracingAttributes.LANE_PREVIOUS_LIMIT]: event.previous,
            [TracingAttributes.LANE_LIMIT_CAUSE]: event.cause,
          },
          event.at,
        );
        return;
      case 'settled':
        call.kind = event.outcome;
        // A run being left emits no more events: what the activity said is all there is.
        if (this.left) call.endFromKind(this);
        return;
    }
  }

  private callOf(turn: number, event: CallActivity): CallSpan {
    const { api } = this;
    const description = this.tracing.description(event.tool);
    const attributes: OtelAttributes = {
      [TracingAttributes.OPERATION]: 'execute_tool',
      [TracingAttributes.TOOL_NAME]: event.tool,
      [TracingAttributes.TOOL_CALL_ID]: event.callId,
      [TracingAttributes.TOOL_TYPE]: 'function',
      [TracingAttributes.TURN]: turn,
      [TracingAttributes.CALL_INDEX]: event.index,
    };
    if (description !== undefined) attributes[TracingAttributes.TOOL_DESCRIPTION] = description;
    const span = this.tracing.tracer.startSpan(`execute_tool ${event.tool}`, { kind: api.SpanKind.INTERNAL, startTime: event.at, attributes }, this.context);
    const call = new CallSpan(span, event.callId);
    this.calls[event.index] = call;
    if (this.byId !== undefined && !this.byId.has(call.callId)) this.byId.set(call.callId, call);
    return call;
  }

  private nextTurn(turn: number): void {
    // Every call of a turn has its event before the next turn starts; anything left is ended as it stands.
    for (const call of this.calls) if (call?.open) call.endFromKind(this);
    this.turn = turn;
    this.calls = [];
    this.told = 0;
    this.byId = undefined;
  }

  // An event of the run's transcript. A turn's calls' events go out in call order, one per call,
  // so the k-th names the call at index k: a streamed turn's calls, settled before its
  // MODEL_RESPONSE, are found all the same.
  private event(event: RunEvent): void {
    switch (event.type) {
      case 'TOOL_RESULT':
      case 'TOOL_ERROR':
      case 'TOOL_INDETERMINATE': {
        if (event.turn !== this.turn) return;
        let call = this.calls[this.told++];
        if (call?.callId !== event.callId) call = this.calls.find((c) => c?.open === true && c.callId === event.callId);
        if (call === undefined || !call.open) return;
        // The stop class is the outcome's own (told with its settled activity), read by stopClassOf.
        if (event.type === 'TOOL_RESULT') call.end(this, undefined, undefined, undefined);
        else if (event.type === 'TOOL_INDETERMINATE') call.end(this, 'indeterminate', call.stop, event.message);
        else call.end(this, event.error.name, call.stop, event.error.message);
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
      case 'RUN_INTERRUPTED':
        this.endRun('interrupted', undefined, undefined);
        return;
      default:
        return;
    }
  }

  private endRun(status: 'completed' | 'failed' | 'cancelled' | 'interrupted', errorType: string | undefined, message: string | undefined): void {
    const { span } = this;
    if (span === undefined || this.ended) return;
    this.ended = true;
    const attributes: OtelAttributes = { [TracingAttributes.RUN_STATUS]: status };
    if (this.inputTokens !== undefined) attributes[TracingAttributes.INPUT_TOKENS] = this.inputTokens;
    if (this.outputTokens !== undefined) attributes[TracingAttributes.OUTPUT_TOKENS] = this.outputTokens;
    if (errorType !== undefined) attributes[TracingAttributes.ERROR_TYPE] = errorType;
    span.setAttributes(attributes);
    if (errorType !== undefined) span.setStatus({ code: this.api.SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) });
    span.end(this.now());
  }

  // The run is over, however it ended: every span still open ends, and the run is forgotten.
  private close(): void {
    try {
      if (!this.broken) {
        for (const call of this.calls) if (call?.open) call.endFromKind(this);
        for (const chat of [...this.chats]) chat.left();
        this.endRun('cancelled', 'cancelled', 'the run was left before it ended');
      }
    } catch (error) {
      this.broke(error);
    }
    this.calls = [];
    this.byId = undefined;
    this.tracing.remove(this.runId, this);
  }

  /**
   * @internal The tracer threw (a span's method, a processor, an exporter it calls at once): the
   * run's tracing stops here, told once, and the run goes on as it would without a tracer. The
   * spans still open are ended as they stand, each on its own, whatever they throw.
   */
  broke(error: unknown): void {
    if (this.broken) return;
    this.broken = true;
    this.tracing.remove(this.runId, this);
    const open: OtelSpan[] = [];
    for (const call of this.calls) if (call?.open) open.push(call.span!);
    for (const chat of this.chats) open.push(chat.span);
    if (this.span !== undefined && !this.ended) open.push(this.span);
    this.calls = [];
    this.byId = undefined;
    this.chats.clear();
    for (const span of open) {
      try {
        span.end();
      } catch {
        // The tracer's own failure, said once below; an end that throws again adds nothing.
      }
    }
    this.tracing.failed(this.runId, this.plan.nesting?.parent, error);
  }

  /** @internal A model turn's usage, added to the run's. */
  usage(usage: SpanUsage): void {
    if (usage.input !== undefined) this.inputTokens = (this.inputTokens ?? 0) + usage.input;
    if (usage.output !== undefined) this.outputTokens = (this.outputTokens ?? 0) + usage.output;
  }
}
