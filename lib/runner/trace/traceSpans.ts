// The spans a run's trace keeps: one call's (`execute_tool`) and one model request's (`chat`),
// and what a provider's answer says of its usage, finish reason and response (id, model).
import type { OtelApi, OtelAttributes, OtelContext, OtelSpan } from './otelShapes.js';
import { toErrorInfo } from '../../errors.js';
import { stopClass, type StopClass } from '../../stopClass.js';
import { TracingAttributes } from './tracingNames.js';

/** What a span reads and tells of its run's trace (runTrace.ts is the one there is). */
export interface SpanRun {
  readonly api: OtelApi;
  /** True once the tracer threw: nothing more is traced for the run. */
  readonly broken: boolean;
  /** Model requests not yet answered. */
  readonly chats: Set<ChatSpan>;
  now(): number;
  /** The tokens a model turn reported. */
  usage(usage: SpanUsage): void;
  /** The tracer threw: the run's tracing ends. */
  broke(error: unknown): void;
}

/** One call's span, and what is known of the call so far. */
export class CallSpan {
  // Set once its body started, and when.
  started = false;
  startedAt: number | undefined = undefined;
  // When it first queued on a lane, and the lanes it queued on.
  queuedAt: number | undefined = undefined;
  lanes: string[] | undefined = undefined;
  // When the batch decided its outcome, and which kind it was in the end.
  endedAt: number | undefined = undefined;
  kind: 'result' | 'error' | 'indeterminate' | undefined = undefined;
  // Its outcome's stop class (stopClassOf), once the outcome is known; undefined for a call that ended by itself.
  stop: StopClass | undefined = undefined;
  // Its body still ran when its call ended.
  overrun = false;
  // The run was left before this call ended: the leaving stopped it.
  stoppedByLeaving = false;
  open = true;
  // The context its body runs in (the run's, with this span), made when the body starts.
  context: OtelContext | undefined = undefined;

  constructor(
    /** Its span while it is open; let go once ended, so a span sent away is not kept until the turn ends. */
    public span: OtelSpan | undefined,
    readonly callId: string,
  ) {}

  /**
   * The call's ending: its outcome, its lanes (set here, in one go: the time it waited, from its
   * first wait to its start, or to its end if it never started) and its error, if any.
   */
  end(run: SpanRun, errorType: string | undefined, stop: StopClass | undefined, message: string | undefined): void {
    if (!this.open) return;
    this.open = false;
    const { queuedAt, lanes, started } = this;
    const span = this.span!;
    this.span = undefined;
    const endedAt = this.endedAt ?? run.now();
    // One attribute at a time: no object made per call for them.
    span.setAttribute(TracingAttributes.LANE_WAIT_MS, queuedAt === undefined ? 0 : (this.startedAt ?? endedAt) - queuedAt);
    if (lanes !== undefined) {
      span.setAttribute(TracingAttributes.LANES_QUEUED_ON, lanes);
      span.setAttribute(TracingAttributes.LANE_HELD_BY, lanes[lanes.length - 1]!);
    }
    if (this.overrun) span.setAttribute(TracingAttributes.OVERRUN, true);
    span.setAttribute(TracingAttributes.OUTCOME, this.kind ?? (errorType === undefined ? 'result' : 'error'));
    span.setAttribute(TracingAttributes.DISPATCHED, started);
    if (stop !== undefined) span.setAttribute(TracingAttributes.STOP_CLASS, stop);
    if (errorType !== undefined) span.setAttribute(TracingAttributes.ERROR_TYPE, errorType);
    if (errorType !== undefined) span.setStatus({ code: run.api.SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) });
    // The call's time is until its outcome was decided, not until it went out in call order.
    span.end(endedAt);
  }

  /**
   * Ended with no transcript event for it (the run was left): what the activity said, its kind,
   * and, if the leaving stopped it, its stop class. A failure the batch had decided before gives
   * no name here: `_OTHER`, as the conventions say for an error type not known.
   */
  endFromKind(run: SpanRun): void {
    switch (this.kind) {
      case 'result':
        return this.end(run, undefined, undefined, undefined);
      case 'indeterminate':
        return this.end(run, 'indeterminate', this.stop, 'the run was left while the call was in flight');
      case 'error':
        if (this.stoppedByLeaving) return this.end(run, 'CallStoppedError', this.stop, 'the run was left before the call ended');
        return this.end(run, '_OTHER', this.stop, undefined);
      default:
        // No outcome came: the leaving stopped it where it stood (its tool's idempotence unknown here).
        return this.end(run, 'cancelled', stopClass(this.started, false), 'the run was left before the call ended');
    }
  }
}

