// The UI message stream as a web ReadableStream, read with the `ai` package's own
// readUIMessageStream: the message it builds (tool parts in call order, errors, text), the
// stream closing when the run ends, a reader's cancel stopping the run, and an error reaching
// the reader.
import { expect } from 'chai';
import { readUIMessageStream, type UIMessage } from 'ai';
import { readUIMessageStream as readUIMessageStream7 } from 'ai7';
import { EMPTY, NEVER, Observable, throwError } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type Approve, type RunEvent } from '../../lib/index.js';
import { toUIMessageReadableStream, type UIMessageChunk } from '../../lib/streaming.js';
import { fixture, planner, threeLookups, twoWaiting } from './runs.js';

/** The parts of the last message readUIMessageStream builds, each as a short line. */
async function read(stream: ReadableStream<UIMessageChunk>, errors: unknown[] = []): Promise<string[]> {
  let message: UIMessage | undefined;
  for await (const snapshot of readUIMessageStream({ stream, onError: (error) => errors.push(error) })) message = snapshot;
  return (message?.parts ?? []).map((part) => {
    const p = part as Record<string, unknown>;
    if (part.type === 'text') return `text ${part.text}`;
    if ('toolCallId' in p) return `${part.type} ${String(p['toolCallId'])} ${String(p['state'])} ${p['state'] === 'output-error' ? String(p['errorText']) : JSON.stringify(p['output'])}`;
    return part.type;
  });
}

