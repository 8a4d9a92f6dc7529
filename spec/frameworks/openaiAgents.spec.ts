// agent-lanes/openai-agents against the real OpenAI Agents SDK: its Runner runs agents whose
// model is scripted (no network), their function tools wrapped by withLanes. Counted from the
// tool bodies: how many ran at once per tool and per tenant across several requests of two
// tenants; which bodies started when a run was stopped; and a runner's calls and the SDK's
// sharing one lane. What the SDK dropped is read back from toolLanes.activity$.
import { expect } from 'chai';
import { Agent, Runner, RunState, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { ConcurrencyConfig, ToolLanes } from '../../lib/index.js';
import { withLanes } from '../../lib/openaiAgents.js';
import { callsTurn, resultsSeen, ScriptedAgentsModel, textTurn } from './agentsModel.js';
import { BodyTally, settledOf, sleep, until, untilAborted } from './bodies.js';
import { expectSharedLane, expectStoppedRun, expectStubbornBodyKeepsPermit, expectTenantsBounded } from './scenarios.js';

// The SDK would send its traces to OpenAI; these runs have nowhere to send them.
setTracingDisabled(true);

const query = z.object({ q: z.string() });

/** The lookup tool, its body handed the query, and the call id and signal the SDK gave its execute. */
function lookupTool(body: (q: string, callId: string, signal: AbortSignal | undefined) => Promise<string>, timeoutMs?: number) {
  return tool({
    name: 'lookup',
    description: 'Look a thing up.',
    parameters: query,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    execute: ({ q }, _context, details) => body(q, details!.toolCall!.callId, details?.signal),
  });
}

describe('agent-lanes/openai-agents: withLanes around the Agents SDK\'s function tools', function () {
  this.timeout(20_000);

  it('keeps several concurrent requests of two tenants inside perTool and perTenant, counted from the bodies', () =>
    expectTenantsBounded(async ({ toolLanes, tally, tenant, r, calls }) => {
      // The request's tools: each body knows its tool and its tenant by its closure.
      const made = ['lookup', 'quote'].map((name) =>
        tool({
          name,
          description: `${name} a thing`,
          parameters: query,
          execute: ({ q }, _context, details) => tally.body(name, tenant, details?.toolCall?.callId ?? '?', () => sleep(10).then(() => `${name}:${q}`)),
        }),
      );
      const model = new ScriptedAgentsModel([callsTurn(calls), textTurn('done')]);
      const agent = new Agent({ name: `r${r}`, instructions: 'Look things up.', model, tools: withLanes(made, toolLanes, { tenant }) });
      const result = await new Runner().run(agent, 'go');
      return { final: result.finalOutput, seen: resultsSeen(model.requests[1]!.input) };
    }));

  for (const idempotent of [false, true]) {
    const running = idempotent ? 'safe_to_call_again' : 'indeterminate';
    it(`a stopped run: its queued calls never start, its running call is ${running} on activity$, and the SDK drops them (idempotent: ${idempotent})`, () =>
      expectStoppedRun(idempotent, 'the SDK', ({ toolLanes, tally, stop, calls, options }) => {
        // It runs until its call is stopped.
        const lookup = lookupTool((_q, callId, signal) => tally.body('lookup', 'default', callId, () => untilAborted(signal!)));
        const model = new ScriptedAgentsModel([callsTurn(calls), textTurn('never')]);
        const agent = new Agent({ name: 'stopped', instructions: '', model, tools: withLanes([lookup], toolLanes, options) });
        return { run: new Runner().run(agent, 'go', { signal: stop.signal }), modelAsked: () => model.requests.length };
      }));
  }

  it("the SDK's own timeoutMs: a call still queued when it fires never starts, the running one is classified, and the model reads the SDK's timeout message for both", async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
    const { settled, subscription } = settledOf(toolLanes);
    const tally = new BodyTally();
    // It runs 300 ms whatever its signal says.
    const lookup = lookupTool((q, callId) => tally.body('lookup', 'default', callId, () => sleep(300).then(() => q)), 100);
    const model = new ScriptedAgentsModel([callsTurn([['lookup', 'c0', { q: 'a' }], ['lookup', 'c1', { q: 'b' }]]), textTurn('done')]);
    const agent = new Agent({ name: 'slow', instructions: '', model, tools: withLanes([lookup], toolLanes) });
    const result = await new Runner().run(agent, 'go');
    expect(result.finalOutput).to.equal('done');
    expect(resultsSeen(model.requests[1]!.input)).to.deep.equal({ c0: "Tool 'lookup' timed out after 100ms.", c1: "Tool 'lookup' timed out after 100ms." });
    await until(() => settled.length === 2 && tally.ended.length === 1, 'both calls settled and the running body ended');
    subscription.unsubscribe();
    expect(tally.started, 'bodies that started').to.deep.equal(['c0']);
    expect(Object.fromEntries(settled.map((s) => [s.callId, s.stopClass]))).to.deep.equal({ c0: 'indeterminate', c1: 'never_dispatched' });
  });

  it('a body that ignores its stop keeps its permit until it ends: the next request\'s call waits for it', () =>
    expectStubbornBodyKeepsPermit(({ toolLanes, body }) => {
      const lookup = lookupTool((q, callId) => body(callId, q));
      return {
        first: async (signal) => {
          const first = new Agent({ name: 'first', instructions: '', model: new ScriptedAgentsModel([callsTurn([['lookup', 'f0', { q: 'first' }]]), textTurn('never')]), tools: withLanes([lookup], toolLanes, { signal }) });
          const error = await new Runner().run(first, 'go', { signal }).catch((reason: unknown) => reason);
          expect((error as Error).name).to.equal('AbortError');
        },
        next: async () => {
          const next = new Agent({ name: 'next', instructions: '', model: new ScriptedAgentsModel([callsTurn([['lookup', 'n0', { q: 'next' }]]), textTurn('done')]), tools: withLanes([lookup], toolLanes) });
          expect((await new Runner().run(next, 'go')).finalOutput).to.equal('done');
        },
      };
    }));

  it('a stop of the lanes\' own (the request\'s signal alone) tells the model the calls never started, and the SDK runs on', async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 2 } }) });
    const tally = new BodyTally();
    const lookup = tool({ name: 'lookup', description: 'Look a thing up.', parameters: query, execute: ({ q }) => tally.body('lookup', 'default', q, async () => q) });
    const gone = new AbortController();
    gone.abort(new Error('the page was closed'));
    const model = new ScriptedAgentsModel([callsTurn([['lookup', 'c0', { q: 'a' }], ['lookup', 'c1', { q: 'b' }]]), textTurn('sorry')]);
    const agent = new Agent({ name: 'closed', instructions: '', model, tools: withLanes([lookup], toolLanes, { signal: gone.signal }) });
    const result = await new Runner().run(agent, 'go');
    expect(result.finalOutput).to.equal('sorry');
    expect(tally.started).to.deep.equal([]);
    const seen = resultsSeen(model.requests[1]!.input);
    expect(Object.keys(seen)).to.deep.equal(['c0', 'c1']);
    for (const text of Object.values(seen)) {
      expect(text).to.match(/^The call was stopped before it started: nothing happened, and asking for it again is safe\. \(never dispatched: the request was cancelled: the page was closed\)$/);
    }
  });

  it("shares one lane with an AgentRunner: the runner's calls and the SDK's together stay inside perTool", () =>
    expectSharedLane({ key: 'tenant:runner', note: 'the runner alone fills the lane' }, ({ toolLanes, tally }) => {
      const lookup = lookupTool((_q, callId) => tally.body('lookup', 'sdk', callId, () => sleep(20).then(() => 'sdk')));
      const model = new ScriptedAgentsModel([callsTurn([0, 1, 2, 3].map((i) => ['lookup', `sdk-${i}`, { q: `${i}` }] as const)), textTurn('done')]);
      const agent = new Agent({ name: 'sdk', instructions: '', model, tools: withLanes([lookup], toolLanes) });
      return async () => {
        const theirs = await new Runner().run(agent, 'go');
        expect(theirs.finalOutput).to.equal('done');
      };
    }));

  // A known limit (docs/openai-agents.md): the SDK keeps each tool's input parser in a WeakMap
  // keyed by its invoke function, and reads it before approvals. The wrapped tool's invoke is a new
  // function with no parser there, so a needsApproval function is handed the model's JSON as sent
  // (no defaults, no transforms); the tool itself still parses it. The SDK has no public way to
  // register a parser for another function. This spec fails once that changes: then the policy
  // sees the parsed input, as without the lanes, and the limit can leave the docs.
  it("(a known limit) hands a needsApproval function the model's JSON as sent, without the schema's defaults, where the plain tool hands it the parsed input", async () => {
    const runWith = async (wrap: boolean): Promise<{ seen: unknown[]; asked: number; started: string[] }> => {
      const tally = new BodyTally();
      const seen: unknown[] = [];
      const lookup = tool({
        name: 'lookup',
        description: 'Look a thing up.',
        parameters: z.object({ q: z.string(), region: z.string().default('eu') }),
        // Only calls outside the EU need a person.
        needsApproval: async (_context, input) => (seen.push(input), input.region !== 'eu'),
        execute: ({ q }, _context, details) => tally.body('lookup', 'default', details!.toolCall!.callId, async () => q),
      });
      const model = new ScriptedAgentsModel([callsTurn([['lookup', 'c0', { q: 'a' }]]), textTurn('done')]);
      const agent = new Agent({ name: 'approvals', instructions: '', model, tools: wrap ? withLanes([lookup], new ToolLanes({ concurrency: {} })) : [lookup] });
      const result = await new Runner().run(agent, 'go');
      return { seen, asked: result.interruptions.length, started: tally.started };
    };
    expect(await runWith(false)).to.deep.equal({ seen: [{ q: 'a', region: 'eu' }], asked: 0, started: ['c0'] });
    expect(await runWith(true)).to.deep.equal({ seen: [{ q: 'a' }], asked: 1, started: [] });
  });

  // A known limit (docs/openai-agents.md): the SDK links an agent.asTool() tool to its agent in a
  // WeakMap keyed by the tool object, and reads it to resume a run interrupted inside the nested
  // agent. The wrapped tool is a copy, not in that map: once approved and resumed, the call is asked
  // for again and its body never runs. Only Agent.asTool registers a tool, and withLanes does not
  // change the tool it was given. This spec fails once that changes.
  it('(a known limit) an agent.asTool() behind withLanes whose agent asks for approval interrupts again once approved and resumed, where the plain one completes', async () => {
    const runWith = async (wrap: boolean): Promise<{ askedAgain: number; started: string[]; output: unknown }> => {
      const tally = new BodyTally();
      const book = tool({ name: 'book', description: 'Book a thing.', parameters: query, needsApproval: true, execute: ({ q }, _context, details) => tally.body('book', 'default', details!.toolCall!.callId, async () => `booked ${q}`) });
      const inner = new Agent({ name: 'inner', instructions: '', model: new ScriptedAgentsModel([callsTurn([['book', 'b0', { q: 'x' }]]), textTurn('inner done')]), tools: [book] });
      const delegate = inner.asTool({ toolName: 'delegate', toolDescription: 'Hand the booking over.' });
      const model = new ScriptedAgentsModel([callsTurn([['delegate', 'd0', { input: 'go' }]]), textTurn('done')]);
      const outer = new Agent({ name: 'outer', instructions: '', model, tools: wrap ? withLanes([delegate], new ToolLanes({ concurrency: {} })) : [delegate] });
      const asked = await new Runner().run(outer, 'go');
      expect(asked.interruptions.map((item) => item.agent.name)).to.deep.equal(['inner']);
      const state = await RunState.fromString(outer, asked.state.toString());
      state.approve(state.getInterruptions()[0]!);
      const resumed = await new Runner().run(outer, state);
      return { askedAgain: resumed.interruptions.length, started: tally.started, output: resumed.finalOutput };
    };
    expect(await runWith(false)).to.deep.equal({ askedAgain: 0, started: ['b0'], output: 'done' });
    const wrapped = await runWith(true);
    expect({ askedAgain: wrapped.askedAgain, started: wrapped.started }).to.deep.equal({ askedAgain: 1, started: [] });
  });

  it("hands the tool's own invoke the SDK's details with every field kept as it was (symbols, a getter, a hidden field), the call's signal in place of the SDK's", async () => {
    const flag = Symbol('a flag of the SDK');
    const seen: Array<Record<PropertyKey, unknown>> = [];
    const raw = { type: 'function' as const, name: 'lookup', invoke: async (_runContext: unknown, _input: string, details?: Record<PropertyKey, unknown>) => (seen.push(details!), 'ok') };
    const [wrapped] = withLanes([raw], new ToolLanes({ concurrency: {} }), { requestId: 'run-1' });
    const sdkSignal = new AbortController().signal;
    const details: Record<PropertyKey, unknown> = { toolCall: { callId: 'c1' }, signal: sdkSignal, [flag]: true };
    Object.defineProperty(details, 'hidden', { value: 'kept', enumerable: false });
    Object.defineProperty(details, 'computed', { get: () => 'read through', enumerable: true, configurable: true });
    await wrapped!.invoke({}, '{}', details as never);
    const handed = seen[0]!;
    expect(handed.signal).to.be.instanceOf(AbortSignal).and.not.equal(sdkSignal);
    expect([handed.toolCall, handed[flag], handed.hidden, handed.computed]).to.deep.equal([{ callId: 'c1' }, true, 'kept', 'read through']);
    expect(Object.getOwnPropertyDescriptor(handed, 'hidden')).to.include({ enumerable: false });
    expect(typeof Object.getOwnPropertyDescriptor(handed, 'computed')!.get).to.equal('function');
    expect(Reflect.ownKeys(handed)).to.deep.equal(['signal', 'toolCall', 'hidden', 'computed', flag]);
  });
});
