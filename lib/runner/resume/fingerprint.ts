// What a paused run must find again to go on: the agent (name, instructions, model, output
// schema's name) and each tool it may call (description, argument schema, idempotent, whether
// it needs approval), hashed over canonical JSON. A snapshot or a journal carries it, and a run
// resumed elsewhere is refused when the agent or its tools changed meanwhile.
import { createHash } from 'node:crypto';
import { canonicalJson } from '../../canonical.js';
import { schemaName, type ToolRegistry } from '../../tools/index.js';
import type { Agent } from '../Agent.js';

/** The hex sha256 of what a resumed run relies on of `agent` and the tools of `registry` it may call. */
export function agentFingerprint(agent: Agent, registry: ToolRegistry): string {
  const tools: Array<readonly [string, unknown]> = [];
  for (const name of agent.tools ?? registry.names) {
    const registered = registry.get(name);
    if (registered === undefined) continue;
    const { spec, declaration } = registered;
    tools.push([name, { description: spec.description, parameters: spec.parameters, idempotent: declaration.idempotent, needsApproval: declaration.needsApproval }]);
  }
  // Sorted: the order tools were registered in changes nothing a run relies on.
  tools.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const parts = {
    agent: { name: agent.name, instructions: agent.instructions, model: agent.model, output: agent.output === undefined ? null : schemaName(agent.output) },
    tools: Object.fromEntries(tools),
  };
  return createHash('sha256').update(canonicalJson(parts)).digest('hex');
}
