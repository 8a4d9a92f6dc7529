// The two wire adapters (OpenAI Chat Completions, Anthropic Messages) asking for whole replies
// (`stream: false`) against a stand-in vendor on 127.0.0.1 speaking each format from
// real-shaped payloads: several tool calls in one reply, results going back in call order, an
// error reply, a malformed reply, a 429 then success, 5xx until the attempts run out, a hung
// endpoint, and an abort mid-request. Same cases, both wires. Streamed replies are in wireStream.spec.ts.
import { inspect } from 'node:util';
import { expect } from 'chai';
import * as t from 'io-ts';
import { Agent, AgentRunner, ConfigError, ToolRegistry, type ErrorInfo, type ModelProvider, type ModelRequest, type RunResult } from '../../lib/index.js';
import { AnthropicMessagesProvider, OpenAIChatProvider, ProviderHttpError, ProviderReplyError, type RetryOptions } from '../../lib/providers.js';
import { CassetteRecorder, stringifyCassette } from '../../lib/testing.js';
import { fixture, startWireServer, type Step, type WireServer } from './wireServer.js';

const KEY = 'sk-test-0123456789abcdefWXYZ';
const planner = new Agent({ name: 'planner', instructions: 'Find hotels.', model: 'test-model' });

/** `lookup`: Lisbon answers last, Atlantis fails, Porto answers first, so finish order is not call order. */
const lookupTools = (): ToolRegistry =>
  new ToolRegistry().register({ name: 'lookup', description: 'Hotel prices in a city', args: t.type({ city: t.string }) }, async ({ city }) => {
    if (city === 'Atlantis') throw new Error('no partner covers Atlantis');
    await new Promise((resolve) => setTimeout(resolve, city === 'Lisbon' ? 40 : 0));
    return { city, from: 80 + city.length * 7 };
  });

/** A tool result as read back from the wire body of a request. */
interface WireResult {
  readonly id: string;
  readonly content: string;
  readonly isError: boolean;
}

interface Wire {
  readonly title: string;
  readonly path: string;
  readonly prefix: 'openai' | 'anthropic';
  /** The status a vendor uses when overloaded. */
  readonly overloaded: number;
  make(server: WireServer, options?: { apiKey?: string; retry?: RetryOptions; timeoutSeconds?: number | false }): ModelProvider;
  /** The key as the request carried it. */
  keyOf(headers: Record<string, unknown>): unknown;
  /** The tool results carried by a request body, in order. */
  resultsIn(body: any): WireResult[];
  /** The tools as the request body declares them: name and parameter schema. */
  toolsIn(body: any): Array<{ name: string; schema: unknown }>;
  /** The instructions as the request body carries them. */
  instructionsIn(body: any): unknown;
  /** A three-call reply with the second call's name made a number. */
  malformed(): { body: unknown; path: string };
}

const wires: Wire[] = [
  {
    title: 'OpenAIChatProvider',
    path: '/v1/chat/completions',
    prefix: 'openai',
    overloaded: 503,
    make: (server, options = {}) => new OpenAIChatProvider({ baseURL: `${server.url}/v1`, apiKey: KEY, stream: false, ...options }),
    keyOf: (headers) => headers['authorization'],
    resultsIn: (body) =>
      body.messages.filter((m: any) => m.role === 'tool').map((m: any) => ({ id: m.tool_call_id, content: m.content, isError: /^Error: /.test(m.content) })),
    toolsIn: (body) => body.tools.map((tool: any) => ({ name: tool.function.name, schema: tool.function.parameters })),
    instructionsIn: (body) => body.messages[0],
    malformed: () => {
      const body = fixture('openai-three-calls');
      body.choices[0].message.tool_calls[1].function.name = 42;
      return { body, path: 'reply.choices.0.message.tool_calls.1.function.name: expected string, got 42' };
    },
  },
  {
    title: 'AnthropicMessagesProvider',
    path: '/v1/messages',
    prefix: 'anthropic',
    overloaded: 529,
    make: (server, options = {}) => new AnthropicMessagesProvider({ baseURL: server.url, apiKey: KEY, stream: false, ...options }),
    keyOf: (headers) => headers['x-api-key'],
    resultsIn: (body) =>
      body.messages
        .flatMap((m: any) => (m.role === 'user' && Array.isArray(m.content) ? m.content : []))
        .filter((b: any) => b.type === 'tool_result')
        .map((b: any) => ({ id: b.tool_use_id, content: b.content, isError: b.is_error === true })),
    toolsIn: (body) => body.tools.map((tool: any) => ({ name: tool.name, schema: tool.input_schema })),
    instructionsIn: (body) => body.system,
    malformed: () => {
      const body = fixture('anthropic-three-calls');
      body.content[2].name = 42;
      return { body, path: 'reply.content.2.name: expected string, got 42' };
    },
  },
];

