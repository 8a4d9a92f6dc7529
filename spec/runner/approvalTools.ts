// The tools of the interrupt specs, as each process would register them: lookup, book (needs
// approval, records what it booked) and audit (not parallel-safe), with spies on their bodies.
import * as t from 'io-ts';
import sinon from 'sinon';
import { ToolRegistry } from '../../lib/index.js';

/** A registry as each process would build it: lookup, book (needs approval), audit (not parallel-safe); spies on their bodies. */
export function toolsWithSpies() {
  const lookup = sinon.spy((args: unknown) => `found ${(args as { q: string }).q}`);
  const book = sinon.spy((args: unknown, ctx: { record(delta: Record<string, unknown>): void }) => {
    ctx.record({ booked: (args as { room: number }).room });
    return `booked ${(args as { room: number }).room}`;
  });
  const audit = sinon.spy(() => 'audited');
  const tools = new ToolRegistry()
    .register({ name: 'lookup', args: t.type({ q: t.string }) }, lookup)
    .register({ name: 'book', description: 'books a room', args: t.type({ room: t.number }), needsApproval: true }, book)
    .register({ name: 'audit', parallelSafe: false }, audit);
  return { tools, lookup, book, audit };
}

