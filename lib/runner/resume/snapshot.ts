// A run's snapshot: everything a later process needs to go on with a run that waits for a
// person, as plain JSON. Its format and version say how to read it; its fingerprint, which agent
// and tools it was taken with; its digest, that nobody changed it since. `resumePointOf` reads
// one back, with the person's answers, as the resume point the run goes on from. The format's
// types are in snapshotFormat.ts, which imports nothing of the runner's.
import { createHash } from 'node:crypto';
import { isLeft } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { errorOutcome, type Outcome } from '../../batch/index.js';
import { canonicalJson } from '../../canonical.js';
import { describeFailures, describeValue } from '../../config/index.js';
import { ConfigError, ToolRejectedError, toErrorInfo } from '../../errors.js';
import { describePath, MAX_ENVELOPED, nestedTooDeep } from '../../nesting.js';
import { own } from '../../own.js';
import type { ResumedCall, ResumePoint } from './resumePoint.js';
import { snapshotFormat, snapshotVersion, type Approvals, type NestedResume, type PendingCall, type RunSnapshot } from './snapshotFormat.js';

/** The snapshot's digest: what it holds apart from its digest, hashed. */
export function snapshotDigest(snapshot: Omit<RunSnapshot, 'digest'> & { readonly digest?: string }): string {
  const { digest: _digest, ...rest } = snapshot;
  return createHash('sha256').update(canonicalJson(rest)).digest('hex');
}

/** The calls waiting for a person in `snapshot`, its nested runs' included (their ids prefixed by their caller's). */
export function pendingOf(snapshot: RunSnapshot, prefix = ''): PendingCall[] {
  const pending: PendingCall[] = [];
  for (const call of snapshot.calls) {
    if (call.status === 'approval') pending.push({ callId: prefix + call.callId, tool: call.tool, args: call.args });
    else if (call.status === 'nested') pending.push(...pendingOf(call.snapshot, `${prefix}${call.callId}/`));
  }
  return pending;
}

const Usage = t.type({ inputTokens: t.number, outputTokens: t.number });
const Call = t.type({ status: t.keyof({ told: null, settled: null, approval: null, held: null, nested: null }), callId: t.string, tool: t.string });
const Snapshot = t.intersection([
  t.type({
    format: t.literal(snapshotFormat),
    version: t.number,
    runId: t.string,
    agent: t.string,
    fingerprint: t.string,
    tenant: t.string,
    turn: t.number,
    messages: t.array(t.type({ role: t.keyof({ user: null, assistant: null, tool: null }), content: t.string })),
    state: t.UnknownRecord,
    calls: t.array(Call),
    digest: t.string,
  }),
  t.partial({ usage: Usage, nestedUsage: Usage }),
]);
const Outcome = t.type({ kind: t.keyof({ result: null, error: null, indeterminate: null }), index: t.number, callId: t.string, tool: t.string, dispatched: t.boolean });

/**
 * Checks a snapshot read back (from a store, a request, a file) before anything is done with it:
 * its format and version first (a newer one is refused, not guessed at), then its shape, then
 * its digest. A ConfigError names the field (`snapshot.version`, `snapshot.calls.1.outcome`).
 */
