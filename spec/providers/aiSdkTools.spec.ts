// The AI SDK's own tools (`tool()` from `ai`, with zod, its jsonSchema() wrapper, a Standard
// Schema) registered in one call, with what the AI SDK cannot say added beside them; their
// execute is given the call id, the abort signal and the conversation as model messages.
import type { LanguageModelV3Content, LanguageModelV3GenerateResult } from '@ai-sdk/provider';
import { jsonSchema, modelMessageSchema, tool, type ToolExecutionOptions } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { tool as tool7, type ToolExecutionOptions as ToolExecutionOptions7 } from 'ai7';
import { expect } from 'chai';
import * as t from 'io-ts';
import * as v from 'valibot';
import { toStandardJsonSchema } from '@valibot/to-json-schema';
import { z } from 'zod';
import { Agent, AgentRunner, ConcurrencyConfig, ConfigError, ScriptedProvider, ToolRegistry, type PolicyCall, type RunEvent } from '../../lib/index.js';
import { aiSdkProvider, aiSdkTools, registerAiSdkTools } from '../../lib/providers/aiSdkProvider.js';

const agent = new Agent({ name: 'assistant', instructions: 'help', model: 'm' });

const outcomes = (events: readonly RunEvent[]): string[] =>
  events.flatMap((e) =>
    e.type === 'TOOL_RESULT' ? [`${e.callId}=${JSON.stringify(e.result)}`] : e.type === 'TOOL_ERROR' ? [`${e.callId}!${e.error.name}: ${e.error.message}`] : e.type === 'TOOL_INDETERMINATE' ? [`${e.callId}?`] : [],
  );

