// runner.recover and runner.recoverable: a run whose process stopped, taken over from its
// journal (its lease claimed, so of two processes one wins) and carried on to its end.
import { describeValue } from '../config/index.js';
import { ConfigError, JournalError } from '../errors.js';
import type { Agent } from './Agent.js';
import type { ResumePoint } from './resumePoint.js';
import { recoveryOf } from './recovery.js';
import type { RecoverableRun, RunJournal } from './runJournal.js';
import type { ToolRegistry } from '../tools/index.js';
import type { RunOptions, RunResult } from './types.js';
import type { RunInput } from './model.js';

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
}

const recoverFields = new Set(['signal', 'callIdempotentAgain']);

/** A runner's `journal` option, checked: a RunJournal or undefined. */
export function checkedJournal(journal: unknown): RunJournal | undefined {
  if (journal === undefined) return undefined;
  const methods = journal !== null && typeof journal === 'object' ? (journal as Partial<Record<string, unknown>>) : undefined;
  if (methods === undefined || typeof methods['append'] !== 'function' || typeof methods['claim'] !== 'function' || typeof methods['read'] !== 'function') {
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
  if (!(await journal.claim(runId))) {
    const entries = await journal.read(runId);
    if (entries.length === 0) throw new JournalError(`run ${runId} is not in the journal`);
    if (entries.some((entry) => entry.kind === 'ended')) throw new JournalError(`run ${runId} cannot be recovered: it ended`);
    throw new JournalError(`run ${runId} is another process's: its owner's lease has not lapsed (or another process recovered it first)`);
  }
  const entries = await journal.read(runId);
  const { tools } = runner;
  const recovery = recoveryOf(runId, entries, { idempotent: (tool) => tools.get(tool)?.declaration.idempotent === true, callIdempotentAgain });
  const { start } = recovery;
  if (start.agent !== agent.name) throw new ConfigError('agent', `run ${runId} is agent ${start.agent}'s, not ${agent.name}'s`);
  const runOptions: RunOptions = { tenant: start.tenant, maxTurns: start.maxTurns, ...(signal === undefined ? {} : { signal }) };
  if (recovery.kind === 'point') return runner.runFrom(agent, recovery.point, runOptions);
  // Nothing of it ran (no answer of its model was journaled): it starts again as a new run, and the old one ends saying so.
  journal.append({ kind: 'ended', runId, event: { type: 'RUN_CANCELLED', reason: 'the process running it stopped before its first answer; recovered as a new run' } });
  return runner.run(agent, [...start.history, { role: 'user', content: start.input }], { ...runOptions, state: start.state });
}
