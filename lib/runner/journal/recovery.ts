// A run's journal read back into where the run goes on after its process stopped: its
// conversation, state and transcript through its last journaled turn, and that turn's batch as
// the crash left it (a settled call's outcome read back, never run again; a call dispatched and
// never settled classified as the stop classes say; a call never dispatched run as any call is).
// The run then goes on through a resume point (resumePoint.ts).
import { assignDelta, mergeDeltas, type Outcome } from '../../batch/index.js';
import { lostOutcome } from '../../batch/stops.js';
import { JournalError, ProcessStoppedError, toErrorInfo } from '../../errors.js';
import { processStopped } from '../../stopClass.js';
import type { RunState } from '../../tools/index.js';
import { toOutcomeEvent, toResponseEvent, type RunEvent } from '../events.js';
import type { Message, ModelResponse, ToolCall } from '../model/model.js';
import type { ResumedCall, ResumePoint } from '../resume/resumePoint.js';
import { journaledEnd, type CallDecidedEntry, type CallDispatchedEntry, type CallSettledEntry, type JournalEntry, type RunStartedEntry } from './runJournal.js';
import { startingState, toolMessage } from '../state.js';
import { describePath, MAX_ENVELOPED, nestedTooDeep } from '../../nesting.js';

/** How a journaled run goes on: from a resume point, or (no turn of it was journaled, so nothing of it ran) from its start again. */
export type Recovery = { readonly kind: 'point'; readonly start: RunStartedEntry; readonly point: ResumePoint } | { readonly kind: 'again'; readonly start: RunStartedEntry };

/** What recovery needs to know of the tools: whether a tool is declared idempotent, and whether such calls run again. */
export interface RecoveryRules {
  readonly idempotent: (tool: string) => boolean;
  /** Run a call of an idempotent tool that was in flight again, rather than failing it "Safe to call again". */
  readonly callIdempotentAgain: boolean;
}

// One turn as its journal holds it.
interface JournaledTurn {
  answer: ModelResponse | undefined;
  readonly called: Map<number, ToolCall>;
  readonly dispatched: Map<number, CallDispatchedEntry>;
  readonly decided: Map<number, CallDecidedEntry>;
  readonly settled: Map<number, CallSettledEntry>;
}

function gap(runId: string, what: string): JournalError {
  return new JournalError(`the journal of run ${runId} cannot be read back: ${what}`);
}

// The turns of a journal, by number. A settled entry read twice keeps its first.
function turnsOf(entries: readonly JournalEntry[]): Map<number, JournaledTurn> {
  const turns = new Map<number, JournaledTurn>();
  const at = (n: number): JournaledTurn => {
    let turn = turns.get(n);
    if (turn === undefined) turns.set(n, (turn = { answer: undefined, called: new Map(), dispatched: new Map(), decided: new Map(), settled: new Map() }));
    return turn;
  };
  for (const entry of entries) {
    if (entry.kind === 'answered') at(entry.turn).answer = entry.response;
    else if (entry.kind === 'called') at(entry.turn).called.set(entry.index, entry.call);
    else if (entry.kind === 'dispatched') at(entry.turn).dispatched.set(entry.index, entry);
    else if (entry.kind === 'decided' && !at(entry.turn).decided.has(entry.index)) at(entry.turn).decided.set(entry.index, entry);
    else if (entry.kind === 'settled' && !at(entry.turn).settled.has(entry.index)) at(entry.turn).settled.set(entry.index, entry);
  }
  return turns;
}

// A turn's answer: as journaled, or (a streamed turn cut off before its end was written) every
// call the stream had completed, in call order. Each call of a streamed turn is journaled before
// anything else of it, and the journal writes in order, so a call the journal knows anything of
// comes with every call before it; a hole (a journal of an earlier version, whose dispatches
// carried the arguments) is refused rather than a call left out.
function answerOf(runId: string, n: number, turn: JournaledTurn): ModelResponse | undefined {
  if (turn.answer !== undefined) return turn.answer;
  let known = -1;
  for (const map of [turn.called, turn.dispatched, turn.decided, turn.settled]) for (const index of map.keys()) known = Math.max(known, index);
  if (known < 0) return undefined;
  const calls: ToolCall[] = [];
  for (let i = 0; i <= known; i++) {
    const written = turn.called.get(i);
    const dispatched = turn.dispatched.get(i);
    if (written !== undefined) calls.push(written);
    else if (dispatched !== undefined) calls.push({ id: dispatched.callId, name: dispatched.tool, arguments: (dispatched.args ?? {}) as ToolCall['arguments'] });
    else throw gap(runId, `call #${i + 1} of turn ${n}, a streamed turn, is missing while a later one is journaled`);
  }
  return { toolCalls: calls };
}

