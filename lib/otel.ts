// agent-lanes/otel: what the runner and the lanes report to OpenTelemetry (docs/tracing.md,
// docs/fleet.md): the span and event names and attributes, and the shapes of a tracer and a
// meter. The library meets @opentelemetry/api by its shapes: this entry does not import it.
export type { TracerLike } from './runner/AgentRunner.js';
export { TracingAttributes, TracingEvents } from './runner/trace/tracingNames.js';
export { LaneMetricNames, type LaneMeter } from './lanes/redis/metrics.js';
