// The UI message stream encoder, read with the `ai` package's own client code, not ours:
// DefaultChatTransport (what useChat sends and reads with) against uiMessageStreamHandler on
// 127.0.0.1, and parseJsonEventStream + readUIMessageStream on uiMessageStreamResponse. Checks
// the message useChat would render: tool parts in call order, errors, structured output, stops.
import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import * as t from 'io-ts';
import { DefaultChatTransport, parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema, type UIMessage, type UIMessageChunk } from 'ai';
import { concat, delay, finalize, from, map, of, timer, type Observable } from 'rxjs';
import { Agent, AgentRunner, ScriptedProvider, type ModelStreamPart, type RunEvent } from '../../lib/index.js';
import { toUIMessageStream, uiMessageStreamHandler, uiMessageStreamResponse, type StreamEnding } from '../../lib/streaming.js';
import { fixture, planner, serve, threeLookups, twoWaiting, type TestServer } from './runs.js';

const readBody = async (request: IncomingMessage): Promise<any> => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
};

/** The text of the last user message of a useChat request body. */
const lastUserText = (body: { messages: UIMessage[] }): string =>
  body.messages
    .filter((m) => m.role === 'user')
    .at(-1)!
    .parts.map((p) => (p.type === 'text' ? p.text : ''))
    .join('');

/** A part as a short line: `tool-lookup c1 output-available {"city":"Lisbon","from":122}`, `text Lisbon or Porto.`, `step-start`. */
function summary(part: UIMessage['parts'][number]): string {
  const p = part as Record<string, unknown>;
  if (part.type === 'text') return `text ${part.text}`;
  if (part.type === 'step-start') return 'step-start';
  if (part.type.startsWith('data-')) return `${part.type} ${JSON.stringify(p['data'])}`;
  if ('toolCallId' in p) {
    const name = part.type === 'dynamic-tool' ? `dynamic-tool:${String(p['toolName'])}` : part.type;
    const detail = p['state'] === 'output-available' ? JSON.stringify(p['output']) : p['state'] === 'output-error' ? String(p['errorText']) : '';
    return `${name} ${String(p['toolCallId'])} ${String(p['state'])} ${detail}`;
  }
  return part.type;
}