/** A run's journal, read back: where it goes on. Throws a JournalError for a run that cannot (unknown, ended, a gap in it). */
export function recoveryOf(runId: string, entries: readonly JournalEntry[], rules: RecoveryRules): Recovery {
  // Reading them back walks them recursively: an entry deeper than the library writes is refused, naming where.
  entries.forEach((entry, index) => {
    const deep = nestedTooDeep(entry, MAX_ENVELOPED);
    if (deep !== undefined) throw new JournalError(`run ${runId} cannot be recovered: ${describePath(`entries.${index}`, deep)} (a ${String(entry.kind)} entry) is nested more than ${MAX_ENVELOPED} levels deep`);
  });
  const start = entries[0];
  if (start?.kind !== 'started') throw new JournalError(`run ${runId} is not in the journal`);
  if (journaledEnd(entries)) throw new JournalError(`run ${runId} cannot be recovered: it ended`);
  const turns = turnsOf(entries);
  // The turns with an answer and calls; a later turn without one (its model was being asked) is asked again.
  let last = 0;
  for (const [n, turn] of turns) if ((answerOf(runId, n, turn)?.toolCalls?.length ?? 0) > 0 && n > last) last = n;
  if (last === 0) return { kind: 'again', start };
  const messages: Message[] = [...start.history, { role: 'user', content: start.input }];
  const events: RunEvent[] = [
    start.history.length === 0
      ? { type: 'RUN_STARTED', runId, agent: start.agent, tenant: start.tenant, input: start.input }
      : { type: 'RUN_STARTED', runId, agent: start.agent, tenant: start.tenant, input: start.input, history: start.history },
  ];
  let state: RunState = startingState(start.state);
  for (let n = 1; n < last; n++) {
    const turn = turns.get(n);
    const answer = turn === undefined ? undefined : answerOf(runId, n, turn);
    if (turn === undefined || answer === undefined) throw gap(runId, `turn ${n} has no answer`);
    told(messages, events, n, answer);
    const outcomes: Outcome[] = [];
    (answer.toolCalls ?? []).forEach((call, index) => {
      const settled = turn.settled.get(index);
      if (settled === undefined) throw gap(runId, `call ${call.id} of turn ${n} has no outcome`);
      outcomes.push(settled.outcome);
      messages.push(toolMessage(settled.outcome, settled.content));
      events.push(toOutcomeEvent(n, settled.outcome));
    });
    if (outcomes.some((o) => o.kind === 'result' && o.delta !== undefined)) state = Object.freeze(assignDelta({ ...state }, mergeDeltas(outcomes)));
  }
  const turn = turns.get(last)!;
  const answer = answerOf(runId, last, turn)!;
  told(messages, events, last, answer);
  const calls = (answer.toolCalls ?? []).map((call, index): ResumedCall | undefined => {
    const settled = turn.settled.get(index);
    if (settled !== undefined) {
      messages.push(toolMessage(settled.outcome, settled.content));
      events.push(toOutcomeEvent(last, settled.outcome));
      return { outcome: settled.outcome, told: true };
    }
    // Decided before the crash, not yet settled (an earlier call still ran): settled now, never run again.
    const decided = turn.decided.get(index);
    if (decided !== undefined) return { outcome: decided.outcome, gated: true };
    if (!turn.dispatched.has(index)) return undefined;
    const idempotent = rules.idempotent(call.name);
    if (idempotent && rules.callIdempotentAgain) return { gated: true };
    const error = toErrorInfo(new ProcessStoppedError(processStopped()));
    return { outcome: lostOutcome({ callId: call.id, tool: call.name, idempotent }, index, error), gated: true };
  });
  return { kind: 'point', start, point: { runId, turn: last, messages, state, calls, events } };
}

// A turn's answer, in the conversation and the transcript.
function told(messages: Message[], events: RunEvent[], n: number, answer: ModelResponse): void {
  const { text, toolCalls = [] } = answer;
  messages.push({ role: 'assistant', content: text ?? '', ...(toolCalls.length > 0 ? { toolCalls } : {}) });
  events.push(toResponseEvent(n, answer));
}
