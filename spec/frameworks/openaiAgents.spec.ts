// agent-lanes/openai-agents against the real OpenAI Agents SDK: its Runner runs agents whose
// model is scripted (no network), their function tools wrapped by withLanes. Counted from the
// tool bodies: how many ran at once per tool and per tenant across several requests of two
// tenants; which bodies started when a run was stopped; and a runner's calls and the SDK's
// sharing one lane. What the SDK dropped is read back from toolLanes.activity$.
import { expect } from 'chai';
import { Agent, Runner, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { Agent as LanesAgent, AgentRunner, ConcurrencyConfig, ScriptedProvider, ToolLanes, ToolRegistry } from '../../lib/index.js';
import { withLanes } from '../../lib/openaiAgents.js';
import { callsTurn, resultsSeen, ScriptedAgentsModel, textTurn } from './agentsModel.js';
import { BodyTally, settledOf, sleep, until, untilAborted } from './bodies.js';

// The SDK would send its traces to OpenAI; these runs have nowhere to send them.
setTracingDisabled(true);

const query = z.object({ q: z.string() });

describe('agent-lanes/openai-agents: withLanes around the Agents SDK\'s function tools', function () {
  this.timeout(20_000);

  it('keeps several concurrent requests of two tenants inside perTool and perTenant, counted from the bodies', async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 2 }, perTenant: 3 }) });
    const tally = new BodyTally();
    const runs = ['a', 'b', 'a', 'b', 'a', 'b'].map(async (tenant, r) => {
      // The request's tools: each body knows its tool and its tenant by its closure.
      const made = ['lookup', 'quote'].map((name) =>
        tool({
          name,
          description: `${name} a thing`,
          parameters: query,
          execute: ({ q }, _context, details) => tally.body(name, tenant, details?.toolCall?.callId ?? '?', () => sleep(10).then(() => `${name}:${q}`)),
        }),
      );
      const calls = [0, 1, 2].flatMap((i) => [['lookup', `r${r}-l${i}`, { q: `l${i}` }] as const, ['quote', `r${r}-q${i}`, { q: `q${i}` }] as const]);
      const model = new ScriptedAgentsModel([callsTurn(calls), textTurn('done')]);
      const agent = new Agent({ name: `r${r}`, instructions: 'Look things up.', model, tools: withLanes(made, toolLanes, { tenant }) });
      const result = await new Runner().run(agent, 'go');
      return { result, seen: resultsSeen(model.requests[1]!.input) };
    });
    const ended = await Promise.all(runs);
    for (const [r, { result, seen }] of ended.entries()) {
      expect(result.finalOutput).to.equal('done');
      expect(seen).to.deep.equal({ [`r${r}-l0`]: 'lookup:l0', [`r${r}-q0`]: 'quote:q0', [`r${r}-l1`]: 'lookup:l1', [`r${r}-q1`]: 'quote:q1', [`r${r}-l2`]: 'lookup:l2', [`r${r}-q2`]: 'quote:q2' });
    }
    expect(tally.started).to.have.length(36);
    // At the bound, never past it: a wrapper that did nothing would run 36 at once.
    expect(tally.mostAtOnce('tool:lookup'), 'lookups at once, every request').to.equal(2);
    expect(tally.mostAtOnce('tenant:a'), "tenant a's calls at once").to.equal(3);
    expect(tally.mostAtOnce('tenant:b'), "tenant b's calls at once").to.equal(3);
  });

  for (const idempotent of [false, true]) {
    const running = idempotent ? 'safe_to_call_again' : 'indeterminate';
    it(`a stopped run: its queued calls never start, its running call is ${running} on activity$, and the SDK drops them (idempotent: ${idempotent})`, async () => {
      const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
      const { settled, subscription } = settledOf(toolLanes);
      const tally = new BodyTally();
      const lookup = tool({
        name: 'lookup',
        description: 'Look a thing up.',
        parameters: query,
        // It runs until its call is stopped.
        execute: (_input, _context, details) => tally.body('lookup', 'default', details!.toolCall!.callId, () => untilAborted(details!.signal!)),
      });
      const model = new ScriptedAgentsModel([callsTurn([['lookup', 'c0', { q: 'a' }], ['lookup', 'c1', { q: 'b' }], ['lookup', 'c2', { q: 'c' }]]), textTurn('never')]);
      const stop = new AbortController();
      const agent = new Agent({ name: 'stopped', instructions: '', model, tools: withLanes([lookup], toolLanes, { signal: stop.signal, idempotent: { lookup: idempotent } }) });
      const run = new Runner().run(agent, 'go', { signal: stop.signal });
      await until(() => tally.started.length === 1, 'the first body started');
      stop.abort();
      const error = await run.then(
        () => undefined,
        (reason: unknown) => reason,
      );
      expect((error as Error).name, 'the SDK ends the run as aborted').to.equal('AbortError');
      await until(() => settled.length === 3 && tally.ended.length === 1, 'every call settled and the running body ended');
      subscription.unsubscribe();
      expect(tally.started, 'bodies that started').to.deep.equal(['c0']);
      expect(model.requests, 'the model was not asked again').to.have.length(1);
      expect(Object.fromEntries(settled.map((s) => [s.callId, s.stopClass]))).to.deep.equal({ c0: running, c1: 'never_dispatched', c2: 'never_dispatched' });
      // Every permit went back: the tool's one lane takes the next call at once.
      expect(await toolLanes.run({ tool: 'lookup' }, () => 'free')).to.equal('free');
    });
  }

  it("the SDK's own timeoutMs: a call still queued when it fires never starts, the running one is classified, and the model reads the SDK's timeout message for both", async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
    const { settled, subscription } = settledOf(toolLanes);
    const tally = new BodyTally();
    const lookup = tool({
      name: 'lookup',
      description: 'Look a thing up.',
      parameters: query,
      timeoutMs: 100,
      // It runs 300 ms whatever its signal says.
      execute: ({ q }, _context, details) => tally.body('lookup', 'default', details!.toolCall!.callId, () => sleep(300).then(() => q)),
    });
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

  it('a body that ignores its stop keeps its permit until it ends: the next request\'s call waits for it', async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
    const tally = new BodyTally();
    let finish: () => void = () => undefined;
    const stubborn = new Promise<void>((resolve) => (finish = resolve));
    const lookup = tool({
      name: 'lookup',
      description: 'Look a thing up.',
      parameters: query,
      execute: ({ q }, _context, details) => tally.body('lookup', 'default', details!.toolCall!.callId, () => (q === 'first' ? stubborn.then(() => 'late') : Promise.resolve(`found ${q}`))),
    });
    const stop = new AbortController();
    const first = new Agent({ name: 'first', instructions: '', model: new ScriptedAgentsModel([callsTurn([['lookup', 'f0', { q: 'first' }]]), textTurn('never')]), tools: withLanes([lookup], toolLanes, { signal: stop.signal }) });
    const stopped = new Runner().run(first, 'go', { signal: stop.signal }).catch((error: unknown) => error);
    await until(() => tally.started.length === 1, 'the first body started');
    stop.abort();
    expect(((await stopped) as Error).name).to.equal('AbortError');
    const next = new Agent({ name: 'next', instructions: '', model: new ScriptedAgentsModel([callsTurn([['lookup', 'n0', { q: 'next' }]]), textTurn('done')]), tools: withLanes([lookup], toolLanes) });
    const later = new Runner().run(next, 'go');
    await sleep(50);
    expect(tally.started, 'the next call waits while the stopped body runs').to.deep.equal(['f0']);
    finish();
    expect((await later).finalOutput).to.equal('done');
    expect(tally.started).to.deep.equal(['f0', 'n0']);
    expect(tally.mostAtOnce('tool:lookup')).to.equal(1);
  });

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

  it("shares one lane with an AgentRunner: the runner's calls and the SDK's together stay inside perTool", async () => {
    const tally = new BodyTally();
    const tools = new ToolRegistry().register({ name: 'lookup' }, (_args, ctx) => tally.body('lookup', 'runner', ctx.callId, () => sleep(20).then(() => 'runner')));
    const provider = new ScriptedProvider([{ toolCalls: [0, 1, 2, 3].map((i) => ({ id: `runner-${i}`, name: 'lookup', arguments: { q: `${i}` } })) }, { text: 'done' }]);
    const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ perTool: { lookup: 2 } }) });
    const toolLanes = new ToolLanes({ concurrency: runner.concurrency, lanes: runner.lanes });
    const lookup = tool({
      name: 'lookup',
      description: 'Look a thing up.',
      parameters: query,
      execute: (_input, _context, details) => tally.body('lookup', 'sdk', details!.toolCall!.callId, () => sleep(20).then(() => 'sdk')),
    });
    const model = new ScriptedAgentsModel([callsTurn([0, 1, 2, 3].map((i) => ['lookup', `sdk-${i}`, { q: `${i}` }] as const)), textTurn('done')]);
    const agent = new Agent({ name: 'sdk', instructions: '', model, tools: withLanes([lookup], toolLanes) });
    const [ours, theirs] = await Promise.all([runner.run(new LanesAgent({ name: 'runner', instructions: '', model: 'scripted' }), 'go'), new Runner().run(agent, 'go')]);
    expect(ours.status).to.equal('completed');
    expect(theirs.finalOutput).to.equal('done');
    expect(tally.started).to.have.length(8);
    expect(tally.mostAtOnce('tenant:runner'), 'the runner alone fills the lane').to.equal(2);
    expect(tally.mostAtOnce('tool:lookup'), 'both together').to.equal(2);
  });
});
