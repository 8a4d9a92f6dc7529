// What the live view streams, without a browser: every scenario's calls, activity and
// transcript in order, then `done`; and a page closed mid-scenario cancels that run
// (classified, RUN_CANCELLED) and starts no other.
import { expect } from 'chai';
import { liveEvents, type LiveEvent } from '../../examples/live/server.js';
import { scenarios } from '../../examples/scenarios.js';

describe('the live view stream', () => {
  it('plays the first scenario as its calls, then activity and transcript, and ends with done', async () => {
    const events: LiveEvent[] = [];
    await new Promise<void>((resolve, reject) =>
      liveEvents(new AbortController().signal, scenarios.slice(0, 1)).subscribe({ next: (e) => events.push(e), error: reject, complete: resolve }),
    );
    expect(events[0]).to.include({ type: 'scenario', index: 0, title: scenarios[0]!.title });
    expect(events[events.length - 1]).to.deep.equal({ type: 'done', scenarios: 1 });
    const transcript = events.flatMap((e) => (e.type === 'transcript' ? [e.event.type] : []));
    expect(transcript).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'TOOL_RESULT', 'TOOL_RESULT', 'TOOL_RESULT', 'TOOL_RESULT', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
    const started = events.flatMap((e) => (e.type === 'activity' && e.activity.type === 'started' ? [e.activity.callId] : []));
    expect([...started].sort()).to.deep.equal(['c1', 'c2', 'c3', 'c4']);
  });

  it('cancels the running scenario when the client leaves, classified, and plays no other', async () => {
    const controller = new AbortController();
    const events: LiveEvent[] = [];
    await new Promise<void>((resolve, reject) =>
      liveEvents(controller.signal).subscribe({
        next: (e) => {
          events.push(e);
          if (e.type === 'activity' && e.activity.type === 'started' && e.activity.callId === 'c4') controller.abort();
        },
        error: reject,
        complete: resolve,
      }),
    );
    expect(events.filter((e) => e.type === 'scenario').map((e) => (e.type === 'scenario' ? e.index : -1))).to.deep.equal([0]);
    expect(events.some((e) => e.type === 'done')).to.equal(false);
    const transcript = events.flatMap((e) => (e.type === 'transcript' ? [e.event.type] : []));
    // The lookups are idempotent: stopped in flight, each is a TOOL_ERROR that is safe to call again.
    expect(transcript).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'TOOL_ERROR', 'TOOL_ERROR', 'TOOL_ERROR', 'TOOL_ERROR', 'RUN_CANCELLED']);
  });
});
