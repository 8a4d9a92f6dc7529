// What a turn needs of its run, and what it tells it. The run (run.ts) is the one there is, and
// the one place its state changes: a turn reads what it is given here, and hands each thing that
// happened (the model's response, a call's outcome, the batch's end, the final event) to the
// method that records it, which returns the events to emit. No file of turn/ imports the run.
import type { Observable } from 'rxjs';
import type { Outcome, StopReason } from '../../batch/index.js';
import type { OnGrant, Permit } from '../../lanes/index.js';
import type { RunEvent, ToolOutcomeEvent } from '../events.js';
import type { RunJournaling } from '../journal/journaling.js';
import type { Message, ModelRequest, ModelResponse, ToolCall } from '../model/model.js';
import type { CallsFrom, RunnerCall, TurnScope } from './turnCalls.js';

/** A run as its turns see it. */
export interface TurnRun extends CallsFrom {
  /** Where the run is journaled, if it is (a streamed turn's calls are, as they are written). */
  readonly journal: RunJournaling | undefined;
  /** The run's first stop, once it came. */
  readonly stopped: StopReason | undefined;
  /** The run's stop, replayed to whoever listens after it came; undefined when nothing outside can stop it. */
  readonly stop$: Observable<StopReason> | undefined;

  /** The turn's place in its tenant's token budget, asked of it (`turn` told of a later grant); undefined without a budget. */
  budgetFor(turn: OnGrant): Permit | undefined;
  /** The turn's request: the conversation so far and the tools the agent may call now; the turn's bodies read that conversation. */
  request(): ModelRequest;
  /** What a turn's calls share; `asked` is the conversation as the model was sent it (a resumed turn's, from its point). */
  scope(asked?: readonly Message[]): TurnScope;
  /** The turn's calls as one batch, whole or streamed; `contents` receives each result's JSON as it settles. */
  batchOf(turn: number, given: readonly RunnerCall[] | Observable<RunnerCall>, contents: Array<string | undefined>, stop$?: Observable<StopReason>): Observable<Outcome>;
  /** A piece of the model's text as it is written, for whoever watches activity$. */
  activityText(turn: number, delta: string): void;
  /** A streamed turn's call, complete as the model wrote it (its place in the turn `index`), for whoever watches activity$. */
  activityCall(turn: number, index: number, call: ToolCall): void;

  /** The model's response: recorded, and its event returned. */
  responded(turn: number, response: ModelResponse): RunEvent;
  /** A call's outcome: recorded, and its event returned (none while the turn keeps it back for a person). */
  tookOutcome(turn: number, outcome: Outcome, contents: ReadonlyArray<string | undefined>): ToolOutcomeEvent | undefined;
  /** The turn's batch is over: what the run does next, as the events to emit. `failure` is a broken stream's. */
  after(turn: number, outcomes: readonly Outcome[], failure?: RunEvent): readonly RunEvent[];
  /** The run's final event, or undefined if it ended already. */
  end(event: RunEvent): RunEvent | undefined;
}
