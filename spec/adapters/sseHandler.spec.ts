// sseHandler over node:http on 127.0.0.1, read back with eventsource-parser (not a parser of
// ours): a run as one event per RunEvent; the client going away mid-batch cancels the run,
// which ends classified, with lanes, timers and connections let go; a stream that will not
// end is unsubscribed after its grace; a start that throws is a 500; heartbeats while quiet.
import { expect } from 'chai';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { concat, NEVER, Observable, of, throwError } from 'rxjs';
import sinon from 'sinon';
import { ConfigError, type RunEvent, type RunnerActivity } from '../../lib/index.js';
import { eventStreamFrame, sseHandler, type StreamEnding } from '../../lib/streaming.js';
import { fixture, planner, serve, threeLookups, twoWaiting, type TestServer } from './runs.js';

/** Reads an event stream response with eventsource-parser, calling `onEvent` per event; resolves with all of them when the body ends. */
async function readEvents(response: Response, onEvent: (event: EventSourceMessage) => void = () => undefined): Promise<{ events: EventSourceMessage[]; comments: string[] }> {
  const events: EventSourceMessage[] = [];
  const comments: string[] = [];
  const parser = createParser({
    onEvent: (event) => {
      events.push(event);
      onEvent(event);
    },
    onComment: (comment) => comments.push(comment),
  });
  const decoder = new TextDecoder();
  for await (const chunk of response.body!) parser.feed(decoder.decode(chunk, { stream: true }));
  return { events, comments };
}

