// One line per transcript event, for specs that compare a run's events at a glance.
import type { RunEvent } from '../../lib/index.js';

export function summary(event: RunEvent): string {
  switch (event.type) {
    case 'RUN_STARTED':
      return 'START';
    case 'MODEL_RESPONSE':
      return `MODEL ${event.turn}`;
    case 'TOOL_RESULT':
      return `RESULT ${event.callId}`;
    case 'TOOL_ERROR':
      return `ERROR ${event.callId} ${event.error.name}`;
    case 'TOOL_INDETERMINATE':
      return `INDET ${event.callId}`;
    case 'RUN_CANCELLED':
      return 'CANCELLED';
    case 'RUN_INTERRUPTED':
      return `INTERRUPTED ${event.pending.map((p) => p.callId).join(' ')}`;
    case 'RUN_FAILED':
      return `FAILED ${event.error.name}`;
    case 'RUN_COMPLETED':
      return `COMPLETED ${String(event.output)}`;
  }
}