export function checkedSnapshot(value: unknown, root = 'snapshot'): RunSnapshot {
  if (value === null || typeof value !== 'object') throw new ConfigError(root, `${root} must be a run snapshot (an object), got ${describeValue(value)}`);
  const { format, version } = value as { format?: unknown; version?: unknown };
  if (format !== snapshotFormat) throw new ConfigError(`${root}.format`, `${root}.format must be ${JSON.stringify(snapshotFormat)}, got ${describeValue(format)}`);
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) throw new ConfigError(`${root}.version`, `${root}.version must be a positive integer, got ${describeValue(version)}`);
  if (version > snapshotVersion) throw new ConfigError(`${root}.version`, `${root}.version is ${version}, newer than this library reads (${snapshotVersion}): resume it with the version that took it`);
  // Its digest and its decoding walk it recursively: deeper than any run writes is refused first, naming where.
  const deep = nestedTooDeep(value, MAX_ENVELOPED);
  if (deep !== undefined) throw new ConfigError(describePath(root, deep), `${describePath(root, deep)} is nested more than ${MAX_ENVELOPED} levels deep`);
  const decoded = Snapshot.decode(value);
  if (isLeft(decoded)) throw new ConfigError(root, describeFailures(decoded.left, root));
  const snapshot = value as RunSnapshot;
  snapshot.calls.forEach((call, index) => {
    const field = `${root}.calls.${index}`;
    if ((call.status === 'told' || call.status === 'settled') && (isLeft(Outcome.decode(call.outcome)) || call.outcome.index !== index || call.outcome.callId !== call.callId)) {
      throw new ConfigError(`${field}.outcome`, `${field}.outcome must be the outcome of call ${call.callId} (#${index + 1}), got ${describeValue(call.outcome)}`);
    }
    if (call.status === 'nested') checkedSnapshot(call.snapshot, `${field}.snapshot`);
  });
  if (snapshotDigest(snapshot) !== snapshot.digest) throw new ConfigError(`${root}.digest`, `${root}.digest does not match what the snapshot holds: it was changed since it was taken`);
  return snapshot;
}

/**
 * The resume point of a checked snapshot, given the answers: every waiting call must be
 * answered, and nothing else may be (a ConfigError names `approvals.<callId>`). An approved call
 * runs without being asked again; a refused one ends as its TOOL_ERROR, with the reason given.
 */
export function resumePointOf(snapshot: RunSnapshot, approvals: Approvals): { point: ResumePoint; nested: Array<NestedResume | undefined> } {
  if (approvals === null || typeof approvals !== 'object') throw new ConfigError('approvals', `approvals must be an object of answers by callId, got ${describeValue(approvals)}`);
  const waiting = new Set(pendingOf(snapshot).map((p) => p.callId));
  for (const key of Object.keys(approvals)) {
    if (!waiting.has(key)) throw new ConfigError(`approvals.${key}`, `approvals.${key}: no call ${key} of this run waits for an answer (waiting: ${[...waiting].join(', ') || 'none'})`);
    const answer = approvals[key];
    if (typeof answer !== 'boolean' && (answer === null || typeof answer !== 'object' || answer.approved !== false || (answer.reason !== undefined && typeof answer.reason !== 'string'))) {
      throw new ConfigError(`approvals.${key}`, `approvals.${key} must be true, false or { approved: false, reason?: string }, got ${describeValue(answer)}`);
    }
  }
  for (const id of waiting) if (!Object.hasOwn(approvals, id)) throw new ConfigError(`approvals.${id}`, `approvals.${id}: call ${id} waits for an answer and got none`);
  const nested: Array<NestedResume | undefined> = [];
  const calls = snapshot.calls.map((call, index): ResumedCall | undefined => {
    switch (call.status) {
      case 'told':
        return { outcome: call.outcome, told: true, settled: true };
      case 'settled':
        return { outcome: call.outcome, settled: true };
      case 'held':
        return undefined;
      case 'nested': {
        const prefix = `${call.callId}/`;
        const own = Object.fromEntries(Object.entries(approvals).filter(([key]) => key.startsWith(prefix)).map(([key, answer]) => [key.slice(prefix.length), answer]));
        nested[index] = { snapshot: call.snapshot, approvals: own };
        return { gated: true };
      }
      case 'approval': {
        const answer = own(approvals, call.callId)!;
        if (answer === true) return { gated: true };
        const reason = answer === false ? 'not approved' : answer.reason ?? 'not approved';
        return { outcome: errorOutcome({ index, callId: call.callId, tool: call.tool }, false, toErrorInfo(new ToolRejectedError('approval', reason))) };
      }
    }
  });
  const { runId, turn, messages, state, usage, nestedUsage } = snapshot;
  return { point: { runId, turn, messages, state, calls, usage, nestedUsage }, nested };
}
