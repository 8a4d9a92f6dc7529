// The UI round trip of a run waiting for a person. The snapshot stays on the server, in a store
// the app passes (`SnapshotStore`; `InMemorySnapshotStore` for one process): the client is sent
// only the AI SDK's `tool-approval-request` parts, whose approval ids name the kept snapshot and
// the call; its next request carries the answers (`approval-responded` parts), and
// `resumeApproved` takes the snapshot back, once, for the tenant it belongs to, and resumes.
import { concatMap, from, type MonoTypeOperatorFunction, type Observable, of } from 'rxjs';
import { ApprovalRefusedError, ConfigError } from '../errors.js';
import { put } from '../own.js';
import type { Agent, AgentRunner, Approval, RunEvent, RunOptions, RunSnapshot, SnapshotStore } from '../runner/index.js';

export { InMemorySnapshotStore, type InMemorySnapshotStoreOptions, type KeptSnapshot, type SnapshotStore } from '../runner/resume/snapshotStore.js';

/** The approval id the UI is sent for a waiting call: the snapshot's key, then the call's id. */
export function approvalIdOf(snapshot: RunSnapshot, callId: string): string {
  return `${snapshot.digest}:${callId}`;
}

/**
 * Keeps the snapshot of a run that ends interrupted in `store`, before its RUN_INTERRUPTED goes
 * on (so no client is ever sent an approval id whose snapshot is not kept yet).
 */
export function keepSnapshots(store: SnapshotStore): MonoTypeOperatorFunction<RunEvent> {
  return concatMap((event) => {
    if (event.type !== 'RUN_INTERRUPTED') return of(event);
    const { snapshot } = event;
    return from(store.put(snapshot.digest, { tenant: snapshot.tenant, snapshot }).then(() => event));
  });
}

/** One answer a UI request carries: the approval id it was sent, and the person's answer. */
export interface ApprovalAnswer {
  readonly id: string;
  readonly approved: boolean;
  readonly reason?: string;
}

/**
 * The answers the last message of an AI SDK chat request carries: its tool parts in state
 * `approval-responded` (what `addToolApprovalResponse` sets). None when the last message is not
 * the assistant's, or answers nothing. Anything else in the messages is not read: a resumed run
 * goes on from its kept snapshot, whatever the client sends.
 */
export function approvalAnswers(messages: unknown): ApprovalAnswer[] {
  if (!Array.isArray(messages) || messages.length === 0) return [];
  const last = messages[messages.length - 1] as { role?: unknown; parts?: unknown };
  if (last === null || typeof last !== 'object' || last.role !== 'assistant' || !Array.isArray(last.parts)) return [];
  const answers: ApprovalAnswer[] = [];
  for (const part of last.parts as Array<{ state?: unknown; approval?: { id?: unknown; approved?: unknown; reason?: unknown } }>) {
    const approval = part?.state === 'approval-responded' ? part.approval : undefined;
    if (approval === undefined || typeof approval.id !== 'string' || typeof approval.approved !== 'boolean') continue;
    answers.push({ id: approval.id, approved: approval.approved, ...(typeof approval.reason === 'string' ? { reason: approval.reason } : {}) });
  }
  return answers;
}

/** What `resumeApproved` needs: the runner and agent that go on, and where the snapshots are kept. */
export interface ResumeApprovedOptions extends RunOptions {
  readonly runner: AgentRunner;
  readonly agent: Agent;
  readonly store: SnapshotStore;
  /** Whose request this is: only that tenant's runs may be answered. Default `'default'`. */
  readonly tenant?: string;
}

/**
 * The resumed run a UI request's answers are for (its events, cold), or undefined when the
 * request answers nothing (start a new run then). Refused with an ApprovalRefusedError, taking
 * nothing from the store and running nothing, when the answers are for a run that waits no more
 * (answered already: a replay), never kept, another tenant's, or for calls it does not wait on;
 * a run's arguments are the snapshot's, and no client can change them.
 */
export async function resumeApproved(messages: unknown, options: ResumeApprovedOptions): Promise<Observable<RunEvent> | undefined> {
  const { runner, agent, store, tenant = 'default', ...runOptions } = options;
  const answers = approvalAnswers(messages);
  if (answers.length === 0) return undefined;
  const keys = new Set(answers.map((answer) => answer.id.slice(0, Math.max(0, answer.id.indexOf(':')))));
  if (keys.size !== 1 || keys.has('')) throw new ApprovalRefusedError('calls', `the answers must all be for one waiting run, got approval ids ${answers.map((a) => JSON.stringify(a.id)).join(', ')}`);
  const [key] = keys as unknown as [string];
  const kept = await store.get(key);
  if (kept === undefined) throw new ApprovalRefusedError('unknown', 'the run these answers are for waits no more: it was answered already, or never waited here');
  if (kept.tenant !== tenant) throw new ApprovalRefusedError('tenant', 'the run these answers are for is not this tenant\'s');
  const approvals: Record<string, Approval> = {};
  for (const { id, approved, reason } of answers) put(approvals, id.slice(key.length + 1), approved ? true : { approved: false, ...(reason === undefined ? {} : { reason }) });
  let run$: Observable<RunEvent>;
  try {
    // Checked now (cold): answers for calls the run does not wait on, or missing ones, change nothing.
    run$ = runner.resume$(agent, kept.snapshot, { ...runOptions, tenant, approvals });
  } catch (error) {
    if (error instanceof ConfigError) throw new ApprovalRefusedError('calls', error.message);
    throw error;
  }
  if (!(await store.delete(key))) throw new ApprovalRefusedError('answered', 'the run these answers are for was answered already');
  return run$;
}
