// Standard Schemas (zod 4, valibot, arktype) beside io-ts codecs: as a tool's args (the body's
// type read from the schema, the model shown the schema's own JSON Schema, failures in io-ts's
// path-and-expectation form, asynchronous checks waited for at the gate without holding a
// permit) and as an agent's output.
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { toStandardJsonSchema } from '@valibot/to-json-schema';
import { type } from 'arktype';
import { expect } from 'chai';
import { isLeft, isRight } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { from } from 'rxjs';
import sinon from 'sinon';
import * as v from 'valibot';
import * as z from 'zod';
import {
  Agent,
  AgentRunner,
  ConfigError,
  ScriptedProvider,
  ToolRegistry,
  type ModelStreamPart,
  type PolicyCall,
  type RunEvent,
  type ToolCall,
} from '../../lib/index.js';
import { fingerprint } from '../../lib/testing.js';
import { isStandardSchema, type SchemaOutput, type StandardSchema } from '../../lib/tools/standardSchema.js';
import { decodeArguments, resolveDeclaration, type DecodedArguments } from '../../lib/tools/index.js';

// Compile-time checks: `Same<A, B>` is true only when A and B are the same type.
type Same<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;
const same = <A, B>(value: Same<A, B>): Same<A, B> => value;

const Weather = z.object({ city: z.string(), days: z.number().int().min(1).max(7).optional() });

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });
const call = (id: string, name: string, args: unknown): ToolCall => ({ id, name, arguments: JSON.stringify(args) });

function brief(event: RunEvent): string {
  switch (event.type) {
    case 'TOOL_RESULT':
      return `${event.callId}=${JSON.stringify(event.result)}`;
    case 'TOOL_ERROR':
      return `${event.callId}!${event.error.name}: ${event.error.message}`;
    case 'TOOL_INDETERMINATE':
      return `${event.callId}?`;
    case 'RUN_COMPLETED':
      return `done:${JSON.stringify(event.output)}`;
    case 'RUN_FAILED':
      return `failed:${event.error.message}`;
    case 'RUN_CANCELLED':
      return 'cancelled';
    default:
      return event.type;
  }
}

// A verdict expected at once.
function now(decoded: DecodedArguments | Promise<DecodedArguments>): DecodedArguments {
  if (decoded instanceof Promise) throw new Error('expected a verdict at once, got a Promise');
  return decoded;
}

