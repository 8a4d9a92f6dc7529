// The few shapes of @opentelemetry/api the tracing uses (its Tracer, Span, Context, Attributes and
// the module's context, trace, SpanKind and SpanStatusCode), written out here so that no
// declaration of the library names the optional peer: an app without it compiles the library's
// declarations with skipLibCheck off. spec/runner/otelShapes.spec.ts checks, at compile time,
// that the real API is each of them.

/** An attribute's value, as OpenTelemetry's `AttributeValue`. */
export type OtelAttributeValue = string | number | boolean | Array<null | undefined | string> | Array<null | undefined | number> | Array<null | undefined | boolean>;

/** OpenTelemetry's `Attributes`. */
export interface OtelAttributes {
  [key: string]: OtelAttributeValue | undefined;
}

/** OpenTelemetry's `Context`, read only through the API. */
export interface OtelContext {
  getValue(key: symbol): unknown;
}

/** A span's status, as OpenTelemetry's `SpanStatus` (`code` is a `SpanStatusCode`). */
export interface OtelSpanStatus {
  code: number;
  message?: string;
}

/** OpenTelemetry's `Span`, as far as the tracing calls it. */
export interface OtelSpan {
  setAttribute(key: string, value: OtelAttributeValue): this;
  setAttributes(attributes: OtelAttributes): this;
  addEvent(name: string, attributesOrStartTime?: OtelAttributes | number, startTime?: number): this;
  setStatus(status: OtelSpanStatus): this;
  end(endTime?: number): void;
}

/** What `startSpan` is given. */
export interface OtelSpanOptions {
  kind?: number;
  attributes?: OtelAttributes;
  startTime?: number;
}

/** OpenTelemetry's `Tracer`, as far as the tracing calls it. */
export interface OtelTracer {
  startSpan(name: string, options?: OtelSpanOptions, context?: OtelContext): OtelSpan;
}

/** The module `@opentelemetry/api`, as far as the tracing calls it. */
export interface OtelApi {
  readonly context: {
    active(): OtelContext;
    with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(context: OtelContext, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F>;
  };
  readonly trace: {
    setSpan(context: OtelContext, span: OtelSpan): OtelContext;
  };
  readonly SpanKind: { readonly INTERNAL: number; readonly CLIENT: number };
  readonly SpanStatusCode: { readonly ERROR: number };
}
