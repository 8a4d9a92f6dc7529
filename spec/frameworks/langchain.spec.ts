// agent-lanes/langchain against the real LangChain packages: createReactAgent and ToolNode (from
// @langchain/langgraph/prebuilt) run tools made with @langchain/core's tool() and
// DynamicStructuredTool, wrapped by withLanes, with a scripted chat model (no network). Counted
// from the tool bodies: how many ran at once per tool and per tenant across several requests of
// two tenants; which bodies started when a run was stopped; a runner's calls and LangChain's
// sharing one lane. What LangGraph dropped is read back from toolLanes.activity$.
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import { AIMessage, type ToolMessage } from '@langchain/core/messages';
import { DynamicStructuredTool, tool } from '@langchain/core/tools';
import { createReactAgent, ToolNode } from '@langchain/langgraph/prebuilt';
import sinon from 'sinon';
import { z } from 'zod';
import { ConcurrencyConfig, RateLimitedError, ToolLanes } from '../../lib/index.js';
import { laneContextOf, withLanes } from '../../lib/langchain.js';
import { BodyTally, settledOf, sleep, until, untilAborted } from './bodies.js';
import { callsTurn, resultsSeen, ScriptedChatModel, textTurn } from './chatModel.js';
import { expectSharedLane, expectStoppedRun, expectStubbornBodyKeepsPermit, expectTenantsBounded } from './scenarios.js';

const query = z.object({ q: z.string() });