describe('Standard Schema', () => {
  describe('telling schemas apart', () => {
    it('takes zod, valibot and arktype schemas as Standard Schemas, and io-ts codecs as codecs (zod 4 has a decode method too)', () => {
      expect(typeof (Weather as unknown as { decode?: unknown }).decode).to.equal('function');
      expect([Weather, v.object({ a: v.string() }), type({ a: 'string' })].map(isStandardSchema)).to.deep.equal([true, true, true]);
      expect([t.type({ a: t.string }), { '~standard': { version: 2, validate: () => ({}) } }, null, 'zod'].map(isStandardSchema)).to.deep.equal([false, false, false, false]);
    });

    it('fits the Standard Schema type of @standard-schema/spec, and reads the body\'s type from it', () => {
      const official: StandardSchemaV1<unknown, { a: number }> = z.object({ a: z.number() });
      const ours: StandardSchema<unknown, { a: number }> = official;
      expect(isStandardSchema(ours)).to.equal(true);
      expect(same<SchemaOutput<typeof Weather>, { city: string; days?: number | undefined }>(true)).to.equal(true);
      expect(same<SchemaOutput<t.TypeC<{ q: t.StringC }>>, { q: string }>(true)).to.equal(true);
      const Valibot = v.object({ q: v.string() });
      expect(same<SchemaOutput<typeof Valibot>, { q: string }>(true)).to.equal(true);
      const Ark = type({ q: 'string' });
      expect(same<SchemaOutput<typeof Ark>, { q: string }>(true)).to.equal(true);
    });
  });

  describe('as a tool\'s args', () => {
    it('types the body\'s arguments from the schema', async () => {
      const seen: Array<{ city: string; days?: number | undefined }> = [];
      const tools = new ToolRegistry().register({ name: 'weather', args: Weather }, (args) => {
        // A wrong use of `args` would not compile: `args.city` is a string, `args.days` a number or undefined.
        const city: string = args.city;
        seen.push({ city, days: args.days });
        return `${city} for ${args.days ?? 1} days`;
      });
      const provider = new ScriptedProvider([{ toolCalls: [call('c1', 'weather', { city: 'Lisbon', days: 3 })] }, { text: 'done' }]);
      const result = await new AgentRunner({ provider, tools }).run(agent, 'go');
      expect(result.events.map(brief).filter((e) => e.startsWith('c1'))).to.deep.equal(['c1="Lisbon for 3 days"']);
      expect(seen).to.deep.equal([{ city: 'Lisbon', days: 3 }]);
    });

    it('shows the model the JSON Schema of zod\'s own converter, without $schema', () => {
      const registry = new ToolRegistry().register({ name: 'weather', description: 'Forecast', args: Weather }, () => 1);
      expect(registry.specs()[0]).to.deep.equal({
        name: 'weather',
        description: 'Forecast',
        parameters: {
          type: 'object',
          properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1, maximum: 7 } },
          required: ['city'],
        },
      });
    });

    it('shows the JSON Schema of arktype\'s converter, and of valibot\'s through toStandardJsonSchema', () => {
      const registry = new ToolRegistry()
        .register({ name: 'ark', args: type({ q: 'string', 'n?': 'number' }) }, () => 1)
        .register({ name: 'vali', args: toStandardJsonSchema(v.object({ q: v.string() })) }, () => 1);
      expect(registry.get('ark')!.spec.parameters).to.deep.equal({ type: 'object', properties: { q: { type: 'string' }, n: { type: 'number' } }, required: ['q'] });
      expect(registry.get('vali')!.spec.parameters).to.deep.equal({ type: 'object', properties: { q: { type: 'string' } }, required: ['q'] });
    });

    it('refuses at register time a schema that cannot describe itself, naming the tool and what to do', () => {
      const register = (): ToolRegistry => new ToolRegistry().register({ name: 'lookup', args: v.object({ q: v.string() }) }, () => 1);
      expect(register).to.throw(ConfigError, /^tool lookup: the model cannot be shown its arguments: the valibot schema has no JSON Schema converter .*give the declaration `parameters`/);
      try {
        register();
      } catch (error) {
        expect((error as ConfigError).field).to.equal('args');
      }
    });

    it('refuses a schema its converter cannot express, with the converter\'s reason, and one that is not an object', () => {
      expect(() => new ToolRegistry().register({ name: 'when', args: z.object({ at: z.date() }) }, () => 1)).to.throw(ConfigError, /^tool when: the model cannot be shown its arguments: its JSON Schema converter refused it \(.*Date/);
      expect(() => new ToolRegistry().register({ name: 'text', args: z.string() }, () => 1)).to.throw(ConfigError, /^tool text: its args must describe an object \(type: 'object'\), got \{"\$schema"/);
    });

    it('shows the declared parameters of a schema that has no converter, and still checks with the schema', () => {
      const parameters = { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] };
      const registry = new ToolRegistry().register({ name: 'lookup', args: v.object({ q: v.string() }), parameters }, () => 1);
      expect(registry.specs()[0]!.parameters).to.deep.equal(parameters);
      const decoded = now(decodeArguments(registry.get('lookup')!.declaration, { q: 3 }));
      expect(isLeft(decoded) && decoded.left.message).to.equal('bad arguments for lookup: args.q: expected string, got 3');
    });

    const failing = [
      { vendor: 'zod', args: Weather, raw: { city: 42, days: 1 }, message: 'bad arguments for search: args.city: expected string, got 42' },
      { vendor: 'zod', args: Weather, raw: '{"city":"x","days":9}', message: 'bad arguments for search: args.days: Too big: expected number to be <=7, got 9' },
      { vendor: 'zod', args: Weather, raw: {}, message: 'bad arguments for search: args.city: expected string, got undefined' },
      { vendor: 'valibot', args: toStandardJsonSchema(v.object({ q: v.string(), page: v.number() })), raw: { q: null, page: 'two' }, message: 'bad arguments for search: args.q: expected string, got null; args.page: expected number, got "two"' },
      { vendor: 'arktype', args: type({ q: 'string' }), raw: { q: 1 }, message: 'bad arguments for search: args.q: expected a string, got 1' },
      { vendor: 'io-ts', args: t.type({ q: t.string }), raw: { q: 1 }, message: 'bad arguments for search: args.q: expected string, got 1' },
    ];
    for (const c of failing) {
      it(`refuses bad arguments (${c.vendor}) with the path, what was expected and what came, as io-ts does: ${JSON.stringify(c.raw)}`, () => {
        const decoded = now(decodeArguments(resolveDeclaration({ name: 'search', args: c.args }), c.raw));
        expect(isLeft(decoded) && decoded.left.name).to.equal('ToolArgumentsError');
        expect(isLeft(decoded) && decoded.left.message).to.equal(c.message);
      });
    }

    it('hands the body what the schema outputs (defaults and transforms applied), checked at once when the schema is synchronous', () => {
      const declaration = resolveDeclaration({ name: 'page', args: z.object({ q: z.string().trim(), page: z.number().default(1) }) });
      const decoded = decodeArguments(declaration, '{"q":"  hotels "}');
      expect(decoded).not.to.be.instanceOf(Promise);
      expect(isRight(now(decoded)) && (now(decoded) as { right: unknown }).right).to.deep.equal({ q: 'hotels', page: 1 });
    });

    it('turns a schema that throws while checking into a refusal of that call', async () => {
      const throwing = z.object({ q: z.string().transform(() => { throw new Error('boom'); }) });
      const decoded = await (decodeArguments(resolveDeclaration({ name: 'x', args: throwing, parameters: { type: 'object' } }), { q: 'a' }));
      expect(isLeft(decoded) && decoded.left.message).to.equal('bad arguments for x: args: the zod schema threw while checking (boom)');
    });
  });

  describe('checking asynchronously', () => {
    // A city is known once a lookup, 5 ms away, says so.
    const Known = z.object({ city: z.string().refine(async (city) => new Promise<boolean>((resolve) => setTimeout(() => resolve(city !== 'Atlantis'), 5)), { message: 'Unknown city' }) });

    it('gives a Promise, and refuses with the same form', async () => {
      const declaration = resolveDeclaration({ name: 'weather', args: Known });
      const pending = decodeArguments(declaration, { city: 'Atlantis' });
      expect(pending).to.be.instanceOf(Promise);
      const decoded = await pending;
      expect(isLeft(decoded) && decoded.left.message).to.equal('bad arguments for weather: args.city: Unknown city, got "Atlantis"');
    });

    it('waits at the gate for each verdict in call order: a refused call is never dispatched, its siblings run with their arguments', async () => {
      const ran: string[] = [];
      const tools = new ToolRegistry()
        .register({ name: 'weather', args: Known }, ({ city }) => {
          ran.push(city);
          return `sun in ${city}`;
        })
        .register({ name: 'now', args: t.type({}) }, () => 'noon');
      const provider = new ScriptedProvider([{ toolCalls: [call('c1', 'weather', { city: 'Lisbon' }), call('c2', 'weather', { city: 'Atlantis' }), call('c3', 'now', {})] }, { text: 'done' }]);
      const result = await new AgentRunner({ provider, tools }).run(agent, 'go');
      expect(result.events.map(brief).filter((e) => /^c\d/.test(e))).to.deep.equal([
        'c1="sun in Lisbon"',
        'c2!ToolArgumentsError: bad arguments for weather: args.city: Unknown city, got "Atlantis"',
        'c3="noon"',
      ]);
      expect(ran).to.deep.equal(['Lisbon']);
      // The refusal goes back to the model as any bad arguments do.
      expect(provider.requests[1]!.messages.filter((m) => m.role === 'tool').map((m) => m.isError === true)).to.deep.equal([false, true, false]);
    });

    it('shows the policies the checked arguments, and asks approval only for calls that passed', async () => {
      const asked: PolicyCall[] = [];
      const tools = new ToolRegistry().register({ name: 'weather', args: Known, needsApproval: true }, ({ city }) => city);
      const provider = new ScriptedProvider([{ toolCalls: [call('c1', 'weather', { city: 'Lisbon' }), call('c2', 'weather', { city: 'Atlantis' })] }, { text: 'done' }]);
      const result = await new AgentRunner({ provider, tools, approve: (c) => (asked.push(c), true) }).run(agent, 'go');
      expect(asked.map((c) => [c.callId, c.args])).to.deep.equal([['c1', { city: 'Lisbon' }]]);
      expect(result.events.map(brief).filter((e) => /^c\d/.test(e)).map((e) => e.slice(0, 3))).to.deep.equal(['c1=', 'c2!']);
    });

    it('classifies a call cancelled while its arguments are being checked as never dispatched, not as in flight', async () => {
      const controller = new AbortController();
      const Slow = z.object({ q: z.string().refine(async () => new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 50))) });
      let started = 0;
      const tools = new ToolRegistry().register({ name: 'book', args: Slow }, () => ++started);
      const provider = new ScriptedProvider([{ toolCalls: [call('c1', 'book', { q: 'x' })] }, { text: 'done' }]);
      setTimeout(() => controller.abort('enough'), 10);
      const result = await new AgentRunner({ provider, tools }).run(agent, 'go', { signal: controller.signal });
      const outcome = result.events.find((e) => e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE' || e.type === 'TOOL_RESULT')!;
      expect(outcome.type).to.equal('TOOL_ERROR');
      expect(outcome.type === 'TOOL_ERROR' && outcome.error.message).to.match(/never dispatched/);
      expect(result.status).to.equal('cancelled');
      // The verdict that comes after the run ended starts nothing.
      await new Promise((resolve) => setTimeout(resolve, 60));
      expect(started).to.equal(0);
    });

    it('waits for verdicts in a streamed turn too', async () => {
      const tools = new ToolRegistry().register({ name: 'weather', args: Known }, ({ city }) => city.toUpperCase());
      const parts: ModelStreamPart[] = [
        { type: 'tool-call', id: 'c1', name: 'weather', arguments: '{"city":"Atlantis"}' },
        { type: 'tool-call', id: 'c2', name: 'weather', arguments: '{"city":"Porto"}' },
      ];
      const provider = new ScriptedProvider([() => from(parts), { text: 'done' }]);
      const result = await new AgentRunner({ provider, tools }).run(agent, 'go');
      expect(result.events.map(brief).filter((e) => /^c\d/.test(e))).to.deep.equal([
        'c1!ToolArgumentsError: bad arguments for weather: args.city: Unknown city, got "Atlantis"',
        'c2="PORTO"',
      ]);
    });
  });

  describe('docs/getting-started.md', () => {
    afterEach(() => sinon.restore());

    it('runs its zod example as written: the model shown the converter\'s schema, the default applied, the output checked', async () => {
      const fetched: string[] = [];
      sinon.stub(globalThis, 'fetch').callsFake(async (url) => {
        fetched.push(String(url));
        return new Response('{"high":24}');
      });
      const Forecast = z.object({
        city: z.string().describe('A city name, as people write it'),
        days: z.number().int().min(1).max(7).default(3),
      });
      const tools = new ToolRegistry().register(
        { name: 'forecast', description: 'The weather for the next days', args: Forecast, idempotent: true },
        async ({ city, days }, ctx) => {
          const response = await fetch(`https://weather.example/${encodeURIComponent(city)}?days=${days}`, { signal: ctx.signal });
          return response.json();
        },
      );
      const planner = new Agent({
        name: 'planner',
        instructions: 'Answer with JSON: { "pack": [...] }',
        model: 'your-model',
        output: z.object({ pack: z.array(z.string()) }),
      });
      const provider = new ScriptedProvider([{ toolCalls: [call('f', 'forecast', { city: 'São Paulo' })] }, { text: '{"pack":["shorts"]}' }]);
      const result = await new AgentRunner({ provider, tools }).run(planner, 'What to pack for São Paulo?');
      expect(provider.requests[0]!.tools[0]!.parameters).to.deep.equal({
        type: 'object',
        properties: { city: { type: 'string', description: 'A city name, as people write it' }, days: { type: 'integer', minimum: 1, maximum: 7, default: 3 } },
        required: ['city'],
      });
      expect(fetched).to.deep.equal(['https://weather.example/S%C3%A3o%20Paulo?days=3']);
      expect(result.output).to.deep.equal({ pack: ['shorts'] });
    });
  });

  describe('as an agent\'s output', () => {
    const Plan = z.object({ steps: z.array(z.string()).min(1) });
    const planner = new Agent({ name: 'planner', instructions: 'plan', model: 'm', output: Plan });

    it('decodes the final answer with the schema', async () => {
      const provider = new ScriptedProvider([{ text: '{"steps":["a","b"]}' }]);
      const result = await new AgentRunner({ provider, tools: new ToolRegistry() }).run(planner, 'go');
      expect(result.status).to.equal('completed');
      expect(result.output).to.deep.equal({ steps: ['a', 'b'] });
      expect(planner.freeText).to.equal(false);
    });

    it('fails the run with the path and the expectation when the answer does not pass', async () => {
      const provider = new ScriptedProvider([{ text: '{"steps":[]}' }]);
      const result = await new AgentRunner({ provider, tools: new ToolRegistry() }).run(planner, 'go');
      expect(result.status).to.equal('failed');
      expect(result.error?.message).to.equal('the final answer of planner does not decode: output.steps: Too small: expected array to have >=1 items, got []');
    });

    it('waits for a schema that checks asynchronously, whole or streamed', async () => {
      const Checked = z.object({ city: z.string().refine(async (city) => city !== 'Atlantis', { message: 'Unknown city' }) });
      const teller = new Agent({ name: 'teller', instructions: '', model: 'm', output: Checked });
      const tools = new ToolRegistry();
      const whole = await new AgentRunner({ provider: new ScriptedProvider([{ text: '{"city":"Porto"}' }]), tools }).run(teller, 'go');
      expect(whole.output).to.deep.equal({ city: 'Porto' });
      const streamed = await new AgentRunner({ provider: new ScriptedProvider([() => from([{ type: 'text-delta', delta: '{"city":"Atlantis"}' } as ModelStreamPart])]), tools }).run(teller, 'go');
      expect(streamed.status).to.equal('failed');
      expect(streamed.error?.message).to.equal('the final answer of teller does not decode: output.city: Unknown city, got "Atlantis"');
    });

    it('types the agent from the schema, and names the schema in the fingerprint: its vendor and its JSON Schema', () => {
      expect(same<typeof planner, Agent<{ steps: string[] }>>(true)).to.equal(true);
      const other = new Agent({ name: 'planner', instructions: 'plan', model: 'm', output: z.object({ steps: z.array(z.number()) }) });
      const tools = new ToolRegistry();
      expect(fingerprint(planner, tools).agent.output).to.equal('zod {"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"steps":{"minItems":1,"type":"array","items":{"type":"string"}}},"required":["steps"]}');
      expect(fingerprint(other, tools).sha256).not.to.equal(fingerprint(planner, tools).sha256);
      const plain = new Agent({ name: 'planner', instructions: 'plan', model: 'm', output: v.object({ steps: v.array(v.string()) }) });
      expect(fingerprint(plain, tools).agent.output).to.equal('valibot schema');
    });

    it('refuses an output that is neither a codec nor a Standard Schema', () => {
      expect(() => new Agent({ name: 'a', instructions: '', model: 'm', output: { parse: () => 1 } as never })).to.throw(ConfigError, /Agent output must be an io-ts codec or a Standard Schema/);
    });
  });
});
