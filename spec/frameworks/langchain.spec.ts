// agent-lanes/langchain against the real LangChain packages: createReactAgent and ToolNode (from
// @langchain/langgraph/prebuilt) run tools made with @langchain/core's tool() and
// DynamicStructuredTool, wrapped by withLanes, with a scripted chat model (no network). Counted
// from the tool bodies: how many ran at once per tool and per tenant across several requests of
// two tenants; which bodies started when a run was stopped; a runner's calls and LangChain's
// sharing one lane. What LangGraph dropped is read back from toolLanes.activity$.
import { expect } from 'chai';
import { AIMessage, type ToolMessage } from '@langchain/core/messages';
import { DynamicStructuredTool, tool } from '@langchain/core/tools';
import { createReactAgent, ToolNode } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';
import { Agent, AgentRunner, ConcurrencyConfig, RateLimitedError, ScriptedProvider, ToolLanes, ToolRegistry } from '../../lib/index.js';
import { withLanes } from '../../lib/langchain.js';
import { BodyTally, settledOf, sleep, until, untilAborted } from './bodies.js';
import { callsTurn, resultsSeen, ScriptedChatModel, textTurn } from './chatModel.js';

const query = z.object({ q: z.string() });

describe('agent-lanes/langchain: withLanes around LangChain tools, as ToolNode and createReactAgent run them', function () {
  this.timeout(20_000);

  it('keeps several concurrent requests of two tenants inside perTool and perTenant, counted from the bodies', async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 2 }, perTenant: 3 }) });
    const tally = new BodyTally();
    const runs = ['a', 'b', 'a', 'b', 'a', 'b'].map(async (tenant, r) => {
      // The request's tools: each body knows its tool and its tenant by its closure.
      const made = ['lookup', 'quote'].map((name) =>
        tool(({ q }, config) => tally.body(name, tenant, config.toolCall?.id ?? '?', () => sleep(10).then(() => `${name}:${q}`)), { name, description: `${name} a thing`, schema: query }),
      );
      const calls = [0, 1, 2].flatMap((i) => [['lookup', `r${r}-l${i}`, { q: `l${i}` }] as const, ['quote', `r${r}-q${i}`, { q: `q${i}` }] as const]);
      const llm = new ScriptedChatModel([callsTurn(calls), textTurn('done')]);
      const agent = createReactAgent({ llm, tools: withLanes(made, toolLanes, { tenant }) });
      const out = await agent.invoke({ messages: [{ role: 'user', content: 'go' }] });
      return { last: out.messages.at(-1)?.content, seen: resultsSeen(llm.requests[1]!) };
    });
    const ended = await Promise.all(runs);
    for (const [r, { last, seen }] of ended.entries()) {
      expect(last).to.equal('done');
      expect(seen).to.deep.equal({ [`r${r}-l0`]: 'lookup:l0', [`r${r}-q0`]: 'quote:q0', [`r${r}-l1`]: 'lookup:l1', [`r${r}-q1`]: 'quote:q1', [`r${r}-l2`]: 'lookup:l2', [`r${r}-q2`]: 'quote:q2' });
    }
    expect(tally.started).to.have.length(36);
    // At the bound, never past it: ToolNode alone runs all six calls of a turn at once.
    expect(tally.mostAtOnce('tool:lookup'), 'lookups at once, every request').to.equal(2);
    expect(tally.mostAtOnce('tenant:a'), "tenant a's calls at once").to.equal(3);
    expect(tally.mostAtOnce('tenant:b'), "tenant b's calls at once").to.equal(3);
  });

  for (const idempotent of [false, true]) {
    const running = idempotent ? 'safe_to_call_again' : 'indeterminate';
    it(`a stopped run: its queued calls never start, its running call is ${running} on activity$, and LangGraph drops them (idempotent: ${idempotent})`, async () => {
      const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
      const { settled, subscription } = settledOf(toolLanes);
      const tally = new BodyTally();
      // It runs until its call is stopped.
      const lookup = tool((_input, config) => tally.body('lookup', 'default', config.toolCall!.id!, () => untilAborted(config.signal!)), { name: 'lookup', description: 'Look a thing up.', schema: query });
      const llm = new ScriptedChatModel([callsTurn([['lookup', 'c0', { q: 'a' }], ['lookup', 'c1', { q: 'b' }], ['lookup', 'c2', { q: 'c' }]]), textTurn('never')]);
      const stop = new AbortController();
      const agent = createReactAgent({ llm, tools: withLanes([lookup], toolLanes, { signal: stop.signal, idempotent: { lookup: idempotent } }) });
      const run = agent.invoke({ messages: [{ role: 'user', content: 'go' }] }, { signal: stop.signal });
      await until(() => tally.started.length === 1, 'the first body started');
      stop.abort();
      const error = await run.then(
        () => undefined,
        (reason: unknown) => reason,
      );
      expect((error as Error).name, 'LangGraph ends the run as aborted').to.equal('AbortError');
      await until(() => settled.length === 3 && tally.ended.length === 1, 'every call settled and the running body ended');
      subscription.unsubscribe();
      expect(tally.started, 'bodies that started').to.deep.equal(['c0']);
      expect(llm.requests, 'the model was not asked again').to.have.length(1);
      expect(Object.fromEntries(settled.map((s) => [s.callId, s.stopClass]))).to.deep.equal({ c0: running, c1: 'never_dispatched', c2: 'never_dispatched' });
      expect(await toolLanes.run({ tool: 'lookup' }, () => 'free')).to.equal('free');
    });
  }

  it('a DynamicStructuredTool whose function ignores its stop keeps its permit until it returns: the next call waits for it', async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
    const tally = new BodyTally();
    let finish: () => void = () => undefined;
    const stubborn = new Promise<void>((resolve) => (finish = resolve));
    const lookup = new DynamicStructuredTool({
      name: 'lookup',
      description: 'Look a thing up.',
      schema: query,
      func: ({ q }, _runManager, config) => tally.body('lookup', 'default', (config as { toolCall?: { id?: string } } | undefined)?.toolCall?.id ?? q, () => (q === 'first' ? stubborn.then(() => 'late') : Promise.resolve(`found ${q}`))),
    });
    const stop = new AbortController();
    const first = new ToolNode(withLanes([lookup], toolLanes, { signal: stop.signal }));
    const call = (id: string, q: string) => ({ messages: [new AIMessage({ content: '', tool_calls: [{ id, name: 'lookup', args: { q }, type: 'tool_call' as const }] })] });
    const stopped = first.invoke(call('f0', 'first'));
    await until(() => tally.started.length === 1, 'the first body started');
    stop.abort();
    const { messages: told } = (await stopped) as { messages: ToolMessage[] };
    expect(told[0]!.status).to.equal('error');
    expect(told[0]!.content).to.match(/^The call was stopped while it ran, and its side effect may have landed: check before asking for it again\. \(lookup was in flight when /);
    const later = new ToolNode(withLanes([lookup], toolLanes)).invoke(call('n0', 'next'));
    await sleep(50);
    expect(tally.started, 'the next call waits while the stopped body runs').to.deep.equal(['f0']);
    finish();
    const { messages } = (await later) as { messages: ToolMessage[] };
    expect(messages[0]!.content).to.equal('found next');
    expect(tally.started).to.deep.equal(['f0', 'n0']);
    expect(tally.mostAtOnce('tool:lookup')).to.equal(1);
  });

  it("a stop of the lanes' own answers ToolNode with an error ToolMessage in words; a body's own error stays ToolNode's", async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 2 } }) });
    const tally = new BodyTally();
    const lookup = tool(({ q }) => tally.body('lookup', 'default', q, async () => (q === 'bad' ? Promise.reject(new Error('no such thing')) : q)), { name: 'lookup', description: 'Look a thing up.', schema: query });
    const gone = new AbortController();
    gone.abort(new Error('the page was closed'));
    const ai = new AIMessage({ content: '', tool_calls: [{ id: 'c0', name: 'lookup', args: { q: 'a' }, type: 'tool_call' }] });
    const { messages: stopped } = (await new ToolNode(withLanes([lookup], toolLanes, { signal: gone.signal })).invoke({ messages: [ai] })) as { messages: ToolMessage[] };
    expect(tally.started).to.deep.equal([]);
    expect(stopped.map((m) => [m.tool_call_id, m.status, m.content])).to.deep.equal([
      ['c0', 'error', 'The call was stopped before it started: nothing happened, and asking for it again is safe. (never dispatched: the request was cancelled: the page was closed)'],
    ]);
    const bad = new AIMessage({ content: '', tool_calls: [{ id: 'c1', name: 'lookup', args: { q: 'bad' }, type: 'tool_call' }] });
    const { messages: failed } = (await new ToolNode(withLanes([lookup], toolLanes)).invoke({ messages: [bad] })) as { messages: ToolMessage[] };
    expect(failed.map((m) => [m.tool_call_id, m.status, m.content])).to.deep.equal([['c1', 'error', 'Error: no such thing\n Please fix your mistakes.']]);
  });

  it("a 429 a tool throws becomes a RateLimitedError and pauses the tool's rate lane", async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perToolRate: { lookup: { limit: 100, perSeconds: 1 } } }) });
    const pauses: Array<{ key: string; seconds: number }> = [];
    const subscription = toolLanes.activity$.subscribe((activity) => {
      if (activity.type === 'lane-paused') pauses.push({ key: activity.key, seconds: activity.seconds });
    });
    const tally = new BodyTally();
    const lookup = tool(
      ({ q }) => tally.body('lookup', 'default', q, async () => {
        if (q === 'first') throw Object.assign(new Error('slow down'), { status: 429, retryAfterSeconds: 0.3 });
        return q;
      }),
      { name: 'lookup', description: 'Look a thing up.', schema: query },
    );
    const [wrapped] = withLanes([lookup], toolLanes);
    const failure = await wrapped!.invoke({ q: 'first' }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).to.be.instanceOf(RateLimitedError);
    expect((failure as RateLimitedError).retryAfterSeconds).to.equal(0.3);
    expect(pauses.map((p) => p.seconds)).to.deep.equal([0.3]);
    expect(pauses[0]!.key).to.include('lookup');
    // The next call waits out the pause before its body starts.
    const asked = Date.now();
    expect(await wrapped!.invoke({ q: 'second' })).to.equal('second');
    expect(Date.now() - asked, 'ms the next call waited').to.be.at.least(200);
    subscription.unsubscribe();
  });

  it("shares one lane with an AgentRunner: the runner's calls and ToolNode's together stay inside perTool", async () => {
    const tally = new BodyTally();
    const tools = new ToolRegistry().register({ name: 'lookup' }, (_args, ctx) => tally.body('lookup', 'runner', ctx.callId, () => sleep(20).then(() => 'runner')));
    const provider = new ScriptedProvider([{ toolCalls: [0, 1, 2, 3].map((i) => ({ id: `runner-${i}`, name: 'lookup', arguments: { q: `${i}` } })) }, { text: 'done' }]);
    const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ perTool: { lookup: 2 } }) });
    const toolLanes = new ToolLanes({ concurrency: runner.concurrency, lanes: runner.lanes });
    const lookup = tool((_input, config) => tally.body('lookup', 'langchain', config.toolCall!.id!, () => sleep(20).then(() => 'langchain')), { name: 'lookup', description: 'Look a thing up.', schema: query });
    const llm = new ScriptedChatModel([callsTurn([0, 1, 2, 3].map((i) => ['lookup', `lc-${i}`, { q: `${i}` }] as const)), textTurn('done')]);
    const agent = createReactAgent({ llm, tools: withLanes([lookup], toolLanes) });
    const [ours, theirs] = await Promise.all([runner.run(new Agent({ name: 'runner', instructions: '', model: 'scripted' }), 'go'), agent.invoke({ messages: [{ role: 'user', content: 'go' }] })]);
    expect(ours.status).to.equal('completed');
    expect(theirs.messages.at(-1)?.content).to.equal('done');
    expect(tally.started).to.have.length(8);
    expect(tally.mostAtOnce('tenant:langchain'), 'ToolNode alone fills the lane').to.equal(2);
    expect(tally.mostAtOnce('tool:lookup'), 'both together').to.equal(2);
  });
});
