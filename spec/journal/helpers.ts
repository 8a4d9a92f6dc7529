// What the journal specs share: a journal whose writes the spec lets land (or fail) when it
// chooses, and small runner fixtures.
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type ModelResponse, type RunJournal } from '../../lib/index.js';
import { GroupCommit, type JournalRow } from '../../lib/journal/groupCommit.js';
import { InMemoryRunJournal } from '../../lib/journal/InMemoryRunJournal.js';
import type { JournalEntry, RecoverableRun } from '../../lib/runner/journal/runJournal.js';

/** A journal over an in-memory one whose every flush waits for the spec: `land()` or `fail(error)` the oldest. */
export class HeldJournal extends GroupCommit {
  readonly inner = new InMemoryRunJournal();
  /** The flushes waiting, oldest first: the rows of each. */
  readonly flushes: Array<{ rows: readonly JournalRow[]; land: () => void; fail: (error: Error) => void }> = [];

  protected write(rows: readonly JournalRow[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.flushes.push({
        rows,
        land: () => {
          for (const { entry } of rows) this.inner.append(entry);
          void this.inner.flushed().then(resolve);
        },
        fail: reject,
      });
    });
  }

  /** Lets the oldest waiting flush land; resolves once its waiters have heard. */
  async land(): Promise<readonly JournalEntry[]> {
    const flush = this.flushes.shift();
    if (flush === undefined) throw new Error('no flush is waiting');
    flush.land();
    await settle();
    return flush.rows.map((row) => row.entry);
  }

  async fail(error: Error): Promise<void> {
    const flush = this.flushes.shift();
    if (flush === undefined) throw new Error('no flush is waiting');
    flush.fail(error);
    await settle();
  }

  read(runId: string): Promise<readonly JournalEntry[]> {
    return this.inner.read(runId);
  }

  recoverable(): Promise<readonly RecoverableRun[]> {
    return this.inner.recoverable();
  }

  protected take(): Promise<number | undefined> {
    return Promise.resolve(undefined);
  }

  protected takeSnapshot(): Promise<number | undefined> {
    return Promise.resolve(undefined);
  }
}

/** A body's answer that never comes, until the call is stopped (so a spec's left runs end, and their bodies with them). */
export function untilStopped(signal: AbortSignal): Promise<never> {
  return new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true }));
}

/** Lets every pending microtask and a macrotask run. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export const agent = new Agent({ name: 'journaled', instructions: '', model: 'scripted' });

/** One turn asking for `ids` (each `tool` with args { id }), then the answer "done". */
export function script(calls: ReadonlyArray<readonly [id: string, tool: string]>): ModelResponse[] {
  return [{ toolCalls: calls.map(([id, tool]) => ({ id, name: tool, arguments: { id } })) }, { text: 'done' }];
}

export function runnerWith(journal: RunJournal, tools: ToolRegistry, turns: ModelResponse[], extra: Partial<ConstructorParameters<typeof AgentRunner>[0]> = {}): AgentRunner {
  return new AgentRunner({ provider: new ScriptedProvider(turns), tools, journal, ...extra });
}

/** The kinds of `entries`, with the call index of those that have one: `dispatched:0`. */
export function kinds(entries: readonly JournalEntry[]): string[] {
  return entries.map((entry) => ('index' in entry ? `${entry.kind}:${entry.index}` : entry.kind));
}
