// A chat through uiMessageStreamHandler as useChat drives it: each request carries the whole
// conversation (UIMessage[], read with fromUIMessages), each reply is read back with the ai
// package's own transport and reader and appended, and over three turns the model sees every
// earlier turn, its calls and their results included.
import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from 'ai';
import { concat, config, of, throwError, type Observable } from 'rxjs';
import sinon from 'sinon';
import { ConfigError, type Message, type ModelRequest, type RunEvent } from '../../lib/index.js';
import { uiMessageStreamHandler, uiMessageStreamResponse } from '../../lib/streaming.js';
import { fromUIMessages, UNKNOWN_OUTCOME } from '../../lib/providers/aiSdkProvider.js';
import { fixture, planner, serve, threeLookups, type TestServer } from './runs.js';

const readBody = async (request: IncomingMessage): Promise<{ messages: UIMessage[] }> => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
};

const said = (id: string, text: string): UIMessage => ({ id, role: 'user', parts: [{ type: 'text', text }] });

describe('a chat through the UI message stream handler', () => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('sends the whole conversation each turn, and the model sees the earlier turns, calls and results included', async () => {
    const { runner, provider } = fixture([
      threeLookups,
      { text: 'Lisbon or Porto.' },
      { text: 'Porto, from 115.' },
      (request: ModelRequest) => ({ text: `You asked ${request.messages.filter((m) => m.role === 'user').length} questions.` }),
    ]);
    server = await serve(uiMessageStreamHandler(async (request, signal) => runner.run$(planner, fromUIMessages((await readBody(request)).messages), { signal })));
    const transport = new DefaultChatTransport<UIMessage>({ api: `${server.url}/api/chat` });

    // What useChat does on each submit: send every message so far, read the reply into one more message.
    const chat: UIMessage[] = [];
    const turn = async (text: string): Promise<UIMessage> => {
      chat.push(said(`u${chat.length}`, text));
      const stream = await transport.sendMessages({ trigger: 'submit-message', chatId: 'chat-1', messageId: undefined, messages: chat, abortSignal: undefined });
      let reply: UIMessage | undefined;
      for await (const snapshot of readUIMessageStream({ stream })) reply = snapshot;
      chat.push(reply!);
      return reply!;
    };

    await turn('Hotels in Lisbon, Atlantis and Porto?');
    await turn('Which is cheaper?');
    const third = await turn('How many questions did I ask?');

    const firstTurn: Message[] = [
      { role: 'user', content: 'Hotels in Lisbon, Atlantis and Porto?' },
      {
        role: 'assistant',
        content: '',
        toolCalls: ['Lisbon', 'Atlantis', 'Porto'].map((city, i) => ({ id: `c${i + 1}`, name: 'lookup', arguments: { city } })),
      },
      { role: 'tool', toolCallId: 'c1', content: '{"city":"Lisbon","from":122}' },
      { role: 'tool', toolCallId: 'c2', content: 'Error: no partner covers Atlantis', isError: true },
      { role: 'tool', toolCallId: 'c3', content: '{"city":"Porto","from":115}' },
      { role: 'assistant', content: 'Lisbon or Porto.' },
    ];
    const secondTurn: Message[] = [{ role: 'user', content: 'Which is cheaper?' }, { role: 'assistant', content: 'Porto, from 115.' }];
    expect(provider.requests).to.have.length(4);
    expect(provider.requests[2]!.messages).to.deep.equal([...firstTurn, { role: 'user', content: 'Which is cheaper?' }]);
    expect(provider.requests[3]!.messages).to.deep.equal([...firstTurn, ...secondTurn, { role: 'user', content: 'How many questions did I ask?' }]);
    expect(third.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).to.deep.equal(['You asked 3 questions.']);
  });

  it('goes on after the user stopped a reply mid-call: the cut-off call reaches the model as unknown', async () => {
    const { runner, provider, started } = fixture([
      { toolCalls: [{ id: 'w2', name: 'wait_booking', arguments: '{}' }] },
      (request: ModelRequest) => ({ text: `The booking is ${request.messages.some((m) => m.content === UNKNOWN_OUTCOME) ? 'unknown' : 'known'}.` }),
    ]);
    const endings: string[] = [];
    let bothEnded!: () => void;
    const ended = new Promise<void>((resolve) => (bothEnded = resolve));
    server = await serve(
      uiMessageStreamHandler(
        async (request, signal) => runner.run$(planner, fromUIMessages((await readBody(request)).messages, { incompleteCalls: 'unknown' }), { signal }),
        {
          onEnd: (ending) => {
            endings.push(ending.clientLeft ? 'client left' : 'ended');
            if (endings.length === 2) bothEnded();
          },
        },
      ),
    );
    const transport = new DefaultChatTransport<UIMessage>({ api: `${server.url}/api/chat` });
    const chat: UIMessage[] = [said('u0', 'Book Lisbon.')];
    // The user presses stop once the booking call shows: the reply is cut off before its outcome.
    const stop = new AbortController();
    const stream = await transport.sendMessages({ trigger: 'submit-message', chatId: 'chat-2', messageId: undefined, messages: chat, abortSignal: stop.signal });
    let partial: UIMessage | undefined;
    try {
      for await (const snapshot of readUIMessageStream({ stream })) {
        partial = snapshot;
        if (snapshot.parts.some((p) => p.type === 'tool-wait_booking')) {
          await started(1);
          stop.abort();
        }
      }
    } catch {
      // The reader ends with the abort, as useChat's does.
    }
    expect(partial!.parts.filter((p) => p.type === 'tool-wait_booking').map((p) => (p as { state: string }).state)).to.deep.equal(['input-available']);
    chat.push(partial!, said('u1', 'Did it book?'));
    const next = await transport.sendMessages({ trigger: 'submit-message', chatId: 'chat-2', messageId: undefined, messages: chat, abortSignal: undefined });
    let reply: UIMessage | undefined;
    for await (const snapshot of readUIMessageStream({ stream: next })) reply = snapshot;

    expect(provider.requests[1]!.messages).to.deep.equal([
      { role: 'user', content: 'Book Lisbon.' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'w2', name: 'wait_booking', arguments: {} }] },
      { role: 'tool', toolCallId: 'w2', content: UNKNOWN_OUTCOME, isError: true },
      { role: 'user', content: 'Did it book?' },
    ]);
    expect(reply!.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).to.deep.equal(['The booking is unknown.']);
    await ended;
    expect([...endings].sort()).to.deep.equal(['client left', 'ended']);
  });

  describe('a request it cannot serve', () => {
    const post = (url: string, body: unknown): Promise<Response> =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const chatFrom = (run: (messages: UIMessage[], signal: AbortSignal) => Observable<RunEvent>) =>
      async (request: IncomingMessage, signal: AbortSignal) => run((await readBody(request)).messages, signal);
    let unhandled: sinon.SinonStub | undefined;
    beforeEach(() => {
      // What reportUnhandled tells: an operator's hook, as RxJS calls it.
      unhandled = sinon.stub();
      config.onUnhandledError = unhandled;
    });
    afterEach(() => {
      config.onUnhandledError = null;
    });

    const mistakes: Array<{ title: string; body: unknown; field: string; text: string }> = [
      { title: 'a body without messages', body: {}, field: 'messages', text: 'ConfigError: messages: expected an array of UI messages, got undefined\n' },
      {
        title: 'a chat ending with an assistant message',
        body: { messages: [said('u1', 'hi'), { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'hello' }] }] },
        field: 'input[1].role',
        text: 'ConfigError: input[1].role: expected "user": a conversation ends with the user message the run answers, got "assistant"\n',
      },
      { title: 'a chat whose last message says nothing', body: { messages: [{ id: 'u1', role: 'user', parts: [] }] }, field: 'input[0].content', text: 'ConfigError: input[0].content: expected the text of the user message the run answers, not empty or only whitespace, got ""\n' },
    ];
    for (const c of mistakes) {
      it(`answers ${c.title} with a 400 naming ${c.field}, runs nothing, and reports no server failure`, async () => {
        const { runner, provider } = fixture([{ text: 'never' }]);
        const endings: unknown[] = [];
        const onError = sinon.spy();
        server = await serve(uiMessageStreamHandler(chatFrom((messages, signal) => runner.run$(planner, fromUIMessages(messages), { signal })), { onEnd: (ending) => endings.push(ending.error), onError }));
        const response = await post(server.url, c.body);
        expect(response.status).to.equal(400);
        expect(await response.text()).to.equal(c.text);
        expect(provider.requests).to.have.length(0);
        expect(endings).to.have.length(1);
        expect(endings[0]).to.be.instanceOf(ConfigError).and.to.include({ field: c.field });
        expect(onError.called).to.equal(false);
        expect(unhandled!.called).to.equal(false);
      });
    }

    it('answers the same mistake from a fetch Response with a 400 (uiMessageStreamResponse)', async () => {
      const { runner, provider } = fixture([{ text: 'never' }]);
      const response = uiMessageStreamResponse((signal) => runner.run$(planner, fromUIMessages(({} as { messages: never }).messages), { signal }));
      expect(response.status).to.equal(400);
      expect(await response.text()).to.equal('ConfigError: messages: expected an array of UI messages, got undefined\n');
      expect(provider.requests).to.have.length(0);
      expect(unhandled!.called).to.equal(false);
    });

    it('answers its own failure with a 500 and tells onError, with the request, whether onEnd is given or not', async () => {
      const broken = new Error('the store is down');
      const told: Array<[unknown, string | undefined]> = [];
      const endings: unknown[] = [];
      server = await serve(
        uiMessageStreamHandler(
          async () => {
            throw broken;
          },
          { onError: (error, request) => told.push([error, request.url]), onEnd: (ending) => endings.push(ending.error) },
        ),
      );
      const response = await post(`${server.url}/api/chat`, { messages: [said('u1', 'hi')] });
      expect(response.status).to.equal(500);
      expect(await response.text()).to.equal('the stream could not be started\n');
      expect(told).to.deep.equal([[broken, '/api/chat']]);
      expect(endings).to.deep.equal([broken]);
      expect(unhandled!.called).to.equal(false);
    });

    for (const withOnEnd of [false, true]) {
      it(`reports its own failure as an unhandled error when there is no onError (${withOnEnd ? 'with' : 'without'} onEnd)`, async () => {
        const broken = new Error('the store is down');
        server = await serve(
          uiMessageStreamHandler(
            async () => {
              throw broken;
            },
            withOnEnd ? { onEnd: () => undefined } : {},
          ),
        );
        const response = await post(server.url, { messages: [said('u1', 'hi')] });
        expect(response.status).to.equal(500);
        await response.text();
        expect(unhandled!.args).to.deep.equal([[broken]]);
      });
    }

    it('reports a run that errors mid-stream to onError, while the client reads it as an error chunk', async () => {
      const broken = new Error('the event source broke');
      const onError = sinon.spy();
      server = await serve(uiMessageStreamHandler(async () => concat(of<RunEvent>({ type: 'RUN_STARTED', runId: 'r1', agent: 'planner', tenant: 'default', input: 'hi' }), throwError(() => broken)), { onError }));
      const transport = new DefaultChatTransport<UIMessage>({ api: server.url });
      const stream = await transport.sendMessages({ trigger: 'submit-message', chatId: 'c', messageId: undefined, messages: [said('u1', 'hi')], abortSignal: undefined });
      const chunks: string[] = [];
      const reader = stream.getReader();
      for (let next = await reader.read(); !next.done; next = await reader.read()) chunks.push(next.value.type);
      expect(chunks).to.deep.equal(['start', 'error', 'finish']);
      expect(onError.args.map(([error]) => error)).to.deep.equal([broken]);
      expect(unhandled!.called).to.equal(false);
    });
  });
});
