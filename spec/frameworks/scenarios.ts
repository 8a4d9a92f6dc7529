// The scenarios the framework entries' specs share (langchain.spec.ts, openaiAgents.spec.ts):
// each sets up the lanes and the counting, hands the framework's part of the spec what it needs
// to run its tools through withLanes, and checks what the bodies (and activity$) saw. What only
// one framework does (its model, its agent, what it tells of a stop) stays in its own spec.
import { expect } from 'chai';
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, ToolLanes, ToolRegistry } from '../../lib/index.js';
import type { WithLanesOptions } from '../../lib/openaiAgents.js';
import { BodyTally, settledOf, sleep, until } from './bodies.js';

/** A call a scripted model asks for: tool name, call id, arguments. */
export type ScriptedCall = readonly [tool: string, callId: string, args: { readonly q: string }];

/** What one of the concurrent requests runs: its lanes, tenant, index and the calls its model asks for in one turn. */
export interface TenantRequest {
  readonly toolLanes: ToolLanes;
  readonly tally: BodyTally;
  readonly tenant: string;
  readonly r: number;
  readonly calls: readonly ScriptedCall[];
}

/** What a request ended with: the framework's final answer, and what its model read back of each call. */
export interface TenantRequestEnd {
  readonly final: unknown;
  readonly seen: Readonly<Record<string, string>>;
}

/**
 * Six concurrent requests of tenants a and b in turn, each asking in one turn for three calls of
 * lookup and three of quote (a body takes 10 ms, counted under the tool and the request's tenant),
 * run by `run`; then: every request ended with 'done' after its model read each call's result,
 * and the bodies stayed inside perTool lookup 2 and perTenant 3, at the bound.
 */
export async function expectTenantsBounded(run: (request: TenantRequest) => Promise<TenantRequestEnd>): Promise<void> {
  const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 2 }, perTenant: 3 }) });
  const tally = new BodyTally();
  const ended = await Promise.all(
    ['a', 'b', 'a', 'b', 'a', 'b'].map((tenant, r) => {
      const calls = [0, 1, 2].flatMap((i): ScriptedCall[] => [
        ['lookup', `r${r}-l${i}`, { q: `l${i}` }],
        ['quote', `r${r}-q${i}`, { q: `q${i}` }],
      ]);
      return run({ toolLanes, tally, tenant, r, calls });
    }),
  );
  for (const [r, { final, seen }] of ended.entries()) {
    expect(final).to.equal('done');
    expect(seen).to.deep.equal({ [`r${r}-l0`]: 'lookup:l0', [`r${r}-q0`]: 'quote:q0', [`r${r}-l1`]: 'lookup:l1', [`r${r}-q1`]: 'quote:q1', [`r${r}-l2`]: 'lookup:l2', [`r${r}-q2`]: 'quote:q2' });
  }
  expect(tally.started).to.have.length(36);
  // At the bound, never past it: the framework alone runs all six calls of a turn at once, and a
  // wrapper that did nothing would run 36 at once.
  expect(tally.mostAtOnce('tool:lookup'), 'lookups at once, every request').to.equal(2);
  expect(tally.mostAtOnce('tenant:a'), "tenant a's calls at once").to.equal(3);
  expect(tally.mostAtOnce('tenant:b'), "tenant b's calls at once").to.equal(3);
}

/** What a run stopped mid-way is started with: its lanes (perTool lookup 1), its stop, the three lookups its model asks for, and withLanes' options. */
export interface StoppedRunSetup {
  readonly toolLanes: ToolLanes;
  readonly tally: BodyTally;
  readonly stop: AbortController;
  readonly calls: readonly ScriptedCall[];
  readonly options: WithLanesOptions<'lookup'>;
}

/** The framework's run, and how many times its model was asked. */
export interface StoppedRun {
  readonly run: Promise<unknown>;
  readonly modelAsked: () => number;
}

/**
 * A run stopped (its framework's signal and the request's, the same `stop`) once the first of its
 * three lookups started, each body running until its call is stopped: `who` (the framework) ends
 * the run as aborted and does not ask the model again; the queued calls never started and the
 * running one is classified by `idempotent` on activity$; every permit went back.
 */
