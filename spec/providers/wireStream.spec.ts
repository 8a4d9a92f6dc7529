// The two wire adapters streaming (`stream: true`, their default) against a stand-in vendor on
// 127.0.0.1 that writes recorded server-sent event chunks one by one: tool calls whose
// arguments arrive in many pieces, a stream cut at odd places, calls starting while the stream
// is still written, an error event mid-stream, a dropped connection, a client abort mid-stream,
// a stream that ends early, and a server that answers a streamed request whole. Both wires.
import { expect } from 'chai';
import * as t from 'io-ts';
import { lastValueFrom, toArray, type Observable } from 'rxjs';
import {
  Agent,
  AgentRunner,
  ToolRegistry,
  type ErrorInfo,
  type ModelProvider,
  type ModelRequest,
  type ModelStreamPart,
  type RunResult,
} from '../../lib/index.js';
import { AnthropicMessagesProvider, OpenAIChatProvider } from '../../lib/providers.js';
import { deterministicTranscript } from '../../lib/testing.js';
import { fixture, sseChunks, startWireServer, type Step, type WireServer } from './wireServer.js';

const KEY = 'sk-test-0123456789abcdefWXYZ';
const planner = new Agent({ name: 'planner', instructions: 'Find hotels.', model: 'test-model' });
const request: ModelRequest = { agent: 'planner', model: 'm', instructions: '', messages: [{ role: 'user', content: 'hi' }], tools: [] };

interface Wire {
  readonly title: string;
  readonly prefix: 'openai' | 'anthropic';
  make(server: WireServer, stream?: boolean): ModelProvider;
  /** The error event's code and message, as the fixture has them. */
  readonly streamError: { code: string; message: string };
  /** How many chunks of `<prefix>-stream-three-calls` complete the first call. */
  readonly firstCallChunks: number;
}

const wires: Wire[] = [
  {
    title: 'OpenAIChatProvider',
    prefix: 'openai',
    make: (server, stream = true) => new OpenAIChatProvider({ baseURL: `${server.url}/v1`, apiKey: KEY, stream, retry: { sleep: async () => undefined } }),
    streamError: { code: 'server_error', message: 'The server had an error while processing your request. Sorry about that!' },
    // The role chunk, the call's opening chunk and 6 pieces of arguments, the last of which closes its object.
    firstCallChunks: 8,
  },
  {
    title: 'AnthropicMessagesProvider',
    prefix: 'anthropic',
    make: (server, stream = true) => new AnthropicMessagesProvider({ baseURL: server.url, apiKey: KEY, stream, retry: { sleep: async () => undefined } }),
    streamError: { code: 'overloaded_error', message: 'Overloaded' },
    // message_start, the text block (start, ping, 3 deltas, stop), the tool_use block (start, 6 deltas, stop).
    firstCallChunks: 15,
  },
];

/** Tools whose bodies note when they started, by city; Lisbon takes `lisbonMs`, Atlantis fails. */
function lookupTools(started: Map<string, number> = new Map(), lisbonMs = 40, vendor?: () => WireServer): ToolRegistry {
  return new ToolRegistry().register({ name: 'lookup', description: 'Hotel prices in a city', args: t.type({ city: t.string }) }, async ({ city }) => {
    started.set(city, vendor?.().written.length ?? 0);
    if (city === 'Atlantis') throw new Error('no partner covers Atlantis');
    await new Promise((resolve) => setTimeout(resolve, city === 'Lisbon' ? lisbonMs : 0));
    return { city, from: 80 + city.length * 7 };
  });
}

const run = (provider: ModelProvider, tools = lookupTools(), options: { signal?: AbortSignal } = {}): Promise<RunResult> =>
  new AgentRunner({ provider, tools }).run(planner, 'Hotels in Lisbon, Atlantis and Porto?', options);

function failure(result: RunResult): ErrorInfo {
  const last = result.events.at(-1);
  expect(last?.type, `expected RUN_FAILED, got ${JSON.stringify(last)}`).to.equal('RUN_FAILED');
  return last?.type === 'RUN_FAILED' ? last.error : { name: '', message: '' };
}

/** One line per tool event and the ending. */
const outline = (result: RunResult): string[] =>
  result.events.flatMap((e) =>
    e.type === 'MODEL_RESPONSE'
      ? [`MODEL ${e.toolCalls.length}`]
      : e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE'
        ? [`${e.type} ${e.callId}`]
        : e.type === 'RUN_STARTED'
          ? []
          : [e.type],
  );

