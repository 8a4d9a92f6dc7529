// aiSdkProvider with the real provider packages (`@ai-sdk/openai`'s chat and Responses models and
// `@ai-sdk/anthropic`, of ai 6 and of ai 7) against the stand-in vendor on 127.0.0.1 writing the
// recorded wire streams the built-in adapters are tested with (and a recorded Responses stream,
// spec/fixtures/wire/openai-responses-stream-*.sse): the calls start while the stream
// is still written (the vendor holds the stream open until they have, and the order of events
// says which came first), the run ends as the built-in adapters' runs do, and an HTTP error keeps
// its status, isRetryable and Retry-After.
import { expect } from 'chai';
import * as t from 'io-ts';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createAnthropic as createAnthropicV4 } from '@ai-sdk/anthropic-v4';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAI as createOpenAIV4 } from '@ai-sdk/openai-v4';
import { Agent, AgentRunner, ToolRegistry, type ModelProvider, type RunResult } from '../../lib/index.js';
import { AnthropicMessagesProvider, OpenAIChatProvider } from '../../lib/providers.js';
import { aiSdkProvider, type AiSdkLanguageModel } from '../../lib/providers/aiSdkProvider.js';
import { fixture, sseChunks, startWireServer, type WireServer } from './wireServer.js';

const KEY = 'sk-test-0123456789abcdefWXYZ';
const planner = new Agent({ name: 'planner', instructions: 'Find hotels.', model: 'test-model' });

interface Provider {
  readonly title: string;
  readonly prefix: 'openai' | 'anthropic';
  /** The recorded streams' name: `<streams>-stream-three-calls.sse`, `<streams>-stream-final-text.sse`. */
  readonly streams?: string;
  model(server: WireServer): AiSdkLanguageModel;
  /** How many chunks of `<prefix>-stream-three-calls` the first call is complete in. */
  readonly firstCallChunks: number;
}

const providers: Provider[] = [
  // The chat model writes every call's tool-input-end only when the stream closes; each call is
  // complete once its input is a whole JSON object, at the chunk that closes it.
  { title: '@ai-sdk/openai 3 chat model (ai 6)', prefix: 'openai', model: (s) => createOpenAI({ baseURL: `${s.url}/v1`, apiKey: KEY }).chat('gpt-4.1-mini'), firstCallChunks: 8 },
  { title: '@ai-sdk/openai 4 chat model (ai 7)', prefix: 'openai', model: (s) => createOpenAIV4({ baseURL: `${s.url}/v1`, apiKey: KEY }).chat('gpt-4.1-mini'), firstCallChunks: 8 },
  // The Responses model writes tool-input-end and the tool-call at the call's output_item.done,
  // two events after the arguments delta that closes the input.
  { title: '@ai-sdk/openai 3 responses model (ai 6)', prefix: 'openai', streams: 'openai-responses', model: (s) => createOpenAI({ baseURL: `${s.url}/v1`, apiKey: KEY }).responses('gpt-4.1-mini'), firstCallChunks: 9 },
  { title: '@ai-sdk/openai 4 responses model (ai 7)', prefix: 'openai', streams: 'openai-responses', model: (s) => createOpenAIV4({ baseURL: `${s.url}/v1`, apiKey: KEY }).responses('gpt-4.1-mini'), firstCallChunks: 9 },
  // The Anthropic model writes tool-input-end and the tool-call at the tool_use block's stop, a
  // chunk after the input_json_delta that closes the input, where the call is already complete.
  { title: '@ai-sdk/anthropic 3 (ai 6)', prefix: 'anthropic', model: (s) => createAnthropic({ baseURL: `${s.url}/v1`, apiKey: KEY })('claude-sonnet-4-5'), firstCallChunks: 14 },
  { title: '@ai-sdk/anthropic 4 (ai 7)', prefix: 'anthropic', model: (s) => createAnthropicV4({ baseURL: `${s.url}/v1`, apiKey: KEY })('claude-sonnet-4-5'), firstCallChunks: 14 },
];

