// OpenTelemetry spans for runs, by the GenAI semantic conventions: an `invoke_agent` span per
// run, a `chat` span per model turn, an `execute_tool` span per call (with the time it waited in
// its lanes, and which lanes held it). Built beside the engine from what it reports already (the
// turns' call activity, the run's transcript, the provider's answers), so the batch and the turn
// loop know nothing of tracing, and a runner without a tracer pays nothing for it. This file is
// the runner's side (its tracer, its traced runs, where a failure is told); a run's spans are in
// runTrace.ts, the chat spans in tracedProvider.ts, the span records in traceSpans.ts.
// @opentelemetry/api is loaded only when a tracer is given: the library imports without it.
import { createRequire } from 'node:module';
import type { OtelApi, OtelSpan, OtelTracer } from './otelShapes.js';
import type { SchedulerLike, Subject } from 'rxjs';
import { ConfigError, toErrorInfo } from '../../errors.js';
import type { ToolRegistry } from '../../tools/index.js';
import type { RunnerParts, RunPlan } from '../parts.js';
import { RunTrace } from './runTrace.js';
import type { RunnerActivity, RunParent } from '../types.js';

import { TracingAttributes, TracingEvents } from './tracingNames.js';

export { TracingAttributes, TracingEvents };

// Loaded once, on the first runner made with a tracer. Node's `import` of the package reads its
// CommonJS build too (its exports map has no `import` condition), so this is the same module a
// caller's `import { trace } from '@opentelemetry/api'` gets.
let api: OtelApi | undefined;
function otelApi(): OtelApi {
  if (api === undefined) {
    try {
      api = createRequire(import.meta.url)('@opentelemetry/api') as OtelApi;
    } catch (error) {
      // Node's message goes on with the require stack: its first line says it all.
      throw new ConfigError('tracer', `a tracer needs @opentelemetry/api installed beside agent-lanes (${toErrorInfo(error).message.split('\n')[0]})`);
    }
  }
  return api;
}

/** A runner's tracing: its tracer, and the runs it is tracing now, by id (a nested run finds its caller's span). */
export class Tracing {
  readonly api: OtelApi;
  // Runs traced now, by run id.
  private readonly runs = new Map<string, RunTrace>();
  // Each tool's description, as the execute_tool spans say it, read once per tool.
  private readonly descriptions = new Map<string, string | undefined>();

  constructor(
    readonly tracer: OtelTracer,
    readonly scheduler: SchedulerLike,
    private readonly activity: Subject<RunnerActivity>,
    private readonly tools: ToolRegistry,
  ) {
    if (tracer === null || typeof tracer !== 'object' || typeof tracer.startSpan !== 'function') {
      throw new ConfigError('tracer', `tracer must be an OpenTelemetry Tracer (startSpan), got ${tracer === null ? 'null' : typeof tracer}`);
    }
    this.api = otelApi();
  }

  /** A run's trace, before the run is made: the run takes `trace.parts`, whose provider is traced. */
  open(parts: RunnerParts, plan: RunPlan): RunTrace {
    return new RunTrace(this, parts, plan);
  }

  /** @internal */ add(runId: string, trace: RunTrace): void {
    this.runs.set(runId, trace);
  }

  /** @internal */ remove(runId: string, trace: RunTrace): void {
    if (this.runs.get(runId) === trace) this.runs.delete(runId);
  }

  /** The span of a call running now (a nested run's caller), if it is traced. */
  callSpan(parent: RunParent): OtelSpan | undefined {
    return this.runs.get(parent.runId)?.runningCall(parent.callId);
  }

  /** @internal A tool's description, for its execute_tool spans. */
  description(tool: string): string | undefined {
    if (this.descriptions.has(tool)) return this.descriptions.get(tool);
    const description = this.tools.get(tool)?.declaration.description;
    const said = typeof description === 'string' && description !== '' ? description : undefined;
    this.descriptions.set(tool, said);
    return said;
  }

  /**
   * @internal A run's tracer threw: said once, on activity$ (`tracing-failed`) when someone
   * watches it, else as a process warning (`TracingFailedWarning`), so it is never silent.
   */
  failed(runId: string, parent: RunParent | undefined, error: unknown): void {
    const info = toErrorInfo(error);
    const { activity, scheduler } = this;
    if (activity.observed) {
      activity.next({ type: 'tracing-failed', runId, error: info, ...(parent === undefined ? {} : { parent }), at: scheduler.now() });
      return;
    }
    process.emitWarning(`tracing stopped for run ${runId}: the tracer threw ${info.name}: ${info.message}`, 'TracingFailedWarning');
  }
}
