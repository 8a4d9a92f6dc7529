// runner.resume's checks: a snapshot read back, refused unless it was taken of this agent with
// these tools, for this tenant, unchanged since, in a format this library reads; then the
// person's answers, as the resume point the run goes on from (resumePoint.ts).
import { describeValue } from '../../config/index.js';
import { ConfigError } from '../../errors.js';
import type { ToolRegistry } from '../../tools/index.js';
import { Agent } from '../Agent.js';
import { agentFingerprint } from './fingerprint.js';
import type { ResumePoint } from './resumePoint.js';
import { checkedSnapshot, resumePointOf } from './snapshot.js';
import type { Approvals } from './snapshotFormat.js';
import type { ResumeOptions, RunOptions } from '../types.js';

/** resume's options: the answers, apart from the run's own options. */
export function resumeOptions(options: ResumeOptions): { approvals: Approvals; runOptions: RunOptions } {
  if (options === null || typeof options !== 'object') throw new ConfigError('options', `resume options must be an object with approvals, got ${describeValue(options)}`);
  const { approvals, ...runOptions } = options;
  if (approvals === null || typeof approvals !== 'object') throw new ConfigError('approvals', `approvals must be an object of answers by callId, got ${describeValue(approvals)}`);
  return { approvals, runOptions };
}

/**
 * The resume point of `value`, a run's snapshot, for `agent` on a runner with `tools`, given the
 * person's `approvals` and the resumed run's options: a ConfigError names the first field that
 * does not fit (`snapshot.fingerprint`, `tenant`, `approvals.c2`...).
 */
export function resumePointFor(agent: Agent, tools: ToolRegistry, value: unknown, approvals: Approvals, options: RunOptions): ResumePoint {
  if (!(agent instanceof Agent)) throw new ConfigError('agent', `agent must be an Agent, got ${describeValue(agent)}`);
  const snapshot = checkedSnapshot(value);
  if (snapshot.agent !== agent.name) throw new ConfigError('snapshot.agent', `snapshot.agent is ${JSON.stringify(snapshot.agent)}: the snapshot was taken of another agent than ${JSON.stringify(agent.name)}`);
  if (snapshot.fingerprint !== agentFingerprint(agent, tools)) {
    throw new ConfigError('snapshot.fingerprint', `snapshot.fingerprint does not match agent ${agent.name} and its tools here: the agent (instructions, model, output) or its tools (descriptions, arguments, idempotent, needsApproval) changed since the snapshot was taken`);
  }
  const tenant = options.tenant ?? 'default';
  if (snapshot.tenant !== tenant) throw new ConfigError('tenant', `the snapshot is of a run of tenant ${JSON.stringify(snapshot.tenant)}, not ${JSON.stringify(tenant)}: a run is resumed for its own tenant only`);
  const { point, nested } = resumePointOf(snapshot, approvals);
  return { ...point, calls: point.calls.map((call, index) => (nested[index] === undefined ? call : { ...call, nested: nested[index] })) };
}