/** Resolves once `n` names are in `set`, or after `ms`, whichever comes first (so a wrong adapter fails the spec instead of hanging it). */
function whenStarted(names: readonly string[], started: Map<string, number>, ms: number): { promise: Promise<void>; check(): void; clear(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  const timer = setTimeout(resolve, ms);
  return {
    promise,
    check: () => {
      if (names.every((n) => started.has(n))) resolve();
    },
    clear: () => clearTimeout(timer),
  };
}

for (const provider of providers) {
  describe(`aiSdkProvider with ${provider.title}, streaming from a stand-in vendor on 127.0.0.1`, () => {
    let server: WireServer | undefined;
    afterEach(async () => {
      await server?.close();
      server = undefined;
    });

    it('starts each call while the stream is still written, as the built-in adapters do', async () => {
      const chunks = sseChunks(`${provider.streams ?? provider.prefix}-stream-three-calls`);
      // What happened, in order: a call starting (with how many chunks had been written), the stream's end.
      const log: string[] = [];
      const started = new Map<string, number>();
      const first = whenStarted(['Lisbon'], started, 3000);
      const all = whenStarted(['Lisbon', 'Atlantis', 'Porto'], started, 3000);
      // Held after the first call's chunks until Lisbon runs, and before the last two chunks
      // (the finish and the usage, or message_delta and message_stop) until every call runs.
      const vendor = (server = await startWireServer([
        {
          chunks,
          holds: [
            { after: provider.firstCallChunks, until: first.promise },
            { after: chunks.length - 2, until: all.promise },
          ],
        },
        { chunks: sseChunks(`${provider.streams ?? provider.prefix}-stream-final-text`) },
      ]));
      const tools = new ToolRegistry().register({ name: 'lookup', description: 'Hotel prices in a city', args: t.type({ city: t.string }) }, async ({ city }) => {
        started.set(city, vendor.written.length);
        log.push(`start ${city} after ${vendor.written.length} chunks`);
        first.check();
        all.check();
        if (city === 'Atlantis') throw new Error('no partner covers Atlantis');
        return { city, from: 80 + city.length * 7 };
      });
      const runner = new AgentRunner({ provider: aiSdkProvider(provider.model(vendor)), tools });
      const result: RunResult = await runner.run(planner, 'Hotels in Lisbon, Atlantis and Porto?');
      first.clear();
      all.clear();
      expect(result.status).to.equal('completed');
      expect(result.output).to.equal('Lisbon from 122, Porto from 115; no partner covers Atlantis.');
      // Every call started before the last two chunks of its stream were written; Lisbon while the rest of the calls were still to come.
      expect(log).to.have.length(3);
      expect(log[0]).to.match(/^start Lisbon after \d+ chunks$/);
      expect(started.get('Lisbon')).to.be.at.most(provider.firstCallChunks);
      for (const city of ['Atlantis', 'Porto']) expect(started.get(city)).to.be.at.most(chunks.length - 2);
      const response = result.events.find((e) => e.type === 'MODEL_RESPONSE');
      expect(response?.type === 'MODEL_RESPONSE' ? response.toolCalls.map((c) => JSON.parse(String(c.arguments)).city) : []).to.deep.equal(['Lisbon', 'Atlantis', 'Porto']);
      expect(vendor.received).to.have.length(2);
      // The results went back in call order, as the provider's own wire form.
      expect(JSON.stringify(vendor.received[1]!.body)).to.include('no partner covers Atlantis');
    });

    it('keeps an HTTP error’s status, code, isRetryable and Retry-After on the run’s error, in the fields the built-in adapter’s error has', async () => {
      const reply = { status: 429, headers: { 'retry-after': '7' }, body: fixture(`${provider.prefix}-error-429`) };
      const vendor = (server = await startWireServer([reply, reply]));
      const result = await failed(aiSdkProvider(provider.model(vendor)));
      expect(result.status).to.equal('failed');
      expect(result.error).to.deep.include({ name: 'ProviderError', status: 429, isRetryable: true, retryAfterSeconds: 7, attempts: 1 });
      expect(result.error?.code).to.equal(fixture(`${provider.prefix}-error-429`).error.type);
      expect(vendor.received).to.have.length(1);
      await sameFactsAsBuiltIn(result, vendor);
    });

    it('says a 400 is not worth repeating, with no Retry-After, as the built-in adapter does', async () => {
      const reply = { status: 400, body: fixture(`${provider.prefix}-error-400`) };
      const vendor = (server = await startWireServer([reply, reply]));
      const result = await failed(aiSdkProvider(provider.model(vendor)));
      expect(result.error).to.deep.include({ status: 400, isRetryable: false, attempts: 1, code: fixture(`${provider.prefix}-error-400`).error.type });
      expect(result.error).not.to.have.property('retryAfterSeconds');
      await sameFactsAsBuiltIn(result, vendor);
    });

    const failed = async (model: ModelProvider): Promise<RunResult> => new AgentRunner({ provider: model, tools: new ToolRegistry() }).run(planner, 'go');

    // The built-in adapter, told not to retry, on the vendor's next reply (the same): the same facts under the same names.
    async function sameFactsAsBuiltIn(result: RunResult, vendor: WireServer): Promise<void> {
      const builtIn =
        provider.prefix === 'openai'
          ? new OpenAIChatProvider({ baseURL: `${vendor.url}/v1`, apiKey: KEY, retry: { attempts: 1 } })
          : new AnthropicMessagesProvider({ baseURL: vendor.url, apiKey: KEY, retry: { attempts: 1 } });
      const { name, message: _theirs, ...facts } = (await failed(builtIn)).error!;
      const { message: _ours, ...ourFacts } = result.error!;
      expect(name).to.equal('ProviderError');
      expect(ourFacts).to.deep.equal({ name, ...facts });
    }
  });
}