describe('agent-lanes/langchain: withLanes around LangChain tools, as ToolNode and createReactAgent run them', function () {
  this.timeout(20_000);

  it('keeps several concurrent requests of two tenants inside perTool and perTenant, counted from the bodies', () =>
    expectTenantsBounded(async ({ toolLanes, tally, tenant, calls }) => {
      // The request's tools: each body knows its tool and its tenant by its closure.
      const made = ['lookup', 'quote'].map((name) =>
        tool(({ q }, config) => tally.body(name, tenant, config.toolCall?.id ?? '?', () => sleep(10).then(() => `${name}:${q}`)), { name, description: `${name} a thing`, schema: query }),
      );
      const llm = new ScriptedChatModel([callsTurn(calls), textTurn('done')]);
      const agent = createReactAgent({ llm, tools: withLanes(made, toolLanes, { tenant }) });
      const out = await agent.invoke({ messages: [{ role: 'user', content: 'go' }] });
      return { final: out.messages.at(-1)?.content, seen: resultsSeen(llm.requests[1]!) };
    }));

  for (const idempotent of [false, true]) {
    const running = idempotent ? 'safe_to_call_again' : 'indeterminate';
    it(`a stopped run: its queued calls never start, its running call is ${running} on activity$, and LangGraph drops them (idempotent: ${idempotent})`, () =>
      expectStoppedRun(idempotent, 'LangGraph', ({ toolLanes, tally, stop, calls, options }) => {
        // It runs until its call is stopped.
        const lookup = tool((_input, config) => tally.body('lookup', 'default', config.toolCall!.id!, () => untilAborted(config.signal!)), { name: 'lookup', description: 'Look a thing up.', schema: query });
        const llm = new ScriptedChatModel([callsTurn(calls), textTurn('never')]);
        const agent = createReactAgent({ llm, tools: withLanes([lookup], toolLanes, options) });
        return { run: agent.invoke({ messages: [{ role: 'user', content: 'go' }] }, { signal: stop.signal }), modelAsked: () => llm.requests.length };
      }));
  }

  it('a DynamicStructuredTool whose function ignores its stop keeps its permit until it returns: the next call waits for it', () =>
    expectStubbornBodyKeepsPermit(({ toolLanes, body }) => {
      const lookup = new DynamicStructuredTool({
        name: 'lookup',
        description: 'Look a thing up.',
        schema: query,
        func: ({ q }, _runManager, config) => body((config as { toolCall?: { id?: string } } | undefined)?.toolCall?.id ?? q, q),
      });
      const call = (id: string, q: string) => ({ messages: [new AIMessage({ content: '', tool_calls: [{ id, name: 'lookup', args: { q }, type: 'tool_call' as const }] })] });
      return {
        first: async (signal) => {
          const { messages: told } = (await new ToolNode(withLanes([lookup], toolLanes, { signal })).invoke(call('f0', 'first'))) as { messages: ToolMessage[] };
          expect(told[0]!.status).to.equal('error');
          expect(told[0]!.content).to.match(/^The call was stopped while it ran, and its side effect may have landed: check before asking for it again\. \(lookup was in flight when /);
        },
        next: async () => {
          const { messages } = (await new ToolNode(withLanes([lookup], toolLanes)).invoke(call('n0', 'next'))) as { messages: ToolMessage[] };
          expect(messages[0]!.content).to.equal('found next');
        },
      };
    }));

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

  it("a config's timeout counts from invoke: a call still queued when it fires never starts, and the lanes classify it", async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
    const { settled, subscription } = settledOf(toolLanes);
    const tally = new BodyTally();
    let letGo: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (letGo = resolve));
    const lookup = tool(({ q }) => tally.body('lookup', 'default', q, () => (q === 'first' ? held.then(() => q) : Promise.resolve(q))), { name: 'lookup', description: 'Look a thing up.', schema: query });
    const [wrapped] = withLanes([lookup], toolLanes);
    const first = wrapped!.invoke({ q: 'first' });
    await until(() => tally.started.length === 1, 'the first body started');
    // LangChain's own tool with { timeout: 100 } rejects at 100 ms; queued behind the first, so must the wrapped one.
    const asked = Date.now();
    const failure = await Promise.race([wrapped!.invoke({ q: 'second' }, { timeout: 100 }).then(() => 'answered', (error: unknown) => error), sleep(600).then(() => 'still waiting')]);
    expect(failure, 'the timed-out call').to.be.instanceOf(Error);
    expect(Date.now() - asked, 'ms until the timed-out call ended').to.be.below(400);
    letGo();
    expect(await first).to.equal('first');
    await until(() => settled.length === 2, 'both calls settled');
    subscription.unsubscribe();
    expect(tally.started, 'bodies that started').to.deep.equal(['first']);
    expect(settled.find((s) => s.stopClass !== undefined)?.stopClass).to.equal('never_dispatched');
  });

  it("a function invoked with a config's timeout finds its lane context, and is stopped by that timeout", async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
    const keys: Array<string | undefined> = [];
    const lookup = tool((_input, config) => (keys.push(laneContextOf(config)?.idempotencyKey), untilAborted(config.signal!)), { name: 'lookup', description: 'Look a thing up.', schema: query });
    const [wrapped] = withLanes([lookup], toolLanes, { requestId: 'run-7' });
    const call = { id: 'c1', name: 'lookup', args: { q: 'a' }, type: 'tool_call' as const };
    const asked = Date.now();
    const failure = await wrapped!.invoke(call, { timeout: 100 }).then(() => undefined, (error: unknown) => error);
    expect(failure).to.be.instanceOf(Error);
    expect(Date.now() - asked, 'ms until the timed-out call ended').to.be.below(400);
    expect(keys).to.deep.equal(['run-7:c1']);
    // Its permit went back: the tool's one lane takes the next call at once.
    expect(await toolLanes.run({ tool: 'lookup' }, () => 'free')).to.equal('free');
  });

  it("clears a config timeout's timer and leaves the config's signal once its call has settled", async () => {
    const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
    const lookup = tool(async ({ q }) => `found ${q}`, { name: 'lookup', description: 'Look a thing up.', schema: query });
    const [wrapped] = withLanes([lookup], toolLanes);
    const signal = new AbortController().signal;
    // A first call without a timeout: what LangChain arms once for itself is armed before the count.
    await wrapped!.invoke({ q: 'warm' });
    const clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let left: number;
    try {
      expect(await wrapped!.invoke({ q: 'a' }, { signal, timeout: 60_000 })).to.equal('found a');
      left = clock.countTimers();
    } finally {
      clock.restore();
    }
    expect(left, 'timers still armed').to.equal(0);
    expect(getEventListeners(signal, 'abort'), "listeners left on the config's signal").to.have.length(0);
  });

  it("shares one lane with an AgentRunner: the runner's calls and ToolNode's together stay inside perTool", () =>
    expectSharedLane({ key: 'tenant:langchain', note: 'ToolNode alone fills the lane' }, ({ toolLanes, tally }) => {
      const lookup = tool((_input, config) => tally.body('lookup', 'langchain', config.toolCall!.id!, () => sleep(20).then(() => 'langchain')), { name: 'lookup', description: 'Look a thing up.', schema: query });
      const llm = new ScriptedChatModel([callsTurn([0, 1, 2, 3].map((i) => ['lookup', `lc-${i}`, { q: `${i}` }] as const)), textTurn('done')]);
      const agent = createReactAgent({ llm, tools: withLanes([lookup], toolLanes) });
      return async () => {
        const theirs = await agent.invoke({ messages: [{ role: 'user', content: 'go' }] });
        expect(theirs.messages.at(-1)?.content).to.equal('done');
      };
    }));
});
