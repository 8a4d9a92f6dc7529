// Small builders for batch specs: calls whose bodies are marble Observables, and a
// one-line rendering of outcomes so marble expectations stay readable.
import { map, type Observable, type OperatorFunction } from 'rxjs';
import type { BatchCall, InvokeContext, Outcome } from '../../lib/batch/index.js';

export function call(callId: string, body: Observable<unknown> | ((context: InvokeContext) => unknown), extra: Partial<BatchCall> = {}): BatchCall {
  return { callId, tool: 'lookup', invoke: typeof body === 'function' ? body : () => body, ...extra };
}

/** `a=1` for a result, `a!Name` for an error, `a?` for an indeterminate outcome. */
export function brief(outcome: Outcome): string {
  switch (outcome.kind) {
    case 'result':
      return `${outcome.callId}=${String(outcome.result)}`;
    case 'error':
      return `${outcome.callId}!${outcome.error.name}`;
    case 'indeterminate':
      return `${outcome.callId}?`;
  }
}

export const briefly: OperatorFunction<Outcome, string> = map(brief);
