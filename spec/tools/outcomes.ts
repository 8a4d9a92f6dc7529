// One line per call outcome of a run, for the MCP specs to compare: `id=result` (a string as
// itself, anything else as its JSON), `id!Name: message` for an error, `id? message` for an
// indeterminate call.
import type { RunEvent, RunResult } from '../../lib/index.js';

export function outcomes(result: RunResult): string[] {
  return result.events.flatMap((event: RunEvent) => {
    if (event.type === 'TOOL_RESULT') return [`${event.callId}=${typeof event.result === 'string' ? event.result : JSON.stringify(event.result)}`];
    if (event.type === 'TOOL_ERROR') return [`${event.callId}!${event.error.name}: ${event.error.message}`];
    if (event.type === 'TOOL_INDETERMINATE') return [`${event.callId}? ${event.message}`];
    return [];
  });
}