/** Retry waits recorded instead of slept, with the jitter fixed at its middle. */
function recordedWaits(): { waits: number[]; retry: RetryOptions } {
  const waits: number[] = [];
  return { waits, retry: { sleep: async (ms) => void waits.push(ms), random: () => 0.5 } };
}

const run = (provider: ModelProvider, options: { signal?: AbortSignal } = {}): Promise<RunResult> =>
  new AgentRunner({ provider, tools: lookupTools() }).run(planner, 'Hotels in Lisbon, Atlantis and Porto?', options);

function failure(result: RunResult): ErrorInfo {
  const last = result.events[result.events.length - 1];
  expect(last?.type, `expected RUN_FAILED, got ${JSON.stringify(last)}`).to.equal('RUN_FAILED');
  // The run's result carries the same error, facts and all.
  expect(result.error).to.deep.equal(last?.type === 'RUN_FAILED' ? last.error : undefined);
  return last?.type === 'RUN_FAILED' ? last.error : { name: '', message: '' };
}

for (const wire of wires) {
  describe(`${wire.title} against a stand-in vendor on 127.0.0.1`, () => {
    let server: WireServer | undefined;
    const serve = async (steps: readonly Step[]): Promise<WireServer> => (server = await startWireServer(steps));
    afterEach(async () => {
      await server?.close();
      server = undefined;
    });

    const callsFixture = (): any => fixture(`${wire.prefix}-three-calls`);
    const finalFixture = (): any => fixture(`${wire.prefix}-final-text`);
    const callIds = (): string[] =>
      wire.prefix === 'openai'
        ? callsFixture().choices[0].message.tool_calls.map((c: any) => c.id)
        : callsFixture().content.filter((b: any) => b.type === 'tool_use').map((b: any) => b.id);

    it('turns a reply with several tool calls into one batch, in the order the model asked', async () => {
      const vendor = await serve([{ body: callsFixture() }, { body: finalFixture() }]);
      const result = await run(wire.make(vendor));
      expect(result.status).to.equal('completed');
      expect(result.output).to.equal('Lisbon from 122, Porto from 115; no partner covers Atlantis.');
      const response = result.events.find((e) => e.type === 'MODEL_RESPONSE');
      expect(response?.type === 'MODEL_RESPONSE' ? response.toolCalls.map((c) => c.id) : []).to.deep.equal(callIds());
      const outcomes = result.events.filter((e) => e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR');
      expect(outcomes.map((e) => `${e.type} ${e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR' ? e.callId : ''}`)).to.deep.equal([
        `TOOL_RESULT ${callIds()[0]}`,
        `TOOL_ERROR ${callIds()[1]}`,
        `TOOL_RESULT ${callIds()[2]}`,
      ]);
      // What went out on the first request: the path, the key, the instructions and the tool's schema.
      const [first] = vendor.received;
      expect(first!.path).to.equal(wire.path);
      expect(first!.method).to.equal('POST');
      expect(wire.keyOf(first!.headers)).to.equal(wire.prefix === 'openai' ? `Bearer ${KEY}` : KEY);
      expect(first!.body.model).to.equal('test-model');
      expect(wire.instructionsIn(first!.body)).to.deep.equal(wire.prefix === 'openai' ? { role: 'system', content: 'Find hotels.' } : 'Find hotels.');
      expect(wire.toolsIn(first!.body)).to.deep.equal([
        { name: 'lookup', schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: true } },
      ]);
    });

    it('sends the results back in call order, though Lisbon (first) finished last, the failure marked as one', async () => {
      const vendor = await serve([{ body: callsFixture() }, { body: finalFixture() }]);
      await run(wire.make(vendor));
      expect(vendor.received).to.have.length(2);
      const [lisbon, atlantis, porto] = callIds();
      expect(wire.resultsIn(vendor.received[1]!.body)).to.deep.equal([
        { id: lisbon, content: '{"city":"Lisbon","from":122}', isError: false },
        { id: atlantis, content: 'Error: no partner covers Atlantis', isError: true },
        { id: porto, content: '{"city":"Porto","from":115}', isError: false },
      ]);
      expect(wire.resultsIn(vendor.received[0]!.body)).to.deep.equal([]);
    });

    it('fails the run with the status, the vendor error type and message for an error reply, without retrying a 400', async () => {
      const vendor = await serve([{ status: 400, body: fixture(`${wire.prefix}-error-400`) }]);
      const error = failure(await run(wire.make(vendor, { retry: recordedWaits().retry })));
      expect(error.name).to.equal('ProviderError');
      const vendorError = fixture(`${wire.prefix}-error-400`).error;
      expect(error.message).to.equal(
        `model provider failed on turn 1: ${wire.prefix === 'openai' ? 'OpenAI Chat Completions' : 'Anthropic Messages'} at ${new URL(vendor.url).host} replied 400 invalid_request_error: ${vendorError.message}`,
      );
      // The facts as plain fields, not only in the message.
      expect(error).to.include({ status: 400, code: 'invalid_request_error', attempts: 1 });
      expect(vendor.received).to.have.length(1);
    });

    it('fails the run naming the path and what was expected when the reply is malformed, rather than crashing', async () => {
      const { body, path } = wire.malformed();
      const vendor = await serve([{ body }]);
      const error = failure(await run(wire.make(vendor)));
      expect(error.name).to.equal('ProviderError');
      expect(error.message).to.match(/^model provider failed on turn 1: .* sent a reply that does not decode: /);
      expect(error.message).to.include(path);
    });

    it('rejects a 2xx body that is not JSON with a ProviderReplyError', async () => {
      const vendor = await serve([{ body: '<html>502 Bad Gateway</html>' }]);
      const provider = wire.make(vendor);
      const request: ModelRequest = { agent: 'planner', model: 'm', instructions: '', messages: [{ role: 'user', content: 'hi' }], tools: [] };
      const error = await Promise.resolve(provider.respond(request, new AbortController().signal)).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(ProviderReplyError);
      expect((error as Error).message).to.include('the body is not JSON: <html>502 Bad Gateway</html>');
    });

    it('retries a 429 after the Retry-After it was given, then succeeds', async () => {
      const vendor = await serve([{ status: 429, headers: { 'retry-after': '2' }, body: fixture(`${wire.prefix}-error-429`) }, { body: finalFixture() }]);
      const { waits, retry } = recordedWaits();
      const result = await run(wire.make(vendor, { retry }));
      expect(result.status).to.equal('completed');
      expect(waits).to.deep.equal([2000]);
      expect(vendor.received).to.have.length(2);
      expect(vendor.received[1]!.body).to.deep.equal(vendor.received[0]!.body);
    });

    it(`retries ${wire.overloaded} with doubling, jittered waits and gives up after the attempts allowed`, async () => {
      const overloaded = { status: wire.overloaded, body: wire.prefix === 'anthropic' ? fixture('anthropic-error-529') : { error: { message: 'The server is overloaded', type: 'server_error' } } };
      const vendor = await serve([overloaded, overloaded, overloaded, { body: finalFixture() }]);
      const { waits, retry } = recordedWaits();
      const error = failure(await run(wire.make(vendor, { retry: { ...retry, attempts: 3, baseDelayMs: 100 } })));
      // 100ms then 200ms, each jittered to 3/4 by random() = 0.5.
      expect(waits).to.deep.equal([75, 150]);
      expect(vendor.received).to.have.length(3);
      expect(error.message).to.include(`replied ${wire.overloaded}`).and.to.include('(after 3 attempts)');
      expect(error).to.include({ status: wire.overloaded, attempts: 3 });
    });

    it('stops at once when the run is cancelled mid-request: the request is aborted and the run ends RUN_CANCELLED', async () => {
      const vendor = await serve(['hang']);
      const controller = new AbortController();
      const running = run(wire.make(vendor), { signal: controller.signal });
      await vendor.arrived(1);
      controller.abort();
      const result = await running;
      expect(result.status).to.equal('cancelled');
      expect(result.events.map((e) => e.type)).to.deep.equal(['RUN_STARTED', 'RUN_CANCELLED']);
      // The vendor saw the client go away: the fetch itself was aborted, not left running.
      await vendor.hungUp;
    });

    it('fails the run naming timeoutSeconds when the endpoint hangs, after retrying it, rather than waiting for the run deadline', async () => {
      const vendor = await serve(['hang', 'hang']);
      const { waits, retry } = recordedWaits();
      // Long enough for a busy machine's server to see each request before the client gives up on it.
      const error = failure(await run(wire.make(vendor, { retry: { ...retry, attempts: 2, baseDelayMs: 100 }, timeoutSeconds: 0.3 })));
      expect(error.name).to.equal('ProviderError');
      expect(error.message).to.equal(
        `model provider failed on turn 1: ${wire.prefix === 'openai' ? 'OpenAI Chat Completions' : 'Anthropic Messages'} at ${new URL(vendor.url).host} did not reply within 0.3s (its timeoutSeconds) (after 2 attempts)`,
      );
      expect(vendor.received).to.have.length(2);
      expect(waits).to.deep.equal([75]);
      await vendor.hungUp;
    });

    it('rejects with the abort reason when its signal aborts mid-request', async () => {
      const vendor = await serve(['hang']);
      const controller = new AbortController();
      const request: ModelRequest = { agent: 'planner', model: 'm', instructions: '', messages: [{ role: 'user', content: 'hi' }], tools: [] };
      const pending = Promise.resolve(wire.make(vendor).respond(request, controller.signal)).catch((e: unknown) => e);
      await vendor.arrived(1);
      const reason = new Error('the run stopped');
      controller.abort(reason);
      expect(await pending).to.equal(reason);
      await vendor.hungUp;
    });

    it('keeps the key out of a cassette recorded from it', async () => {
      const vendor = await serve([{ body: callsFixture() }, { body: finalFixture() }]);
      const recorder = new CassetteRecorder({ provider: wire.make(vendor), tools: lookupTools() });
      const runner = new AgentRunner({ provider: recorder.provider, tools: recorder.tools });
      const { result, cassette } = await recorder.record(runner, planner, 'Hotels in Lisbon, Atlantis and Porto?');
      expect(result.status).to.equal('completed');
      const text = stringifyCassette(cassette);
      expect(text).to.include(callIds()[0]);
      expect(text).not.to.include(KEY);
    });

    describe('keys', () => {
      const envName = wire.prefix === 'openai' ? 'OPENAI_API_KEY' : 'ANTHROPIC_API_KEY';
      let saved: string | undefined;
      beforeEach(() => {
        saved = process.env[envName];
        delete process.env[envName];
      });
      afterEach(() => {
        if (saved === undefined) delete process.env[envName];
        else process.env[envName] = saved;
      });
      const official = (options: { apiKey?: string } = {}): ModelProvider =>
        wire.prefix === 'openai' ? new OpenAIChatProvider(options) : new AnthropicMessagesProvider(options);

      it('refuses a baseURL that carries credentials, without quoting them', () => {
        const baseURL = 'http://gateway-user:s3cr3t-pass@127.0.0.1:9/v1';
        let caught: unknown;
        try {
          if (wire.prefix === 'openai') new OpenAIChatProvider({ baseURL, apiKey: 'k' });
          else new AnthropicMessagesProvider({ baseURL, apiKey: 'k' });
        } catch (error) {
          caught = error;
        }
        expect(caught).to.be.instanceOf(ConfigError);
        expect((caught as Error).message).to.match(/baseURL must not carry credentials/);
        expect((caught as Error).message).not.to.include('s3cr3t');
      });

      it(`reads the key from ${envName} when options have none`, async () => {
        process.env[envName] = 'sk-from-the-environment-1234';
        const vendor = await serve([{ body: finalFixture() }]);
        const provider = wire.prefix === 'openai' ? new OpenAIChatProvider({ baseURL: `${vendor.url}/v1` }) : new AnthropicMessagesProvider({ baseURL: vendor.url });
        await run(provider);
        expect(wire.keyOf(vendor.received[0]!.headers)).to.equal(wire.prefix === 'openai' ? 'Bearer sk-from-the-environment-1234' : 'sk-from-the-environment-1234');
      });

      it(`refuses to start without a key for the vendor's own endpoint, naming ${envName}`, () => {
        expect(() => official()).to.throw(ConfigError, `pass apiKey or set ${envName}`);
      });

      it('keeps the key out of inspect and JSON', () => {
        const provider = official({ apiKey: KEY });
        expect(inspect(provider, { depth: 5, showHidden: true })).not.to.include(KEY);
        expect(JSON.stringify(provider)).not.to.include(KEY);
      });

      it('keeps the key out of an error, even when the vendor echoes it whole or masked', async () => {
        const masked = `${KEY.slice(0, 7)}****************${KEY.slice(-4)}`;
        const unauthorised: Step = { status: 401, body: { error: { message: `Incorrect API key provided: ${masked}. Also seen: ${KEY}.`, type: 'invalid_request_error', code: 'invalid_api_key' } } };
        const vendor = await serve([unauthorised, unauthorised]);
        const result = await run(wire.make(vendor));
        const error = failure(result);
        expect(error.message).to.include('replied 401').and.to.include('Incorrect API key provided: [redacted]. Also seen: [redacted].');
        expect(JSON.stringify(result)).not.to.include(KEY).and.not.to.include(KEY.slice(-4));
        const thrown = await Promise.resolve(
          wire.make(vendor).respond({ agent: 'a', model: 'm', instructions: '', messages: [], tools: [] }, new AbortController().signal),
        ).catch((e: unknown) => e);
        expect(thrown).to.be.instanceOf(ProviderHttpError);
        expect(inspect(thrown, { depth: 5 })).not.to.include(KEY).and.not.to.include(KEY.slice(-4));
      });
    });
  });
}
