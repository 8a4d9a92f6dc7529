// OpenTelemetry spans of a run, read back from the SDK's in-memory exporter: a planner asks for
// three searches (a per-tool lane of 2, so the third waits) and a delegation to a researcher,
// whose own run nests under the delegating call's span. Prints the span tree with each span's
// time and the attributes that say what happened. No network, no keys; any exporter (OTLP to
// Jaeger, Honeycomb, ...) takes the same spans. Run it with `npm run example:tracing`.
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, ToolRegistry } from '../lib/index.js';

const exporter = new InMemorySpanExporter();
const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('travel-desk');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const researcher = new Agent({ name: 'researcher', instructions: 'Research.', model: 'small-model', tools: ['search'] });
const tools = new ToolRegistry()
  .register({ name: 'search', idempotent: true }, async () => (await sleep(50), 'three hotels'))
  .register({ name: 'delegate' }, async (_args, ctx) => (await ctx.runAgent(researcher, 'Reviews of Casa do Mar')).output)
  .register({ name: 'book' }, () => {
    throw new Error('no rooms left');
  });
const provider = new ScriptedProvider({
  planner: [
    {
      toolCalls: [
        { id: 's1', name: 'search', arguments: { city: 'Lisbon' } },
        { id: 's2', name: 'search', arguments: { city: 'Porto' } },
        { id: 's3', name: 'search', arguments: { city: 'Faro' } },
        { id: 'd1', name: 'delegate', arguments: {} },
        { id: 'b1', name: 'book', arguments: {} },
      ],
    },
    { text: 'Casa do Mar has the best reviews, but it is full.' },
  ],
  researcher: [{ toolCalls: [{ id: 'r1', name: 'search', arguments: { q: 'reviews' } }] }, { text: 'Guests love it.' }],
});
const runner = new AgentRunner({ provider, tools, tracer, concurrency: new ConcurrencyConfig({ perTool: { search: 2 } }) });
const planner = new Agent({ name: 'planner', instructions: 'Plan the trip.', model: 'big-model', tools: ['search', 'delegate', 'book'] });
const result = await runner.run(planner, 'A week in Portugal');
console.log(`run ${result.status}: ${String(result.output)}\n`);

// The spans as a tree, children in the order they started.
const spans = exporter.getFinishedSpans();
const ms = (time: readonly [number, number]) => time[0] * 1000 + time[1] / 1e6;
const origin = Math.min(...spans.map((span) => ms(span.startTime)));
const children = (parent: string | undefined) =>
  spans.filter((span) => span.parentSpanContext?.spanId === parent).sort((a, b) => ms(a.startTime) - ms(b.startTime));
const shown = ['gen_ai.tool.call.id', 'agent_lanes.lane.wait_ms', 'agent_lanes.lane.held_by', 'error.type', 'agent_lanes.stop.class'];
function print(span: ReadableSpan, depth: number): void {
  const at = `${Math.round(ms(span.startTime) - origin)}..${Math.round(ms(span.startTime) - origin + ms(span.duration))} ms`;
  const facts = shown.filter((key) => span.attributes[key] !== undefined).map((key) => `${key.split('.').pop()}=${String(span.attributes[key])}`);
  console.log(`${'  '.repeat(depth)}${span.name.padEnd(30 - 2 * depth)} ${at.padEnd(12)} ${facts.join(' ')}`);
  for (const child of children(span.spanContext().spanId)) print(child, depth + 1);
}
for (const root of children(undefined)) print(root, 0);