describe('sseHandler', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    sinon.restore();
    await server?.close();
    server = undefined;
  });

  it('streams a run as one event per RunEvent, named by its type, with the event as JSON data, then ends the response', async () => {
    const { runner } = fixture([threeLookups, { text: 'Lisbon or Porto.' }]);
    let ending: StreamEnding<RunEvent> | undefined;
    server = await serve(sseHandler((_req, signal) => runner.run$(planner, 'hotels?', { signal }), { onEnd: (e) => (ending = e) }));
    const response = await fetch(server.url);
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.equal('text/event-stream; charset=utf-8');
    const { events } = await readEvents(response);
    expect(events.map((e) => e.event)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'TOOL_RESULT', 'TOOL_ERROR', 'TOOL_RESULT', 'MODEL_RESPONSE', 'RUN_COMPLETED']);
    const data = events.map((e) => JSON.parse(e.data) as RunEvent);
    expect(data.filter((e) => 'callId' in e).map((e) => (e as { callId: string }).callId)).to.deep.equal(['c1', 'c2', 'c3']);
    expect(data[6]).to.deep.equal({ type: 'RUN_COMPLETED', output: 'Lisbon or Porto.' });
    expect(ending).to.include({ clientLeft: false, ended: 'complete' });
    expect(ending!.values).to.deep.equal(data);
  });

  it('cancels the run when the client goes away mid-batch: the stopped calls are classified, then RUN_CANCELLED, and nothing is left running', async () => {
    const { runner, signals, started } = fixture([twoWaiting]);
    const activity: RunnerActivity[] = [];
    const watching = runner.activity$.subscribe((a) => activity.push(a));
    let ended!: (ending: StreamEnding<RunEvent>) => void;
    const ending = new Promise<StreamEnding<RunEvent>>((resolve) => (ended = resolve));
    const timing = {
      setInterval: sinon.spy(globalThis, 'setInterval'),
      clearInterval: sinon.spy(globalThis, 'clearInterval'),
    };
    server = await serve(sseHandler((_req, signal) => runner.run$(planner, 'book it', { signal }), { onEnd: ended, heartbeatMs: 7, graceMs: 4321 }));
    const client = new AbortController();
    const response = await fetch(server.url, { signal: client.signal });
    const reading = readEvents(response).catch(() => 'the client stopped reading');
    await started(2);
    expect(runner.lanes.occupancy(), 'the shared lanes while the calls run').not.to.deep.equal([]);
    client.abort();
    await reading;

    const { values, clientLeft, ended: how } = await ending;
    expect(clientLeft).to.equal(true);
    expect(how).to.equal('complete');
    expect(values.map((e) => e.type)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'TOOL_ERROR', 'TOOL_INDETERMINATE', 'RUN_CANCELLED']);
    const [, , lookup, booking] = values;
    expect(lookup?.type === 'TOOL_ERROR' && lookup.error.message).to.match(/Safe to call again/);
    expect(booking?.type === 'TOOL_INDETERMINATE' && booking.message).to.match(/The side effect may have landed/);
    // The handler aborts with a reason, and the transcript says it.
    expect(values[values.length - 1]).to.deep.equal({ type: 'RUN_CANCELLED', reason: 'the run was cancelled: the client went away' });
    expect([...signals.values()].map((s) => s.aborted)).to.deep.equal([true, true]);
    expect(runner.lanes.occupancy(), 'the shared lanes afterwards').to.deep.equal([]);
    expect(activity.filter((a) => a.type === 'run-ended').map((a) => a.type === 'run-ended' && a.status)).to.deep.equal(['cancelled']);
    // The heartbeat (every 7ms here, a timer re-armed after each beat) was cleared, every timer of it;
    // a grace timer (4321ms here), if the run did not end at once on the abort, was cleared when it did.
    const made = (spy: sinon.SinonSpy, ms: number) => spy.getCalls().filter((call) => call.args[1] === ms).map((call) => call.returnValue as NodeJS.Timeout);
    const heartbeats = made(timing.setInterval, 7);
    expect(heartbeats).not.to.be.empty;
    for (const heartbeat of heartbeats) expect(timing.clearInterval.calledWith(heartbeat), 'the heartbeat was cleared').to.equal(true);
    for (const grace of made(timing.setInterval, 4321)) expect(timing.clearInterval.calledWith(grace), 'the grace timer was cleared').to.equal(true);
    watching.unsubscribe();
  });

  it('unsubscribes a stream that has not ended graceMs after the client left', async () => {
    let tornDown = false;
    let aborted = false;
    let ended!: (ending: StreamEnding<string>) => void;
    const ending = new Promise<StreamEnding<string>>((resolve) => (ended = resolve));
    const stubborn = (signal: AbortSignal) =>
      new Observable<string>((subscriber) => {
        signal.addEventListener('abort', () => (aborted = true));
        subscriber.next('hello');
        return () => (tornDown = true);
      });
    server = await serve(sseHandler((_req, signal) => stubborn(signal), { graceMs: 20, eventName: () => 'greeting', onEnd: ended }));
    const client = new AbortController();
    const response = await fetch(server.url, { signal: client.signal });
    await readEvents(response, () => client.abort()).catch(() => undefined);
    const { values, clientLeft, ended: how } = await ending;
    expect({ values, clientLeft, how, aborted, tornDown }).to.deep.equal({ values: ['hello'], clientLeft: true, how: 'unsubscribed', aborted: true, tornDown: true });
  });

  it('answers 500 and reports the error when the stream cannot be started', async () => {
    const told: unknown[] = [];
    let ending: StreamEnding<never> | undefined;
    server = await serve(
      sseHandler<never>(
        async () => {
          throw new Error('no such agent');
        },
        { onEnd: (e) => (ending = e), onError: (error) => told.push(error) },
      ),
    );
    const response = await fetch(server.url);
    expect(response.status).to.equal(500);
    expect(await response.text()).to.equal('the stream could not be started\n');
    expect(ending).to.include({ ended: 'error', clientLeft: false });
    expect((ending!.error as Error).message).to.equal('no such agent');
    expect(told.map((error) => (error as Error).message)).to.deep.equal(['no such agent']);
  });

  it('answers 400 with the message when starting the stream throws a ConfigError (the request was wrong), and reports nothing', async () => {
    const told: unknown[] = [];
    server = await serve(
      sseHandler<never>(
        async () => {
          throw new ConfigError('tenant', 'tenant must be a non-empty string, got ""');
        },
        { onError: (error) => told.push(error) },
      ),
    );
    const response = await fetch(server.url);
    expect(response.status).to.equal(400);
    expect(await response.text()).to.equal('ConfigError: tenant must be a non-empty string, got ""\n');
    expect(told).to.deep.equal([]);
  });

  it('reports a stream that errors to onError', async () => {
    const told: unknown[] = [];
    const broken = new Error('the source broke');
    server = await serve(sseHandler(() => concat(of({ type: 'hello' }), throwError(() => broken)), { onError: (error) => told.push(error) }));
    const response = await fetch(server.url);
    await response.text();
    expect(told).to.deep.equal([broken]);
  });

  it('sends heartbeat comments while the stream is quiet', async () => {
    server = await serve(sseHandler(() => NEVER, { heartbeatMs: 5, graceMs: 0 }));
    const client = new AbortController();
    const response = await fetch(server.url, { signal: client.signal });
    const seen: string[] = [];
    const parser = createParser({ onEvent: () => undefined, onComment: (comment) => seen.push(comment) });
    const reader = response.body!.getReader();
    while (seen.length < 2) parser.feed(new TextDecoder().decode((await reader.read()).value));
    client.abort();
    expect(seen.slice(0, 2).map((c) => c.trim())).to.deep.equal(['keep-alive', 'keep-alive']);
  });
});

describe('eventStreamFrame', () => {
  const parse = (text: string): EventSourceMessage[] => {
    const events: EventSourceMessage[] = [];
    createParser({ onEvent: (event) => events.push(event) }).feed(text);
    return events;
  };

  it('writes a payload with line breaks as several data lines that a reader joins back', () => {
    const text = eventStreamFrame({ event: 'note', id: '7', data: 'one\ntwo\r\nthree' });
    expect(text).to.equal('event: note\nid: 7\ndata: one\ndata: two\ndata: three\n\n');
    expect(parse(text)).to.deep.equal([{ event: 'note', id: '7', data: 'one\ntwo\nthree' }]);
  });

  it('refuses an event name with a line break, which would end the frame early', () => {
    expect(() => eventStreamFrame({ event: 'a\nb', data: '' })).to.throw(TypeError, 'an event stream event cannot contain a line break');
  });
});
