// A copy of a ToolRegistry with the same declarations and other bodies: how a recorder
// listens to each call (its deltas, whether it was dispatched) and how a replay answers
// each call from the cassette, using only the registry's public API.
import type * as t from 'io-ts';
import { ToolRegistry, type ResolvedDeclaration, type ToolBody } from '../tools/index.js';

/**
 * A new registry holding every tool of `registry`, in the same order and with the same
 * declaration (so providers are shown exactly the same specs), each with `bodyOf(declaration, body)`.
 */
export function rebodied(registry: ToolRegistry, bodyOf: (declaration: ResolvedDeclaration, body: ToolBody<unknown>) => ToolBody<unknown>): ToolRegistry {
  const copy = new ToolRegistry();
  for (const name of registry.names) {
    const { declaration, body } = registry.get(name)!;
    const { description, args, parallelSafe, idempotent, needsApproval } = declaration;
    copy.register<t.Decoder<unknown, unknown> | undefined>(
      { name, description, ...(args !== undefined ? { args } : {}), parallelSafe, idempotent, needsApproval },
      bodyOf(declaration, body),
    );
  }
  return copy;
}
