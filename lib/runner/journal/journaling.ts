// A run's side of its journal: what it writes as it goes (its start, each model answer, each call
// of a streamed turn as it is written, each call's dispatch ahead of its body, each outcome without
// a result as the batch decides it, each outcome as it is settled, its end). Only a top-level run is journaled:
// a nested run is part of its caller's call, and after a crash that call is what is classified.
import type { BatchCall, Outcome, WriteAhead, WriteAheadWaiter } from '../../batch/index.js';
import type { RunEvent } from '../events.js';
import type { ModelResponse, ToolCall } from '../model/model.js';
import type { RunPlan } from '../parts.js';
import type { RunJournal } from './runJournal.js';

/** One journaled run's writer: entries appended to its journal, never awaited but by a call's dispatch. */
export class RunJournaling {
  constructor(
    private readonly journal: RunJournal,
    readonly runId: string,
  ) {}

  started(plan: RunPlan, state: Readonly<Record<string, unknown>>): void {
    const { agent, tenant, input, history, maxTurns } = plan;
    this.journal.append({ kind: 'started', runId: this.runId, agent: agent.name, tenant, input, history, state, maxTurns });
  }

  responded(turn: number, response: ModelResponse): void {
    // What the tracing reads of the response (its id) is not part of the conversation.
    const { text, toolCalls, usage, finishReason } = response;
    this.journal.append({ kind: 'answered', runId: this.runId, turn, response: { text, toolCalls, usage, finishReason } });
  }

  /** Call `index` of streamed turn `turn`, as soon as the stream completes it: before it is gated, so any later entry of it lands after this one. */
  called(turn: number, index: number, call: ToolCall): void {
    this.journal.append({ kind: 'called', runId: this.runId, turn, index, call });
  }

  settled(turn: number, outcome: Outcome, content: string | undefined): void {
    const { runId } = this;
    const { index } = outcome;
    this.journal.append(content === undefined ? { kind: 'settled', runId, turn, index, outcome } : { kind: 'settled', runId, turn, index, outcome, content });
  }

  ended(event: RunEvent): void {
    this.journal.append({ kind: 'ended', runId: this.runId, event });
  }

  /**
   * Turn `turn`'s write-ahead: each call's dispatch recorded before its body starts, and each
   * outcome without a result as it is decided, but for the calls `known` names (settled before, or
   * waiting for a person).
   */
  turn(turn: number, known: (index: number) => boolean): WriteAhead {
    return new TurnWriteAhead(this.journal, this.runId, turn, known);
  }
}

// One turn's dispatches, written ahead: the call's record waits for its line to land.
class TurnWriteAhead implements WriteAhead {
  constructor(
    private readonly journal: RunJournal,
    private readonly runId: string,
    private readonly turn: number,
    private readonly known: (index: number) => boolean,
  ) {}

  // A result is journaled once settled, in its JSON form; anything else is plain data, kept at once.
  decided(outcome: Outcome): void {
    const { index } = outcome;
    if (outcome.kind === 'result' || this.known(index)) return;
    this.journal.append({ kind: 'decided', runId: this.runId, turn: this.turn, index, outcome });
  }

  dispatching(call: BatchCall, index: number, written: WriteAheadWaiter): void {
    const { runId, turn } = this;
    this.journal.append({ kind: 'dispatched', runId, turn, index, callId: call.callId, tool: call.tool }, written);
  }
}
