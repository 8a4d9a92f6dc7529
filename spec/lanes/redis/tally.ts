// How a worker process's runs ended, as it tells its parent: the calls that succeeded, and
// every other call's event as JSON.
import type { RunResult } from '../../../lib/runner/index.js';

export function tally(results: readonly RunResult[]): { results: number; others: string[] } {
  let ok = 0;
  const others: string[] = [];
  for (const result of results) {
    for (const event of result.events) {
      if (event.type === 'TOOL_RESULT') ok++;
      else if (event.type === 'TOOL_ERROR' || event.type === 'TOOL_INDETERMINATE') others.push(JSON.stringify(event));
    }
  }
  return { results: ok, others };
}
