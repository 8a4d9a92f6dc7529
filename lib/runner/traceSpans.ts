// The spans a run's trace keeps: one call's (`execute_tool`) and one model request's (`chat`),
// and what a provider's answer says of its usage and finish reason.
import type * as otel from '@opentelemetry/api';
import { toErrorInfo } from '../errors.js';
import type { RunTrace } from './tracing.js';
import { TracingAttributes } from './tracingNames.js';

/** One call's span, and what is known of the call so far. */
export class CallSpan {
  // Set once its body started, and when.
  started = false;
  // When it first queued on a lane, and the lanes it queued on.
  queuedAt: number | undefined = undefined;
  lanes: string[] | undefined = undefined;
  // When the batch decided its outcome, and which kind it was in the end.
  endedAt: number | undefined = undefined;
  kind: 'result' | 'error' | 'indeterminate' | undefined = undefined;
  // The run was left before this call ended: the leaving stopped it.
  stoppedByLeaving = false;
  open = true;

  constructor(
    readonly span: otel.Span,
    readonly callId: string,
  ) {}
}

/** One model request's span; ends once, on whichever ending comes first. */
export class ChatSpan {
  private open = true;
  // When the last value came, if one did: a reply taken whole is over then, whenever it is let go.
  private answeredAt: number | undefined = undefined;

  constructor(
    private readonly run: RunTrace,
    readonly span: otel.Span,
  ) {}

  /** A value came: the reply, or a part of a streamed one; its usage and finish reason are kept. */
  saw(value: unknown): void {
    if (!this.open) return;
    this.answeredAt = this.run.now();
    const usage = usageOf(value);
    if (usage !== undefined) {
      if (usage.input !== undefined) this.span.setAttribute(TracingAttributes.INPUT_TOKENS, usage.input);
      if (usage.output !== undefined) this.span.setAttribute(TracingAttributes.OUTPUT_TOKENS, usage.output);
      this.run.usage(usage);
    }
    const reason = finishOf(value);
    if (reason !== undefined) this.span.setAttribute(TracingAttributes.FINISH_REASONS, [reason]);
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

  end(errorType: string | undefined, message: string | undefined, at: number = this.run.now()): void {
    if (!this.open) return;
    this.open = false;
    if (errorType !== undefined) {
      this.span.setAttribute(TracingAttributes.ERROR_TYPE, errorType);
      this.span.setStatus({ code: this.run.api.SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) });
    }
    this.span.end(at);
    this.run.chatEnded(this);
  }
}

export interface Usage {
  readonly input: number | undefined;
  readonly output: number | undefined;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

// A reply's usage ({ usage: { inputTokens, outputTokens } }) or a usage stream part
// ({ type: 'usage', inputTokens, outputTokens }), when the provider reports one.
function usageOf(value: unknown): Usage | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const record = value as { type?: unknown; usage?: unknown };
  const source = record.type === 'usage' ? record : record.usage;
  if (source === null || typeof source !== 'object') return undefined;
  const { inputTokens, outputTokens } = source as { inputTokens?: unknown; outputTokens?: unknown };
  const usage = { input: count(inputTokens), output: count(outputTokens) };
  return usage.input === undefined && usage.output === undefined ? undefined : usage;
}

// A reply's finish reason, or a finish stream part's ({ type: 'finish', finishReason }).
function finishOf(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { type, reason, finishReason } = value as { type?: unknown; reason?: unknown; finishReason?: unknown };
  if (typeof finishReason === 'string') return finishReason;
  return type === 'finish' && typeof reason === 'string' ? reason : undefined;
}
