// runner.recover and runner.recoverable: a run whose process stopped, taken over from its
// journal (its lease claimed, so of two processes one wins) and carried on to its end.
import { describeValue } from '../../config/index.js';
import { ConfigError, JournalError } from '../../errors.js';
import type { Agent } from '../Agent.js';
import type { ResumePoint } from '../resume/resumePoint.js';
import { recoveryOf, type Recovery } from './recovery.js';
import { journaledEnd, type RecoverableRun, type RunJournal, type RunStartedEntry } from './runJournal.js';
import type { ToolRegistry } from '../../tools/index.js';
import type { RunOptions, RunResult } from '../types.js';
import type { RunInput } from '../model/model.js';

/** What `runner.recover` may be told. */
export interface RecoverOptions {
  /** Cancels the recovered run, as `run`'s signal does. */
  readonly signal?: AbortSignal;
  /**
   * Run again a call of an idempotent tool that was in flight when the process stopped, rather
   * than ending it "Safe to call again" for the model to decide. Default false.
   */
  readonly callIdempotentAgain?: boolean;
}

/** What recovery needs of its runner. */
export interface RecoveringRunner {
  readonly journal: RunJournal | undefined;
  readonly tools: ToolRegistry;
  run(agent: Agent, input: RunInput, options: RunOptions): Promise<RunResult>;
  runFrom(agent: Agent, point: ResumePoint, options: RunOptions): Promise<RunResult>;
  /** Checks a run's agent, input and options as starting it would (a ConfigError), starting nothing. */
  checkRun(agent: Agent, input: RunInput, options: RunOptions, point?: ResumePoint): void;
}

const recoverFields = new Set(['signal', 'callIdempotentAgain']);

/** A runner's `journal` option, checked: a RunJournal or undefined. */
export function checkedJournal(journal: unknown): RunJournal | undefined {
  if (journal === undefined) return undefined;
  const methods = journal !== null && typeof journal === 'object' ? (journal as Partial<Record<string, unknown>>) : undefined;
  if (methods === undefined || typeof methods['append'] !== 'function' || typeof methods['claim'] !== 'function' || typeof methods['read'] !== 'function' || typeof methods['resume'] !== 'function') {
    throw new ConfigError('journal', `journal must be a RunJournal (an InMemoryRunJournal, a PostgresRunJournal), got ${describeValue(journal)}`);
  }
  return journal as RunJournal;
}

function journalOf(runner: RecoveringRunner): RunJournal {
  if (runner.journal === undefined) throw new ConfigError('journal', 'recovery reads a run journal: make the runner with one (new AgentRunner({ ..., journal }))');
  return runner.journal;
}

/** The runs of the runner's journal whose owner is gone. */
export function recoverableRuns(runner: RecoveringRunner): Promise<readonly RecoverableRun[]> {
  try {
    return journalOf(runner).recoverable();
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Takes over run `runId` from the journal, and carries it on to its end. */
export async function recoverRun(runner: RecoveringRunner, agent: Agent, runId: string, options: RecoverOptions): Promise<RunResult> {
  const journal = journalOf(runner);
  if (typeof runId !== 'string' || runId === '') throw new ConfigError('runId', `runId must be a non-empty string, got ${describeValue(runId)}`);
  if (options === null || typeof options !== 'object') throw new ConfigError('options', `recover options must be an object, got ${describeValue(options)}`);
  for (const key of Object.keys(options)) if (!recoverFields.has(key)) throw new ConfigError(key, `recover options have no field ${key}; they take signal, callIdempotentAgain`);
  const { signal, callIdempotentAgain = false } = options;
  if (typeof callIdempotentAgain !== 'boolean') throw new ConfigError('callIdempotentAgain', `callIdempotentAgain must be a boolean, got ${describeValue(callIdempotentAgain)}`);
  const { tools } = runner;
  const rules = { idempotent: (tool: string) => tools.get(tool)?.declaration.idempotent === true, callIdempotentAgain };
  // Everything that can refuse is checked before the claim: a refused recover takes nothing.
  const before = await journal.read(runId);
  const planned = plannedRecovery(runner, agent, runId, recoveryOf(runId, before, rules), signal);
  if (!(await journal.claim(runId))) {
    const entries = await journal.read(runId);
    if (journaledEnd(entries)) throw new JournalError(`run ${runId} cannot be recovered: it ended`);
    throw new JournalError(`run ${runId} is another process's: its owner's lease has not lapsed (or another process recovered it first)`);
  }
  // Read again now that it is ours: its last owner may have written more before its lease lapsed.
  const entries = await journal.read(runId);
  const { recovery, options: runOptions } = entries.length === before.length ? planned : plannedRecovery(runner, agent, runId, recoveryOf(runId, entries, rules), signal);
  if (recovery.kind === 'point') return runner.runFrom(agent, recovery.point, runOptions);
  // Nothing of it ran (no answer of its model was journaled): it starts again as a new run, and the old one ends saying so.
  const { start } = recovery;
  journal.append({ kind: 'ended', runId, event: { type: 'RUN_CANCELLED', reason: 'the process running it stopped before its first answer; recovered as a new run' } });
  return runner.run(agent, againInput(start), { ...runOptions, state: start.state });
}

// The conversation a run that starts again is asked with.
function againInput(start: RunStartedEntry): RunInput {
  return [...start.history, { role: 'user', content: start.input }];
}

// A recovery checked against the agent and the runner (its agent's, its tools here): a
// ConfigError for the first thing that does not fit, before anything is claimed.
function plannedRecovery(runner: RecoveringRunner, agent: Agent, runId: string, recovery: Recovery, signal: AbortSignal | undefined): { recovery: Recovery; options: RunOptions } {
  const { start } = recovery;
  if (start.agent !== agent.name) throw new ConfigError('agent', `run ${runId} is agent ${start.agent}'s, not ${agent.name}'s`);
  const options: RunOptions = { tenant: start.tenant, maxTurns: start.maxTurns, ...(signal === undefined ? {} : { signal }) };
  if (recovery.kind === 'point') runner.checkRun(agent, '', options, recovery.point);
  else runner.checkRun(agent, againInput(start), { ...options, state: start.state });
  return { recovery, options };
}