/** Reads a UI message stream body the way useChat's transport does; returns the final message and the chunk types seen. */
async function readBodyAsMessage(body: ReadableStream<Uint8Array>, errors: unknown[] = []): Promise<{ message: UIMessage | undefined; chunks: string[] }> {
  const chunks: string[] = [];
  const parsed = parseJsonEventStream({ stream: body, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream<{ success: boolean; value?: UIMessageChunk; error?: unknown }, UIMessageChunk>({
      transform(result, controller) {
        if (!result.success) throw result.error;
        chunks.push(result.value!.type);
        controller.enqueue(result.value!);
      },
    }),
  );
  let message: UIMessage | undefined;
  for await (const snapshot of readUIMessageStream({ stream: parsed, onError: (error) => errors.push(error) })) message = snapshot;
  return { message, chunks };
}

describe('the UI message stream, read by the ai package', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it("renders a run through useChat's DefaultChatTransport: tool parts in call order with their outputs, then the answer", async () => {
    const { runner, provider } = fixture([threeLookups, { text: 'Lisbon or Porto.' }]);
    const bodies: any[] = [];
    server = await serve(
      uiMessageStreamHandler(async (request, signal) => {
        const body = await readBody(request);
        bodies.push(body);
        return runner.run$(planner, lastUserText(body), { signal });
      }),
    );
    const transport = new DefaultChatTransport<UIMessage>({ api: `${server.url}/api/chat` });
    const stream = await transport.sendMessages({
      trigger: 'submit-message',
      chatId: 'chat-1',
      messageId: undefined,
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Hotels in Lisbon, Atlantis and Porto?' }] }],
      abortSignal: undefined,
    });
    let message: UIMessage | undefined;
    for await (const snapshot of readUIMessageStream({ stream })) message = snapshot;

    expect(bodies[0]).to.include({ id: 'chat-1', trigger: 'submit-message' });
    expect(provider.requests[0]!.messages[0]).to.deep.equal({ role: 'user', content: 'Hotels in Lisbon, Atlantis and Porto?' });
    expect(message!.role).to.equal('assistant');
    expect(message!.parts.map(summary)).to.deep.equal([
      'step-start',
      'tool-lookup c1 output-available {"city":"Lisbon","from":122}',
      'tool-lookup c2 output-error Error: no partner covers Atlantis',
      'tool-lookup c3 output-available {"city":"Porto","from":115}',
      'step-start',
      'text Lisbon or Porto.',
    ]);
    const inputs = message!.parts.filter((p) => 'input' in p).map((p) => (p as { input: unknown }).input);
    expect(inputs).to.deep.equal([{ city: 'Lisbon' }, { city: 'Atlantis' }, { city: 'Porto' }]);
  });

  it('sends the protocol headers and ends the body with [DONE]', async () => {
    const { runner } = fixture([{ text: 'hi' }]);
    server = await serve(uiMessageStreamHandler((_request, signal) => runner.run$(planner, 'hi', { signal })));
    const response = await fetch(server.url, { method: 'POST', body: '{}' });
    expect(response.headers.get('x-vercel-ai-ui-message-stream')).to.equal('v1');
    expect(response.headers.get('content-type')).to.match(/^text\/event-stream/);
    expect(await response.text()).to.match(/data: \{"type":"finish","finishReason":"stop"\}\n\ndata: \[DONE\]\n\n$/);
  });

  it('makes dynamic-tool parts when asked, for a front end that does not declare the tools', async () => {
    const { runner } = fixture([threeLookups, { text: 'ok' }]);
    const response = uiMessageStreamResponse((signal) => runner.run$(planner, 'hotels?', { signal }), { dynamicTools: true });
    const { message } = await readBodyAsMessage(response.body!);
    expect(message!.parts.filter((p) => p.type === 'dynamic-tool').map(summary)).to.deep.equal([
      'dynamic-tool:lookup c1 output-available {"city":"Lisbon","from":122}',
      'dynamic-tool:lookup c2 output-error Error: no partner covers Atlantis',
      'dynamic-tool:lookup c3 output-available {"city":"Porto","from":115}',
    ]);
  });

  it('shows a cancelled run as its classified calls and an abort chunk', async () => {
    const { runner, started } = fixture([twoWaiting]);
    const cancel = new AbortController();
    const response = uiMessageStreamResponse((signal) => runner.run$(planner, 'book it', { signal: AbortSignal.any([signal, cancel.signal]) }));
    const reading = readBodyAsMessage(response.body!);
    await started(2);
    cancel.abort();
    const { message, chunks } = await reading;
    // The wording of a stop is the batch's; what matters here is which call says what, in call order.
    const parts = message!.parts.map(summary);
    expect(parts).to.have.length(3);
    expect(parts[0]).to.equal('step-start');
    expect(parts[1]).to.match(/^tool-wait_lookup w1 output-error CallStoppedError: .*Safe to call again$/);
    expect(parts[2]).to.match(/^tool-wait_booking w2 output-error .*The side effect may have landed$/);
    expect(chunks.slice(-2)).to.deep.equal(['finish-step', 'abort']);
  });

  it('reports a failed run as an error the reader sees, after the calls it made', async () => {
    const { runner } = fixture([
      threeLookups,
      () => {
        throw new Error('the model is down');
      },
    ]);
    const errors: unknown[] = [];
    const response = uiMessageStreamResponse((signal) => runner.run$(planner, 'hotels?', { signal }));
    const { message, chunks } = await readBodyAsMessage(response.body!, errors);
    expect(message!.parts.map(summary).filter((s) => s.startsWith('tool-'))).to.have.length(3);
    expect(errors.map((e) => (e as Error).message)).to.deep.equal(['ProviderError: model provider failed on turn 2: the model is down']);
    expect(chunks.slice(-3)).to.deep.equal(['finish-step', 'error', 'finish']);
  });

  it('adds a structured output as a data-output part', async () => {
    const { runner } = fixture([{ text: '{"city":"Lisbon","nights":4}' }]);
    const booker = new Agent({ name: 'planner', instructions: 'Plan.', model: 'm', output: t.type({ city: t.string, nights: t.number }) });
    const response = uiMessageStreamResponse((signal) => runner.run$(booker, 'plan', { signal }));
    const { message } = await readBodyAsMessage(response.body!);
    expect(message!.parts.map(summary)).to.deep.equal(['step-start', 'text {"city":"Lisbon","nights":4}', 'data-output {"city":"Lisbon","nights":4}']);
  });

  it('cancels the run, classified, when the reader cancels the body', async () => {
    const { runner, started, signals } = fixture([twoWaiting]);
    let ended!: (ending: StreamEnding<RunEvent>) => void;
    const ending = new Promise<StreamEnding<RunEvent>>((resolve) => (ended = resolve));
    const response = uiMessageStreamResponse((signal) => runner.run$(planner, 'book it', { signal }), { onEnd: ended });
    const reader = response.body!.getReader();
    await reader.read();
    await started(2);
    await reader.cancel();
    const { values, clientLeft } = await ending;
    expect(clientLeft).to.equal(true);
    expect(values.map((e) => e.type)).to.deep.equal(['RUN_STARTED', 'MODEL_RESPONSE', 'TOOL_ERROR', 'TOOL_INDETERMINATE', 'RUN_CANCELLED']);
    expect([...signals.values()].every((s) => s.aborted)).to.equal(true);
  });

  it('gives a call id the model reused in a later turn a unique id, so its part is not overwritten', async () => {
    const again = { toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{"city":"Porto"}' }] };
    const { runner } = fixture([{ toolCalls: [threeLookups.toolCalls![0]!] }, again, { text: 'done' }]);
    const chunks: unknown[] = [];
    await new Promise<void>((resolve) => toUIMessageStream(runner.run$(planner, 'x')).subscribe({ next: (c) => chunks.push(c), complete: resolve }));
    const ids = chunks.filter((c) => (c as { type: string }).type.startsWith('tool-')).map((c) => `${(c as { type: string }).type} ${(c as { toolCallId: string }).toolCallId}`);
    expect(ids).to.deep.equal(['tool-input-available c1', 'tool-output-available c1', 'tool-input-available c1@2', 'tool-output-available c1@2']);
  });

  it('gives two calls of one turn that share an id distinct ids, each with its own outcome', async () => {
    const twice = { toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{"city":"Lisbon"}' }, { id: 'c1', name: 'lookup', arguments: '{"city":"Porto"}' }] };
    const { runner } = fixture([twice, { text: 'done' }]);
    const chunks: unknown[] = [];
    await new Promise<void>((resolve) => toUIMessageStream(runner.run$(planner, 'x')).subscribe({ next: (c) => chunks.push(c), complete: resolve }));
    const ids = chunks.filter((c) => (c as { type: string }).type.startsWith('tool-')).map((c) => `${(c as { type: string }).type} ${(c as { toolCallId: string }).toolCallId}`);
    expect(ids).to.deep.equal(['tool-input-available c1', 'tool-input-available c1@1', 'tool-output-available c1', 'tool-output-error c1@1']);
  });

  describe('a streamed model turn', () => {
    // Text in three deltas, each a little after the one before, then a call; then a final answer, also streamed.
    const writing = (): Observable<ModelStreamPart> =>
      concat(
        from<ModelStreamPart[]>([{ type: 'text-delta', delta: 'Checking ' }]),
        of<ModelStreamPart>({ type: 'text-delta', delta: 'Lisbon' }).pipe(delay(5)),
        of<ModelStreamPart>({ type: 'text-delta', delta: ' first.' }).pipe(delay(5)),
        of<ModelStreamPart>({ type: 'tool-call', id: 'c1', name: 'lookup', arguments: '{"city":"Lisbon"}' }),
      );
    const answer = (): Observable<ModelStreamPart> => from<ModelStreamPart[]>([{ type: 'text-delta', delta: 'Lisbon ' }, { type: 'text-delta', delta: 'it is.' }]);

    it('sends a text-delta per model delta, given the runner\'s activity$, as useChat reads them', async () => {
      const { runner } = fixture([writing, answer]);
      const response = uiMessageStreamResponse((signal) => runner.run$(planner, 'hotels?', { signal }), { activity: runner.activity$ });
      const { message, chunks } = await readBodyAsMessage(response.body!);
      expect(chunks).to.deep.equal([
        'start',
        'start-step',
        'text-start',
        'text-delta',
        'text-delta',
        'text-delta',
        'tool-input-available',
        'text-end',
        'tool-output-available',
        'finish-step',
        'start-step',
        'text-start',
        'text-delta',
        'text-delta',
        'text-end',
        'finish-step',
        'finish',
      ]);
      expect(message!.parts.map(summary)).to.deep.equal(['step-start', 'text Checking Lisbon first.', 'tool-lookup c1 output-available {"city":"Lisbon","from":122}', 'step-start', 'text Lisbon it is.']);
    });

    it("sends a streamed call's tool part as soon as the model has written it, before the model's turn ends", async () => {
      // c1 is written, then the model writes for a while, then c2; the page is read by the ai package.
      let modelDone = false;
      const twoCalls = (): Observable<ModelStreamPart> =>
        concat(
          of<ModelStreamPart>({ type: 'tool-call', id: 'c1', name: 'wait_lookup', arguments: '{}' }),
          of<ModelStreamPart>({ type: 'text-delta', delta: 'and a booking' }).pipe(delay(40)),
          of<ModelStreamPart>({ type: 'tool-call', id: 'c2', name: 'lookup', arguments: '{"city":"Porto"}' }).pipe(delay(40)),
        ).pipe(finalize(() => (modelDone = true)));
      const { runner, started } = fixture([twoCalls, { text: 'done' }]);
      const controller = new AbortController();
      const response = uiMessageStreamResponse((signal) => runner.run$(planner, 'x', { signal: AbortSignal.any([signal, controller.signal]) }), { activity: runner.activity$ });
      // Whether the model had finished its turn when the first tool part reached the page.
      let modelDoneAtFirstPart: boolean | undefined;
      const seen = response.body!.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(bytes, out) {
            if (modelDoneAtFirstPart === undefined && new TextDecoder().decode(bytes).includes('"tool-input-available"')) modelDoneAtFirstPart = modelDone;
            out.enqueue(bytes);
          },
        }),
      );
      // The person presses stop once the first call runs, while the model still writes: the page shows the call that ran, classified.
      void started(1).then(() => setTimeout(() => controller.abort(), 5));
      const { message } = await readBodyAsMessage(seen);
      expect(modelDoneAtFirstPart).to.equal(false);
      expect(message!.parts.map(summary).filter((line) => line.startsWith('tool-'))).to.deep.equal(['tool-wait_lookup c1 output-error CallStoppedError: wait_lookup was in flight when the batch stopped (the run was cancelled). Safe to call again']);
    });

    it('sends the same message whole without activity$', async () => {
      const { runner } = fixture([writing, answer]);
      const { message, chunks } = await readBodyAsMessage(uiMessageStreamResponse((signal) => runner.run$(planner, 'hotels?', { signal })).body!);
      expect(chunks.filter((c) => c === 'text-delta')).to.have.length(2);
      expect(message!.parts.map(summary)).to.deep.equal(['step-start', 'text Checking Lisbon first.', 'tool-lookup c1 output-available {"city":"Lisbon","from":122}', 'step-start', 'text Lisbon it is.']);
    });

    it('ends a text part the model never finished when the run fails mid-stream', async () => {
      const broken = (): Observable<ModelStreamPart> =>
        concat(
          of<ModelStreamPart>({ type: 'text-delta', delta: 'Check' }),
          timer(5).pipe(
            map((): ModelStreamPart => {
              throw new Error('socket hang up');
            }),
          ),
        );
      const { runner } = fixture([broken]);
      const chunks: string[] = [];
      await new Promise<void>((resolve) => toUIMessageStream(runner.run$(planner, 'x'), { activity: runner.activity$ }).subscribe({ next: (c) => chunks.push(c.type), complete: resolve }));
      expect(chunks).to.deep.equal(['start', 'start-step', 'text-start', 'text-delta', 'text-end', 'finish-step', 'error', 'finish']);
    });

    it('leaves out the text of the other runs on the runner', async () => {
      const elsewhere = (): Observable<ModelStreamPart> => concat(of(0).pipe(delay(2)), from(['Else', 'where.'])).pipe(map((delta): ModelStreamPart => ({ type: 'text-delta', delta: String(delta) })));
      const provider = new ScriptedProvider({ planner: [writing, answer], other: [elsewhere] });
      const runner = new AgentRunner({ provider, tools: fixture([]).runner.tools });
      const chunks: UIMessageChunk[] = [];
      const watching = runner.run$(new Agent({ name: 'other', instructions: '', model: 'm' }), 'elsewhere').subscribe();
      await new Promise<void>((resolve) => toUIMessageStream(runner.run$(planner, 'x'), { activity: runner.activity$ }).subscribe({ next: (c) => chunks.push(c as UIMessageChunk), complete: resolve }));
      watching.unsubscribe();
      const text = chunks.filter((c) => c.type === 'text-delta').map((c) => (c as { delta: string }).delta);
      expect(text.join('')).to.equal('Checking Lisbon first.Lisbon it is.');
    });
  });
});
