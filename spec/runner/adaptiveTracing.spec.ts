// A change of an adaptive lane's limit is an event on the span of the call whose outcome moved it.
import { expect } from 'chai';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Agent, AgentRunner, RateLimitedError, ScriptedProvider, ToolRegistry } from '../../lib/index.js';
import { TracingAttributes, TracingEvents } from '../../lib/otel.js';

describe('adaptive lanes in the trace', () => {
  it("puts each change of a limit on the call's span, with the lane, the limits and the cause", async () => {
    const exporter = new InMemorySpanExporter();
    const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('spec');
    const tools = new ToolRegistry().register({ name: 'partner' }, () => {
      throw new RateLimitedError('slow down', 0);
    });
    const provider = new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'partner', arguments: {} }] }, { text: 'done' }]);
    const runner = new AgentRunner({ provider, tools, tracer, concurrency: { perToolAdaptive: { partner: { min: 1, max: 6 } } } });
    const result = await runner.run(new Agent({ name: 'planner', instructions: '', model: 'm', freeText: true }), 'go');
    expect(result.status).to.equal('completed');
    const span = exporter.getFinishedSpans().find((s) => s.attributes[TracingAttributes.TOOL_CALL_ID] === 'c1')!;
    const events = span.events.filter((e) => e.name === TracingEvents.LIMIT_CHANGED);
    expect(events.map((e) => e.attributes)).to.deep.equal([
      {
        [TracingAttributes.LANE]: 'tool:partner',
        [TracingAttributes.LANE_LIMIT]: 3,
        [TracingAttributes.LANE_PREVIOUS_LIMIT]: 6,
        [TracingAttributes.LANE_LIMIT_CAUSE]: 'overload',
      },
    ]);
  });
});