describe('the AI SDK\'s own tools', () => {
  const seen: Array<{ input: { city: string; unit: 'C' | 'F' }; options: ToolExecutionOptions }> = [];
  const weather = tool({
    description: 'The weather in a city',
    inputSchema: z.object({ city: z.string(), unit: z.enum(['C', 'F']).default('C') }),
    execute: async (input, options) => {
      seen.push({ input, options });
      return { city: input.city, degrees: input.unit === 'C' ? 21 : 70 };
    },
  });
  const bookFlight = tool({
    description: 'Books a flight',
    inputSchema: jsonSchema<{ to: string }>(
      { type: 'object', properties: { to: { type: 'string' } }, required: ['to'], additionalProperties: false },
      { validate: (value) => (typeof (value as { to?: unknown }).to === 'string' ? { success: true, value: value as { to: string } } : { success: false, error: new Error('to must be a string') }) },
    ),
    needsApproval: true,
    execute: async ({ to }) => `booked to ${to}`,
  });

  beforeEach(() => {
    seen.length = 0;
  });

  it('registers the record passed to streamText in one call, showing the model each tool\'s JSON Schema', () => {
    const registry = registerAiSdkTools({ weather, bookFlight }, { idempotent: { weather: true }, parallelSafe: { bookFlight: false } });
    expect(registry.names).to.deep.equal(['weather', 'bookFlight']);
    expect(registry.specs()).to.deep.equal([
      {
        name: 'weather',
        description: 'The weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['C', 'F'], default: 'C' } }, required: ['city'] },
      },
      {
        name: 'bookFlight',
        description: 'Books a flight',
        parameters: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'], additionalProperties: false },
      },
    ]);
    const { declaration: w } = registry.get('weather')!;
    const { declaration: b } = registry.get('bookFlight')!;
    expect([w.idempotent, w.parallelSafe, w.needsApproval]).to.deep.equal([true, true, false]);
    expect([b.idempotent, b.parallelSafe, b.needsApproval]).to.deep.equal([false, false, true]);
  });

  it('hands execute its checked input, the call id, the call\'s abort signal and the conversation as the AI SDK\'s model messages', async () => {
    const registry = registerAiSdkTools({ weather });
    const provider = new ScriptedProvider([
      { text: 'Let me look', toolCalls: [{ id: 'call_1', name: 'weather', arguments: '{"city":"Lisbon"}' }] },
      { toolCalls: [{ id: 'call_2', name: 'weather', arguments: { city: 'Oslo', unit: 'F' } }] },
      { text: 'Warm in Lisbon' },
    ]);
    const result = await new AgentRunner({ provider, tools: registry }).run(agent, 'Weather in Lisbon and Oslo?');
    expect(outcomes(result.events)).to.deep.equal(['call_1={"city":"Lisbon","degrees":21}', 'call_2={"city":"Oslo","degrees":70}']);
    expect(seen.map((s) => s.input)).to.deep.equal([{ city: 'Lisbon', unit: 'C' }, { city: 'Oslo', unit: 'F' }]);
    expect(seen.map((s) => s.options.toolCallId)).to.deep.equal(['call_1', 'call_2']);
    expect(seen.every((s) => s.options.abortSignal instanceof AbortSignal && !s.options.abortSignal.aborted)).to.equal(true);
    expect(seen[0]!.options.messages).to.deep.equal([{ role: 'user', content: [{ type: 'text', text: 'Weather in Lisbon and Oslo?' }] }]);
    expect(seen[1]!.options.messages).to.deep.equal([
      { role: 'user', content: [{ type: 'text', text: 'Weather in Lisbon and Oslo?' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Let me look' }, { type: 'tool-call', toolCallId: 'call_1', toolName: 'weather', input: { city: 'Lisbon' } }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'call_1', toolName: 'weather', output: { type: 'text', value: '{"city":"Lisbon","degrees":21}' } }] },
    ]);
    // Every message is one the AI SDK's own schema accepts.
    for (const message of seen[1]!.options.messages) expect(modelMessageSchema.safeParse(message).success, JSON.stringify(message)).to.equal(true);
  });

  it('refuses bad input as any tool\'s bad arguments, with the path, and never runs execute', async () => {
    const registry = registerAiSdkTools({ weather, bookFlight }, { needsApproval: { bookFlight: false } });
    const provider = new ScriptedProvider([{ toolCalls: [{ id: 'a', name: 'weather', arguments: '{"city":7}' }, { id: 'b', name: 'bookFlight', arguments: '{"to":1}' }] }, { text: 'ok' }]);
    const result = await new AgentRunner({ provider, tools: registry }).run(agent, 'go');
    expect(outcomes(result.events)).to.deep.equal([
      'a!ToolArgumentsError: bad arguments for weather: args.city: expected string, got 7',
      'b!ToolArgumentsError: bad arguments for bookFlight: args: to must be a string, got {"to":1}',
    ]);
    expect(seen).to.deep.equal([]);
  });

  it('sends a tool that needs approval in the AI SDK through the runner\'s approve, with its checked input', async () => {
    const asked: PolicyCall[] = [];
    const registry = registerAiSdkTools({ bookFlight });
    const provider = new ScriptedProvider([{ toolCalls: [{ id: 'f1', name: 'bookFlight', arguments: '{"to":"Rome"}' }, { id: 'f2', name: 'bookFlight', arguments: '{"to":"Paris"}' }] }, { text: 'ok' }]);
    const result = await new AgentRunner({ provider, tools: registry, approve: (call) => (asked.push(call), (call.args as { to: string }).to === 'Rome') }).run(agent, 'go');
    expect(asked.map((c) => c.args)).to.deep.equal([{ to: 'Rome' }, { to: 'Paris' }]);
    expect(outcomes(result.events)).to.deep.equal(['f1="booked to Rome"', 'f2!ToolRejectedError: approval rejected the call: not approved']);
  });

  it('takes a function needsApproval as true, and lets extras say otherwise', () => {
    const maybe = tool({ inputSchema: z.object({}), needsApproval: async () => false, execute: async () => 1 });
    expect(registerAiSdkTools({ maybe }).get('maybe')!.declaration.needsApproval).to.equal(true);
    expect(registerAiSdkTools({ maybe }, { needsApproval: { maybe: false } }).get('maybe')!.declaration.needsApproval).to.equal(false);
  });

  it('takes a Standard Schema with a converter, a jsonSchema() wrapper without validate, and a lane', async () => {
    const lookup = tool({ inputSchema: toStandardJsonSchema(v.object({ q: v.string() })), execute: async ({ q }) => q.length });
    const raw = tool({ inputSchema: jsonSchema<{ n: number }>({ type: 'object', properties: { n: { type: 'number' } } }), execute: async (input) => input });
    const registry = registerAiSdkTools({ lookup, raw }, { lanes: { lookup: { key: 'search-api', limit: 2 } } });
    expect(registry.get('lookup')!.declaration.lane).to.deep.equal({ key: 'search-api', limit: 2 });
    expect(registry.get('raw')!.declaration.args).to.equal(undefined);
    const provider = new ScriptedProvider([{ toolCalls: [{ id: 'l', name: 'lookup', arguments: '{"q":"abc"}' }, { id: 'r', name: 'raw', arguments: '{"n":"not checked"}' }] }, { text: 'ok' }]);
    const result = await new AgentRunner({ provider, tools: registry }).run(agent, 'go');
    expect(outcomes(result.events)).to.deep.equal(['l=3', 'r={"n":"not checked"}']);
  });

  it('takes the last output of an execute that streams its output', async () => {
    const progress = tool({
      inputSchema: z.object({}),
      async *execute() {
        yield { status: 'working' as string };
        yield { status: 'done' as string };
      },
    });
    const provider = new ScriptedProvider([{ toolCalls: [{ id: 'p', name: 'progress', arguments: '{}' }] }, { text: 'ok' }]);
    const result = await new AgentRunner({ provider, tools: registerAiSdkTools({ progress }) }).run(agent, 'go');
    expect(outcomes(result.events)).to.deep.equal(['p={"status":"done"}']);
  });

  it('aborts execute\'s signal when the call is stopped', async () => {
    let signal: AbortSignal | undefined;
    const slow = tool({
      inputSchema: z.object({}),
      execute: (_input, options) =>
        new Promise((resolve) => {
          signal = options.abortSignal;
          options.abortSignal?.addEventListener('abort', () => resolve('stopped'));
        }),
    });
    const controller = new AbortController();
    const provider = new ScriptedProvider([{ toolCalls: [{ id: 's', name: 'slow', arguments: '{}' }] }, { text: 'ok' }]);
    const running = new AgentRunner({ provider, tools: registerAiSdkTools({ slow }, { idempotent: { slow: true } }) }).run(agent, 'go', { signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 5));
    controller.abort('enough');
    const result = await running;
    expect(signal?.aborted).to.equal(true);
    expect(result.status).to.equal('cancelled');
  });

  it('runs docs/ai-sdk-tools.md\'s "after" as written, on the AI SDK\'s mock model: the model sent the tools\' JSON Schema, the booking approved', async () => {
    const generated = (content: LanguageModelV3Content[], reason: 'tool-calls' | 'stop'): LanguageModelV3GenerateResult => ({
      content,
      finishReason: { unified: reason, raw: reason },
      usage: { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } },
      warnings: [],
    });
    const model = new MockLanguageModelV3({
      doGenerate: [
        generated(
          [
            { type: 'tool-call', toolCallId: 'w1', toolName: 'weather', input: '{"city":"Lisbon"}' },
            { type: 'tool-call', toolCallId: 'b1', toolName: 'bookFlight', input: '{"to":"Lisbon"}' },
          ],
          'tool-calls',
        ),
        generated([{ type: 'text', text: 'Booked; 21 degrees.' }], 'stop'),
      ],
    });
    const registry = registerAiSdkTools({ weather, bookFlight }, { idempotent: { weather: true }, parallelSafe: { bookFlight: false } });
    const asked: string[] = [];
    const runner = new AgentRunner({
      provider: aiSdkProvider(model, { stream: false }),
      tools: registry,
      concurrency: new ConcurrencyConfig({ maxConcurrentTools: 8, perTool: { weather: 4 } }),
      approve: async (call) => (asked.push(call.tool), true),
    });
    const planner = new Agent({ name: 'planner', instructions: 'Plan the trip.', model: 'gpt-4.1-mini' });
    const result = await runner.run(planner, 'Three days in Lisbon, flying Friday', { tenant: 'acme' });
    expect(result.output).to.equal('Booked; 21 degrees.');
    expect(outcomes(result.events)).to.deep.equal(['w1={"city":"Lisbon","degrees":21}', 'b1="booked to Lisbon"']);
    expect(asked).to.deep.equal(['bookFlight']);
    const sent = model.doGenerateCalls[0]!.tools!.map((t) => ({ name: t.name, inputSchema: (t as { inputSchema?: unknown }).inputSchema }));
    expect(sent).to.deep.equal(registry.specs().map((spec) => ({ name: spec.name, inputSchema: spec.parameters })));
  });

  describe('ai 7\'s tool()', () => {
    const told: unknown[] = [];
    const seen7: Array<ToolExecutionOptions7<{ locale: string }>> = [];
    const forecast = tool7({
      description: ({ context }) => (told.push(context), `The forecast in ${context.locale}`),
      inputSchema: z.object({ city: z.string() }),
      contextSchema: z.object({ locale: z.string() }),
      execute: async ({ city }, options) => (seen7.push(options), `sunny in ${city}`),
    });
    const fixed = tool7({ description: 'Says hello', inputSchema: z.object({ name: z.string() }), execute: ({ name }) => `hello ${name}` });

    beforeEach(() => {
      told.length = 0;
      seen7.length = 0;
    });

    it('registers ai 7 tools made with zod as they are typed (a string or a function description)', () => {
      // A type-level check as much as a run-time one: this call compiles.
      const registry = registerAiSdkTools({ forecast, fixed }, { context: { forecast: { locale: 'pt-PT' } } });
      expect(registry.names).to.deep.equal(['forecast', 'fixed']);
    });

    it('calls a function description with the tool\'s context, once, when it is registered, and shows the model what it returned', async () => {
      const registry = registerAiSdkTools({ forecast, fixed }, { context: { forecast: { locale: 'pt-PT' } } });
      expect(told).to.deep.equal([{ locale: 'pt-PT' }]);
      const provider = new ScriptedProvider([{ toolCalls: [{ id: 'f', name: 'forecast', arguments: '{"city":"Porto"}' }] }, { text: 'ok' }]);
      const result = await new AgentRunner({ provider, tools: registry }).run(agent, 'go');
      expect(outcomes(result.events)).to.deep.equal(['f="sunny in Porto"']);
      expect(provider.requests.map((request) => request.tools.map((t) => `${t.name}: ${t.description}`))).to.deep.equal([
        ['forecast: The forecast in pt-PT', 'fixed: Says hello'],
        ['forecast: The forecast in pt-PT', 'fixed: Says hello'],
      ]);
      expect(told).to.have.length(1);
      expect(seen7.map((o) => [o.toolCallId, o.context])).to.deep.equal([['f', { locale: 'pt-PT' }]]);
    });

    it('refuses a description function that throws or answers other than a string, naming the tool', () => {
      const broken = tool7({ description: () => { throw new Error('no locale'); }, inputSchema: z.object({}), execute: () => 1 });
      const odd = tool7({ description: () => 7 as unknown as string, inputSchema: z.object({}), execute: () => 1 });
      expect(() => aiSdkTools({ broken })).to.throw(ConfigError, /^tool broken: its description function threw: no locale$/);
      expect(() => aiSdkTools({ odd })).to.throw(ConfigError, /^tool odd: its description function must return a string, got 7$/);
    });
  });

  describe('refusals', () => {
    it('a tool without execute, naming it', () => {
      const clientSide = tool({ inputSchema: z.object({}) });
      expect(() => aiSdkTools({ clientSide })).to.throw(ConfigError, /^tool clientSide has no execute function/);
    });

    it('extras naming a tool that is not there, naming the field', () => {
      expect(() => aiSdkTools({ weather }, { idempotent: { wether: true } })).to.throw(ConfigError, /^idempotent names wether, which is not one of the tools \(weather\)$/);
      expect(() => aiSdkTools({ weather }, { retries: {} } as never)).to.throw(ConfigError, /retries/);
    });

    it('an inputSchema that is neither a Standard Schema nor the AI SDK\'s wrapper', () => {
      expect(() => aiSdkTools({ odd: { inputSchema: t.type({ a: t.string }), execute: () => 1 } })).to.throw(ConfigError, /^tool odd: inputSchema must be a Standard Schema/);
    });

    it('all or nothing: a name already taken registers none of them', () => {
      const registry = new ToolRegistry().register({ name: 'bookFlight' }, () => 1);
      expect(() => registerAiSdkTools({ weather, bookFlight }, {}, registry)).to.throw(ConfigError, /bookFlight is already registered/);
      expect(registry.names).to.deep.equal(['bookFlight']);
    });
  });
});
