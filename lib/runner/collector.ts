// How run() resolves: a run's events collected as they come, then folded into its RunResult
// with what the run handed over as it ended (state, messages, its nested runs' tokens).
import { DirectSubscriber } from '../directSubscriber.js';
import type { Keep } from '../keep.js';
import { statusOf, type RunEvent } from './events.js';
import { addedUsage, type Usage } from './model/model.js';
import type { RunFinal, RunFinish } from './parts.js';
import type { RunResult } from './types.js';
import { emptyState } from './state.js';

// The tokens of a run's turns, summed; undefined when no turn reported any.
function usageOf(events: readonly RunEvent[]): Usage | undefined {
  let usage: { inputTokens: number; outputTokens: number } | undefined;
  for (const event of events) {
    if (event.type !== 'MODEL_RESPONSE' || event.usage === undefined) continue;
    usage ??= { inputTokens: 0, outputTokens: 0 };
    usage.inputTokens += event.usage.inputTokens;
    usage.outputTokens += event.usage.outputTokens;
  }
  return usage;
}

// A run's transcript folded into its RunResult, with the final state and messages the run
// handed over as it ended, and the tokens of the runs nested in it (and of its turns before it
// was resumed, `earlier`).
function resultOf(events: readonly RunEvent[], final: RunFinal, earlier: Usage | undefined): RunResult {
  const last = events[events.length - 1];
  const usage = addedUsage(earlier, usageOf(events));
  const totalUsage = addedUsage(usage, final.nestedUsage);
  const base = { events, state: final.state, messages: final.messages, ...(usage !== undefined ? { usage } : {}), ...(totalUsage !== undefined ? { totalUsage } : {}) };
  if (last?.type === 'RUN_INTERRUPTED') return { status: 'interrupted', pending: last.pending, snapshot: last.snapshot, ...base };
  if (last?.type !== 'RUN_COMPLETED' && last?.type !== 'RUN_FAILED' && last?.type !== 'RUN_CANCELLED') {
    return { status: 'failed', error: { name: 'RunError', message: 'the run ended without a final event' }, ...base };
  }
  if (last.type === 'RUN_COMPLETED') return { status: 'completed', output: last.output, ...base };
  return { status: statusOf(last) as 'failed' | 'cancelled', error: last.type === 'RUN_CANCELLED' ? { name: 'RunCancelled', message: last.reason } : last.error, ...base };
}

// A run's events as run() collects them, and the state and messages the run hands over as it
// ends, folded into its RunResult. One object per run: its subscriber itself (a
// `DirectSubscriber`) and what the run tells as it finishes.
export class Collector extends DirectSubscriber<RunEvent> implements RunFinish {
  private readonly events: RunEvent[];
  private final: RunFinal = { state: emptyState, messages: [], nestedUsage: undefined };

  constructor(
    private readonly resolve: (result: RunResult) => void,
    private readonly reject: (error: unknown) => void,
    before: readonly RunEvent[],
    private readonly earlier: Usage | undefined,
  ) {
    super();
    this.events = [...before];
  }

  finish(final: RunFinal): void {
    this.final = final;
  }

  override next(event: RunEvent): void {
    if (!this.closed) this.events.push(event);
  }

  // The run turns every failure into RUN_FAILED; an error here is the library's own bug.
  override error(error: unknown): void {
    if (this.closed) return;
    this.unsubscribe();
    this.reject(error);
  }

  override complete(): void {
    if (this.closed) return;
    this.unsubscribe();
    this.resolve(resultOf(this.events, this.final, this.earlier));
  }
}

/** @internal One inert object of each class this module makes per run, for keepWarmShapes (lib/shapes.ts). */
export function keepShapes(keep: Keep): void {
  keep(() => new Collector(() => undefined, () => undefined, [], undefined));
}