export async function expectStoppedRun(idempotent: boolean, who: string, start: (setup: StoppedRunSetup) => StoppedRun): Promise<void> {
  const running = idempotent ? 'safe_to_call_again' : 'indeterminate';
  const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
  const { settled, subscription } = settledOf(toolLanes);
  const tally = new BodyTally();
  const stop = new AbortController();
  const calls: ScriptedCall[] = [
    ['lookup', 'c0', { q: 'a' }],
    ['lookup', 'c1', { q: 'b' }],
    ['lookup', 'c2', { q: 'c' }],
  ];
  const { run, modelAsked } = start({ toolLanes, tally, stop, calls, options: { signal: stop.signal, idempotent: { lookup: idempotent } } });
  await until(() => tally.started.length === 1, 'the first body started');
  stop.abort();
  const error = await run.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect((error as Error).name, `${who} ends the run as aborted`).to.equal('AbortError');
  await until(() => settled.length === 3 && tally.ended.length === 1, 'every call settled and the running body ended');
  subscription.unsubscribe();
  expect(tally.started, 'bodies that started').to.deep.equal(['c0']);
  expect(modelAsked(), 'the model was not asked again').to.equal(1);
  expect(Object.fromEntries(settled.map((s) => [s.callId, s.stopClass]))).to.deep.equal({ c0: running, c1: 'never_dispatched', c2: 'never_dispatched' });
  // Every permit went back: the tool's one lane takes the next call at once.
  expect(await toolLanes.run({ tool: 'lookup' }, () => 'free')).to.equal('free');
}

/** What the two calls of the stubborn-body scenario run on: the lanes (perTool lookup 1), and the lookup body, by call id and query. */
export interface StubbornSetup {
  readonly toolLanes: ToolLanes;
  body(callId: string, q: string): Promise<string>;
}

/** The framework's two requests: each starts when called and settles once its own checks passed. */
export interface StubbornRequests {
  /** Call f0 (query 'first'), under a request stopped by `signal` once its body started: checks what the framework made of the stop. */
  first(signal: AbortSignal): Promise<void>;
  /** Call n0 (query 'next'), started after the first was stopped: checks that it answered 'found next'. */
  next(): Promise<void>;
}

/**
 * A body that ignores its stop (the first call's, which returns only when let go) keeps its
 * permit until it returns: the next request's call, in the tool's one lane, waits for it.
 */
export async function expectStubbornBodyKeepsPermit(make: (setup: StubbornSetup) => StubbornRequests): Promise<void> {
  const toolLanes = new ToolLanes({ concurrency: new ConcurrencyConfig({ perTool: { lookup: 1 } }) });
  const tally = new BodyTally();
  let finish: () => void = () => undefined;
  const stubborn = new Promise<void>((resolve) => (finish = resolve));
  const { first, next } = make({
    toolLanes,
    body: (callId, q) => tally.body('lookup', 'default', callId, () => (q === 'first' ? stubborn.then(() => 'late') : Promise.resolve(`found ${q}`))),
  });
  const stop = new AbortController();
  const stopped = first(stop.signal);
  await until(() => tally.started.length === 1, 'the first body started');
  stop.abort();
  await stopped;
  const later = next();
  await sleep(50);
  expect(tally.started, 'the next call waits while the stopped body runs').to.deep.equal(['f0']);
  finish();
  await later;
  expect(tally.started).to.deep.equal(['f0', 'n0']);
  expect(tally.mostAtOnce('tool:lookup')).to.equal(1);
}

/** What the framework's side of a shared lane is given: the runner's lanes, and the tally its bodies count in. */
export interface SharedLaneSetup {
  readonly toolLanes: ToolLanes;
  readonly tally: BodyTally;
}

/**
 * An AgentRunner whose turn asks for four lookups (perTool lookup 2, each body 20 ms, tenant
 * 'runner'), and the framework's run made by `make` on a ToolLanes over the runner's lanes (its
 * four lookups counted in the same tally): run together, the runner's calls and the framework's
 * stay inside perTool. `alone` names the side that fills the lane by itself (its tenant key).
 */
export async function expectSharedLane(alone: { readonly key: string; readonly note: string }, make: (setup: SharedLaneSetup) => () => Promise<void>): Promise<void> {
  const tally = new BodyTally();
  const tools = new ToolRegistry().register({ name: 'lookup' }, (_args, ctx) => tally.body('lookup', 'runner', ctx.callId, () => sleep(20).then(() => 'runner')));
  const provider = new ScriptedProvider([{ toolCalls: [0, 1, 2, 3].map((i) => ({ id: `runner-${i}`, name: 'lookup', arguments: { q: `${i}` } })) }, { text: 'done' }]);
  const runner = new AgentRunner({ provider, tools, concurrency: new ConcurrencyConfig({ perTool: { lookup: 2 } }) });
  const toolLanes = new ToolLanes({ concurrency: runner.concurrency, lanes: runner.lanes });
  const theirs = make({ toolLanes, tally });
  const [ours] = await Promise.all([runner.run(new Agent({ name: 'runner', instructions: '', model: 'scripted' }), 'go'), theirs()]);
  expect(ours.status).to.equal('completed');
  expect(tally.started).to.have.length(8);
  expect(tally.mostAtOnce(alone.key), alone.note).to.equal(2);
  expect(tally.mostAtOnce('tool:lookup'), 'both together').to.equal(2);
}