for (const wire of wires) {
  describe(`${wire.title} streaming from a stand-in vendor on 127.0.0.1`, () => {
    let server: WireServer | undefined;
    const serve = async (steps: readonly Step[]): Promise<WireServer> => (server = await startWireServer(steps));
    afterEach(async () => {
      await server?.close();
      server = undefined;
    });
    const calls = (): Step => ({ chunks: sseChunks(`${wire.prefix}-stream-three-calls`) });
    const final = (): Step => ({ chunks: sseChunks(`${wire.prefix}-stream-final-text`) });
    const callIds = (): string[] =>
      wire.prefix === 'openai'
        ? fixture('openai-three-calls').choices[0].message.tool_calls.map((c: { id: string }) => c.id)
        : fixture('anthropic-three-calls').content.filter((b: { type: string }) => b.type === 'tool_use').map((b: { id: string }) => b.id);

    it('gives the same transcript as the whole replies, usage and finish reasons included, the arguments read from many pieces', async () => {
      const vendor = await serve([calls(), final()]);
      const streamed = await run(wire.make(vendor));
      await server!.close();
      const whole = await run(wire.make(await serve([{ body: fixture(`${wire.prefix}-three-calls`) }, { body: fixture(`${wire.prefix}-final-text`) }]), false));
      expect(streamed.status).to.equal('completed');
      expect(streamed.output).to.equal('Lisbon from 122, Porto from 115; no partner covers Atlantis.');
      expect(JSON.stringify(deterministicTranscript(streamed.events))).to.equal(JSON.stringify(deterministicTranscript(whole.events)));
      expect(streamed.messages).to.deep.equal(whole.messages);
      const response = streamed.events.find((e) => e.type === 'MODEL_RESPONSE');
      expect(response?.type === 'MODEL_RESPONSE' ? response.toolCalls.map((c) => c.id) : []).to.deep.equal(callIds());
      expect(response).to.deep.include({ finishReason: 'tool-calls' });
      expect(streamed.usage).to.deep.equal(wire.prefix === 'openai' ? { inputTokens: 82 + 171, outputTokens: 64 + 19 } : { inputTokens: 412 + 618, outputTokens: 137 + 21 });
      // What went out: a streamed request.
      expect(vendor.received[0]!.body.stream).to.equal(true);
      if (wire.prefix === 'openai') expect(vendor.received[0]!.body.stream_options).to.deep.equal({ include_usage: true });
    });

    it('reads a stream the network cut anywhere, mid-line and mid-JSON, the same', async () => {
      const whole = await run(wire.make(await serve([calls(), final()])));
      await server!.close();
      const cut = await run(wire.make(await serve([{ chunks: sseChunks(`${wire.prefix}-stream-three-calls`, 37) }, { chunks: sseChunks(`${wire.prefix}-stream-final-text`, 13) }])));
      expect(deterministicTranscript(cut.events)).to.deep.equal(deterministicTranscript(whole.events));
    });

    it('starts each call while the model is still writing the ones after it', async () => {
      const started = new Map<string, number>();
      const chunks = sseChunks(`${wire.prefix}-stream-three-calls`);
      const vendor = await serve([{ chunks, gapMs: 20 }, final()]);
      const result = await run(wire.make(vendor), lookupTools(started, 40, () => vendor));
      expect(result.status).to.equal('completed');
      // Lisbon started once its call was complete (a chunk later at most, as the timers go), long
      // before the stream's last chunk was written.
      expect(started.get('Lisbon')).to.be.within(wire.firstCallChunks, wire.firstCallChunks + 1);
      expect(started.get('Lisbon')!).to.be.lessThan(chunks.length - 10);
      expect(started.get('Atlantis')!).to.be.lessThan(chunks.length);
    });

    it('fails the run on an error event mid-stream, classifying the call that had started', async () => {
      const vendor = await serve([{ chunks: sseChunks(`${wire.prefix}-stream-error`) }]);
      const result = await run(wire.make(vendor), lookupTools(new Map(), 300));
      const error = failure(result);
      expect(error.name).to.equal('ProviderError');
      expect(error.message).to.equal(
        `model provider failed on turn 1: ${wire.prefix === 'openai' ? 'OpenAI Chat Completions' : 'Anthropic Messages'} at ${new URL(vendor.url).host} failed mid-stream: ${wire.streamError.code}: ${wire.streamError.message}`,
      );
      expect(error).to.include({ code: wire.streamError.code });
      // Lisbon was complete and running; Atlantis was cut mid-arguments and never asked for.
      expect(outline(result)).to.deep.equal(['MODEL 1', `TOOL_INDETERMINATE ${callIds()[0]}`, 'RUN_FAILED']);
      expect(vendor.received).to.have.length(1);
    });

    it('fails the run when the connection drops mid-stream, without retrying', async () => {
      const chunks = sseChunks(`${wire.prefix}-stream-three-calls`).slice(0, wire.firstCallChunks + 2);
      const vendor = await serve([{ chunks, then: 'drop' }, calls()]);
      const result = await run(wire.make(vendor), lookupTools(new Map(), 0));
      expect(failure(result).message).to.match(/failed mid-stream: the connection closed mid-stream \(.+\)$/);
      expect(outline(result)).to.deep.equal(['MODEL 1', `TOOL_RESULT ${callIds()[0]}`, 'RUN_FAILED']);
      expect(vendor.received).to.have.length(1);
    });

    it('fails the run when the stream ends before the reply is complete', async () => {
      const chunks = sseChunks(`${wire.prefix}-stream-final-text`).slice(0, 4);
      const vendor = await serve([{ chunks }]);
      const error = failure(await run(wire.make(vendor)));
      expect(error.message).to.match(/failed mid-stream: the stream ended before the reply was complete$/);
    });

    it('cancels mid-stream: the request is aborted, the vendor sees the client go, the running call is classified', async () => {
      const chunks = sseChunks(`${wire.prefix}-stream-three-calls`).slice(0, wire.firstCallChunks);
      const vendor = await serve([{ chunks, then: 'hang' }]);
      const controller = new AbortController();
      const started = new Map<string, number>();
      const tools = new ToolRegistry().register({ name: 'lookup', args: t.type({ city: t.string }) }, ({ city }, ctx) => {
        started.set(city, 0);
        controller.abort('the user left');
        return new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
      });
      const result = await run(wire.make(vendor), tools, { signal: controller.signal });
      expect(result.status).to.equal('cancelled');
      expect(outline(result)).to.deep.equal(['MODEL 1', `TOOL_INDETERMINATE ${callIds()[0]}`, 'RUN_CANCELLED']);
      await vendor.hungUp;
    });

    it('fails its Observable with the abort reason when its signal aborts mid-stream', async () => {
      const chunks = sseChunks(`${wire.prefix}-stream-three-calls`).slice(0, 3);
      const vendor = await serve([{ chunks, then: 'hang' }]);
      const controller = new AbortController();
      const parts: ModelStreamPart[] = [];
      const reply$ = wire.make(vendor).respond(request, controller.signal) as Observable<ModelStreamPart>;
      const ended = new Promise<unknown>((resolve) => reply$.subscribe({ next: (p) => parts.push(p), error: resolve, complete: () => resolve('completed') }));
      while (vendor.written.length < 3) await new Promise((resolve) => setTimeout(resolve, 5));
      const reason = new Error('the run stopped');
      controller.abort(reason);
      expect(await ended).to.equal(reason);
      await vendor.hungUp;
    });

    it('reads a 2xx JSON answer to a streamed request whole', async () => {
      const vendor = await serve([{ body: fixture(`${wire.prefix}-final-text`) }]);
      const values = await lastValueFrom((wire.make(vendor).respond(request, new AbortController().signal) as Observable<unknown>).pipe(toArray()));
      expect(values).to.have.length(1);
      expect(values[0]).to.deep.include({ text: 'Lisbon from 122, Porto from 115; no partner covers Atlantis.' });
    });

    it('retries a 429 before the stream starts, then streams', async () => {
      const vendor = await serve([{ status: 429, body: fixture(`${wire.prefix}-error-429`) }, final()]);
      const result = await run(wire.make(vendor));
      expect(result.status).to.equal('completed');
      expect(vendor.received).to.have.length(2);
    });

    it('keeps the key out of an error event that echoes it', async () => {
      const echo =
        wire.prefix === 'openai'
          ? `data: ${JSON.stringify({ error: { message: `bad key ${KEY}`, type: 'invalid_request_error' } })}\n\n`
          : `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: `bad key ${KEY}` } })}\n\n`;
      const vendor = await serve([{ chunks: [echo] }]);
      const result = await run(wire.make(vendor));
      expect(failure(result).message).to.include('bad key [redacted]');
      expect(JSON.stringify(result)).not.to.include(KEY);
    });

    it('names a chunk that is not of the wire’s shape', async () => {
      const bad = wire.prefix === 'openai' ? 'data: {"choices":[{"delta":{"content":5}}]}\n\n' : 'event: content_block_delta\ndata: {"type":"content_block_delta","index":"x"}\n\n';
      const vendor = await serve([{ chunks: [bad] }]);
      const error = failure(await run(wire.make(vendor)));
      expect(error.message).to.include(wire.prefix === 'openai' ? 'chunk 1.choices.0.delta.content: expected string or null' : 'event 1.index: expected number, got "x"');
    });
  });
}
