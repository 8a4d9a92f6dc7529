// The tracing reads @opentelemetry/api through shapes of its own (lib/runner/trace/otelShapes.ts), so
// that no declaration of the library names the optional peer. These are compile-time checks
// that the real API, its Tracer, Span, Context and Attributes are each of those shapes (a
// change of the API that breaks one fails the type check), and one run through them.
import * as api from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { expect } from 'chai';
import type { OtelApi, OtelAttributes, OtelContext, OtelSpan, OtelTracer } from '../../lib/runner/trace/otelShapes.js';

describe('the shapes of @opentelemetry/api the tracing uses', () => {
  it('are met by the real API (a compile-time check), and work through it', () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const module: OtelApi = api;
    const tracer: OtelTracer = provider.getTracer('shapes');
    const attributes: OtelAttributes = { a: 1 } satisfies api.Attributes;
    const span: OtelSpan = tracer.startSpan('s', { kind: module.SpanKind.INTERNAL, attributes, startTime: 5 }, module.context.active());
    const real: api.Span = provider.getTracer('shapes').startSpan('r');
    const asShape: OtelSpan = real;
    const context: OtelContext = module.trace.setSpan(api.context.active(), span);
    const fromApi: OtelContext = api.context.active();
    expect(module.context.with(context, (n: number) => n + 1, undefined, 1)).to.equal(2);
    span.setAttribute('b', 'x').setAttributes({ c: true }).addEvent('e', { d: 1 }, 6).setStatus({ code: module.SpanStatusCode.ERROR, message: 'm' });
    span.end(7);
    asShape.end();
    expect([exporter.getFinishedSpans().map((s) => s.name), fromApi === api.ROOT_CONTEXT]).to.deep.equal([['s', 'r'], true]);
    void provider.shutdown();
  });
});