/**
 * One model request's span; ends once, on whichever ending comes first. Whatever the tracer
 * throws here ends the run's tracing, never the request: the answer goes on as it came.
 */
export class ChatSpan {
  private open = true;
  // When the last value came, if one did: a reply taken whole is over then, whenever it is let go.
  private answeredAt: number | undefined = undefined;

  constructor(
    private readonly run: SpanRun,
    readonly span: OtelSpan,
  ) {}

  /** A value came: the reply, or a part of a streamed one; its usage, finish reason and response ids are kept. */
  saw(value: unknown): void {
    if (!this.open || this.run.broken) return;
    this.answeredAt = this.run.now();
    try {
      const attributes = attributesOf(value);
      if (attributes === undefined) return;
      this.span.setAttributes(attributes);
      const input = attributes[TracingAttributes.INPUT_TOKENS] as number | undefined;
      const output = attributes[TracingAttributes.OUTPUT_TOKENS] as number | undefined;
      if (input !== undefined || output !== undefined) this.run.usage({ input, output });
    } catch (error) {
      this.run.broke(error);
    }
  }

  /** Completed: the answer was over with its last value (what reacted to it in between is not the model's time). */
  done(): void {
    this.end(undefined, undefined, this.answeredAt);
  }

  fail(error: unknown): void {
    const { name, message } = toErrorInfo(error);
    this.end(name, message);
  }

  /** Let go before it completed: answered if a value came (a reply taken whole), else cancelled. */
  left(): void {
    if (this.answeredAt !== undefined) this.end(undefined, undefined, this.answeredAt);
    else this.end('cancelled', 'the run stopped before the model answered');
  }

  private end(errorType: string | undefined, message: string | undefined, at?: number): void {
    if (!this.open) return;
    this.open = false;
    const { run, span } = this;
    if (run.broken) return;
    run.chats.delete(this);
    try {
      if (errorType !== undefined) {
        span.setAttribute(TracingAttributes.ERROR_TYPE, errorType);
        span.setStatus({ code: run.api.SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) });
      }
      span.end(at ?? run.now());
    } catch (error) {
      run.broke(error);
    }
  }
}

/** The token counts a span records, either of them possibly unknown. */
export interface SpanUsage {
  readonly input: number | undefined;
  readonly output: number | undefined;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

// What one value of an answer says for the chat span: a whole reply's usage, finish reason and
// response ({ id, model }); a streamed turn's `usage`, `finish` and `response` parts. A count or
// an id the provider did not report is left out, never made 0 or ''. Undefined when it says none.
function attributesOf(value: unknown): OtelAttributes | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const record = value as { type?: unknown; usage?: unknown; finishReason?: unknown; response?: unknown };
  const { type } = record;
  let attributes: OtelAttributes | undefined;
  const set = (key: string, said: string | number | string[] | undefined): void => {
    if (said !== undefined) (attributes ??= {})[key] = said;
  };
  const usage = type === 'usage' ? record : type === undefined ? record.usage : undefined;
  if (usage !== null && typeof usage === 'object') {
    const { inputTokens, outputTokens } = usage as { inputTokens?: unknown; outputTokens?: unknown };
    set(TracingAttributes.INPUT_TOKENS, count(inputTokens));
    set(TracingAttributes.OUTPUT_TOKENS, count(outputTokens));
  }
  if ((type === undefined || type === 'finish') && typeof record.finishReason === 'string') set(TracingAttributes.FINISH_REASONS, [record.finishReason]);
  const response = type === 'response' ? record : type === undefined ? record.response : undefined;
  if (response !== null && typeof response === 'object') {
    const { id, model } = response as { id?: unknown; model?: unknown };
    set(TracingAttributes.RESPONSE_ID, text(id));
    set(TracingAttributes.RESPONSE_MODEL, text(model));
  }
  return attributes;
}