describe('toUIMessageReadableStream', () => {
  describe('a call not approved', () => {
    // Each major's own reader, fed the same stream: the state each gives the booking's part.
    const readers: Array<{ major: string; read: (stream: ReadableStream<UIMessageChunk>) => AsyncIterable<{ parts: readonly unknown[] }> }> = [
      { major: 'ai 6', read: (stream) => readUIMessageStream({ stream: stream as never }) },
      { major: 'ai 7', read: (stream) => readUIMessageStream7({ stream: stream as never }) },
    ];
    const refusals: Array<{ title: string; approve: Approve }> = [
      { title: 'approve says no', approve: () => false },
      { title: 'approve resolves no', approve: () => Promise.resolve(false) },
    ];
    for (const { major, read: readWith } of readers) {
      for (const { title, approve } of refusals) {
        it(`is the SDK's own denied state when ${title}, read by ${major}: output-denied, not an error`, async () => {
          const book = (): string => 'booked';
          const tools = new ToolRegistry().register({ name: 'lookup' }, () => 'free').register({ name: 'book', needsApproval: true }, book);
          const provider = new ScriptedProvider([{ toolCalls: [{ id: 'l1', name: 'lookup', arguments: {} }, { id: 'b1', name: 'book', arguments: { room: 7 } }] }, { text: 'Not booked.' }]);
          const runner = new AgentRunner({ provider, tools, approve });
          const agent = new Agent({ name: 'concierge', instructions: '', model: 'm' });
          let message: { parts: readonly unknown[] } | undefined;
          for await (const snapshot of readWith(toUIMessageReadableStream(runner.run$(agent, 'Book room 7')))) message = snapshot;
          const parts = (message?.parts ?? []) as Array<{ type: string; toolCallId?: string; state?: string; errorText?: string }>;
          expect(parts.filter((p) => p.toolCallId !== undefined).map((p) => [p.toolCallId, p.state])).to.deep.equal([['l1', 'output-available'], ['b1', 'output-denied']]);
          expect(parts.find((p) => p.toolCallId === 'b1')?.errorText).to.equal(undefined);
        });
      }
    }

    it('keeps other refusals (an input guardrail) as errors with their text', async () => {
      const tools = new ToolRegistry().register({ name: 'book' }, () => 'booked');
      const provider = new ScriptedProvider([{ toolCalls: [{ id: 'b1', name: 'book', arguments: {} }] }, { text: 'Not booked.' }]);
      const runner = new AgentRunner({ provider, tools, guardrails: { input: () => 'no bookings today' } });
      const parts = await read(toUIMessageReadableStream(runner.run$(new Agent({ name: 'concierge', instructions: '', model: 'm' }), 'Book')));
      expect(parts).to.include('tool-book b1 output-error ToolRejectedError: input guardrail rejected the call: no bookings today');
    });
  });

  it('is read by readUIMessageStream into the message useChat shows: calls in call order, the failed one as an error, then the text', async () => {
    const { runner } = fixture([threeLookups, { text: 'Lisbon or Porto.' }]);
    const parts = await read(toUIMessageReadableStream(runner.run$(planner, 'hotels')));
    expect(parts).to.deep.equal([
      'step-start',
      'tool-lookup c1 output-available {"city":"Lisbon","from":122}',
      'tool-lookup c2 output-error Error: no partner covers Atlantis',
      'tool-lookup c3 output-available {"city":"Porto","from":115}',
      'step-start',
      'text Lisbon or Porto.',
    ]);
  });

  it('sends the chunks toUIMessageStream sends, and closes when the run ends', async () => {
    const { runner } = fixture([{ text: 'hi' }]);
    const reader = toUIMessageReadableStream(runner.run$(planner, 'hello'), { messageId: 'm1' }).getReader();
    const types: string[] = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      types.push(value.type);
    }
    expect(types).to.deep.equal(['start', 'start-step', 'text-start', 'text-delta', 'text-end', 'finish-step', 'finish']);
  });

  it('does not subscribe the run before the stream is read', async () => {
    let subscribed = 0;
    const run$ = new Observable<RunEvent>(() => {
      subscribed++;
    });
    const stream = toUIMessageReadableStream(run$);
    await new Promise((resolve) => setImmediate(resolve));
    expect(subscribed).to.equal(0);
    const reader = stream.getReader();
    const pending = reader.read();
    await new Promise((resolve) => setImmediate(resolve));
    expect(subscribed).to.equal(1);
    await reader.cancel();
    expect(await pending).to.deep.equal({ done: true, value: undefined });
  });

  it('stops the run when the reader cancels: its waiting bodies are aborted and every permit is back', async () => {
    const { runner, started, signals } = fixture([twoWaiting]);
    const reader = toUIMessageReadableStream(runner.run$(planner, 'wait')).getReader();
    const first = reader.read();
    await started(2);
    await reader.cancel('the client left');
    await first;
    expect([...signals.values()].map((s) => s.aborted)).to.deep.equal([true, true]);
    expect(runner.lanes.occupancy()).to.deep.equal([]);
    expect(await reader.closed.then(() => 'closed')).to.equal('closed');
  });

  it('turns a run that errors into an error chunk and a finish the reader sees', async () => {
    const errors: unknown[] = [];
    const started: RunEvent = { type: 'RUN_STARTED', runId: 'r1', agent: 'planner', input: 'x', at: 0 } as unknown as RunEvent;
    const stream = toUIMessageReadableStream(new Observable<RunEvent>((subscriber) => {
      subscriber.next(started);
      subscriber.error(new Error('the transport broke'));
    }));
    const reader = stream.getReader();
    const chunks: UIMessageChunk[] = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
    }
    expect(chunks.slice(-2)).to.deep.equal([{ type: 'error', errorText: 'the transport broke' }, { type: 'finish', finishReason: 'error' }]);
    // The same, read by the SDK: the error is handed to its onError.
    await read(toUIMessageReadableStream(throwError(() => new Error('the transport broke'))), errors);
    expect(errors.map((e) => (e as Error).message)).to.deep.equal(['the transport broke']);
  });

  it('leaves the run when cancelled with chunks still unread', async () => {
    let left = false;
    const run$ = new Observable<RunEvent>((subscriber) => {
      subscriber.next({ type: 'RUN_STARTED', runId: 'r1' } as unknown as RunEvent);
      subscriber.next({ type: 'MODEL_RESPONSE', turn: 1, text: 'hi', toolCalls: [] } as unknown as RunEvent);
      return () => {
        left = true;
      };
    });
    const reader = toUIMessageReadableStream(run$).getReader();
    expect((await reader.read()).value).to.deep.equal({ type: 'start', messageId: 'r1' });
    expect(left).to.equal(false);
    await reader.cancel();
    expect(left).to.equal(true);
  });

  it('gives an empty transcript as a closed stream', async () => {
    const reader = toUIMessageReadableStream(EMPTY).getReader();
    expect(await reader.read()).to.deep.equal({ done: true, value: undefined });
  });

  it('keeps no subscription of a run left before it emits', async () => {
    const reader = toUIMessageReadableStream(NEVER as Observable<RunEvent>).getReader();
    const pending = reader.read();
    await reader.cancel();
    expect(await pending).to.deep.equal({ done: true, value: undefined });
  });
});
