// A copy of a ToolRegistry with the same declarations and other bodies: how a recorder
// listens to each call (its deltas, whether it was dispatched) and how a replay answers
// each call from the cassette, using only the registry's public API.
import { ToolRegistry, type ResolvedDeclaration, type Schema, type ToolBody } from '../tools/index.js';

/**
 * A new registry holding every tool of `registry`, in the same order and with the same
 * declaration (so providers are shown exactly the same specs), each with `bodyOf(declaration, body)`.
 */
export function rebodied(registry: ToolRegistry, bodyOf: (declaration: ResolvedDeclaration, body: ToolBody<unknown>) => ToolBody<unknown>): ToolRegistry {
  const copy = new ToolRegistry();
  for (const name of registry.names) {
    const { declaration, body } = registry.get(name)!;
    const { description, args, parallelSafe, idempotent, needsApproval, parameters, lane } = declaration;
    // The parameters shown go along (a Standard Schema without a converter has no others), and
    // the tool's own lane (an MCP server's), so a recorded or replayed run is bounded as the real one.
    copy.register<Schema | undefined>(
      { name, description, ...(args !== undefined ? { args } : {}), ...(parameters !== undefined ? { parameters } : {}), ...(lane !== undefined ? { lane } : {}), parallelSafe, idempotent, needsApproval },
      bodyOf(declaration, body),
    );
  }
  return copy;
}
