// The fingerprint of what a cassette was recorded with: the agent (name, instructions,
// model, output codec name) and each of its tools (description, argument schema, idempotent),
// hashed over canonical JSON. `parallelSafe` is not part of it: it changes scheduling only.
import { createHash } from 'node:crypto';
import { canonicalJson } from '../canonical.js';
import type { Agent } from '../runner/index.js';
import { schemaName, type JsonSchema, type ToolRegistry } from '../tools/index.js';
import { differences, type Difference } from './differences.js';
import { put } from '../own.js';

export interface FingerprintedAgent {
  readonly name: string;
  readonly instructions: string;
  readonly model: string;
  /** The output codec's name, or null for a free-text agent. */
  readonly output: string | null;
}

export interface FingerprintedTool {
  readonly description: string;
  /** The JSON Schema a provider is shown for the arguments. */
  readonly parameters: JsonSchema;
  /** Decides how a call stopped in flight is reported, so a replay must agree on it. */
  readonly idempotent: boolean;
}

/** What a run's determinism depends on, and its sha256 over canonical JSON. */
export interface Fingerprint {
  /** Hex sha256 of the canonical JSON of `{ agent, tools }`. */
  readonly sha256: string;
  readonly agent: FingerprintedAgent;
  /** The tools the agent may call, by name. */
  readonly tools: Readonly<Record<string, FingerprintedTool>>;
}

/** The hex sha256 of the canonical JSON of a fingerprint's parts. */
export function fingerprintHash(parts: Pick<Fingerprint, 'agent' | 'tools'>): string {
  return createHash('sha256').update(canonicalJson({ agent: parts.agent, tools: parts.tools })).digest('hex');
}

/**
 * The fingerprint of `agent` and the tools of `registry` it may call (all of them when the agent
 * names none). Registration order, `parallelSafe` and `needsApproval` do not change it.
 *
 * ## Example
 * ```ts
 * const a = fingerprint(agent, new ToolRegistry().register({ name: 'booking', parallelSafe: false }, book));
 * const b = fingerprint(agent, new ToolRegistry().register({ name: 'booking', parallelSafe: true }, book));
 * a.sha256 === b.sha256; // true
 * ```
 */
export function fingerprint(agent: Agent, registry: ToolRegistry): Fingerprint {
  const tools: Record<string, FingerprintedTool> = {};
  for (const name of agent.tools ?? registry.names) {
    const registered = registry.get(name);
    if (registered === undefined) continue;
    const value: FingerprintedTool = {
      description: registered.spec.description,
      parameters: registered.spec.parameters,
      idempotent: registered.declaration.idempotent,
    };
    put(tools, name, value);
  }
  const parts = {
    agent: { name: agent.name, instructions: agent.instructions, model: agent.model, output: agent.output === undefined ? null : schemaName(agent.output) },
    tools,
  };
  return { sha256: fingerprintHash(parts), ...parts };
}

/** What differs between two fingerprints, path by path (`tools.lookup.description`); empty when they agree. */
export function fingerprintChanges(recorded: Fingerprint, current: Fingerprint): Difference[] {
  return differences({ agent: recorded.agent, tools: recorded.tools }, { agent: current.agent, tools: current.tools });
}
