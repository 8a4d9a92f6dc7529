// Builders for the operator specs: real records of a real batch (no fakes), and a one-word
// rendering of a record as it passes, so a marble expectation reads as what happened to it.
import { map, type OperatorFunction } from 'rxjs';
import { BatchScope, CallBody, type BatchCall, type BatchScopeOptions, type CallNews, type CallRecord, type Outcome } from '../../../lib/batch/index.js';
import { brief } from '../helpers.js';

/** One batch and a record for each call, numbered in the order given. */
export function recordsOf(calls: readonly BatchCall[], options: BatchScopeOptions = {}): { batch: BatchScope; records: CallRecord[] } {
  const batch = new BatchScope(options);
  return { batch, records: calls.map((call, index) => batch.record(call, index)) };
}

/** The records by call id, for marble values. */
export function byId(records: readonly CallRecord[]): Record<string, CallRecord> {
  return Object.fromEntries(records.map((record) => [record.call.callId, record]));
}

/**
 * A record as it passes: `a` before its lanes, `a~` queued, `a>` its body starting (its
 * `CallBody`), and once ended its outcome as `brief` writes it (`a=1`, `a!Name`, `a?`). A refusal
 * reads `a!Name:message`.
 */
export function label(news: CallNews): string {
  if (news instanceof CallBody) return `${news.record.call.callId}>`;
  const record = news;
  const { callId } = record.call;
  if (record.outcome !== undefined) return brief(record.outcome);
  switch (record.state) {
    case 'arrived': {
      const refused = record.refused ?? record.call.refused;
      return refused === undefined ? callId : `${callId}!${refused.name}:${refused.message}`;
    }
    case 'queued':
    case 'writing':
      return `${callId}~`;
    default:
      // Running, or torn down (no outcome yet): by whether its body started.
      return record.starts > 0 ? `${callId}>` : `${callId}~`;
  }
}

/** Labels each record the moment it passes (a record changes as it goes on). */
export const labelled: OperatorFunction<CallNews, string> = map(label);

/** A result outcome for `record`, as a cache or a stop would decide it. */
export function resultOf(record: CallRecord, result: unknown, dispatched = false): Outcome {
  return { index: record.index, callId: record.call.callId, tool: record.call.tool, kind: 'result', dispatched, result, delta: undefined };
}

/** A batch whose calls (one per letter of `ids`) all have their result already: the letter itself. */
export function decided(ids: string, options: BatchScopeOptions = {}): { batch: BatchScope; records: CallRecord[] } {
  const made = recordsOf([...ids].map((id) => ({ callId: id, tool: 'lookup', invoke: () => id })), options);
  for (const record of made.records) record.decide(resultOf(record, record.call.callId, true));
  return made;
}
