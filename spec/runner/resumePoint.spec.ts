// A run going on from a resume point: its turn's batch as it was left (calls with an outcome
// never run again, their events in call order among the others'), then its next turns.
import { expect } from 'chai';
import { map } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import sinon from 'sinon';
import { Agent, AgentRunner, ConcurrencyConfig, ConfigError, ScriptedProvider, ToolRegistry, type Message, type RunEvent, type ToolCall } from '../../lib/index.js';
import type { Outcome } from '../../lib/batch/index.js';
import type { ResumePoint } from '../../lib/runner/resume/resumePoint.js';
import { summary } from './summary.js';

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });
const call = (id: string, name: string, args: Readonly<Record<string, unknown>> = {}): ToolCall => ({ id, name, arguments: JSON.stringify(args) });
const result = (index: number, callId: string, value: unknown, delta?: Record<string, unknown>): Outcome => ({ index, callId, tool: 'lookup', kind: 'result', dispatched: true, result: value, delta });

const mapSummary = map(summary);
const calls = [call('a', 'lookup', { q: 'a' }), call('b', 'lookup', { q: 'b' }), call('c', 'lookup', { q: 'c' })];
const asked: Message[] = [{ role: 'user', content: 'go' }, { role: 'assistant', content: '', toolCalls: calls }];

function point(extra: Partial<ResumePoint> = {}): ResumePoint {
  return { runId: 'run-1', turn: 1, messages: asked, state: {}, calls: [], ...extra };
}

function lookups() {
  const body = sinon.spy((args: unknown, ctx: { idempotencyKey: string; record(delta: Record<string, unknown>): void }) => {
    const { q } = args as { q: string };
    ctx.record({ [q]: true });
    return `found ${q}`;
  });
  return { body, tools: new ToolRegistry().register({ name: 'lookup' }, body) };
}

describe('resume point', () => {
  it('never runs a call with an outcome, runs the others, and tells every outcome in call order', async () => {
    const { body, tools } = lookups();
    const provider = new ScriptedProvider([{ text: 'done' }]);
    const runner = new AgentRunner({ provider, tools });
    const done = await runner.runFrom(agent, point({ calls: [{ outcome: result(0, 'a', 'old a') }, undefined, { outcome: { index: 2, callId: 'c', tool: 'lookup', kind: 'error', dispatched: false, error: { name: 'ToolRejectedError', message: 'no' } } }] }));
    expect(body.callCount).to.equal(1);
    expect(body.firstCall.args[0]).to.deep.equal({ q: 'b' });
    expect(done.events.map(summary)).to.deep.equal(['RESULT a', 'RESULT b', 'ERROR c ToolRejectedError', 'MODEL 2', 'COMPLETED done']);
    // The model reads the three outcomes, in call order, after its own calls.
    expect(provider.requests[0]!.messages.slice(2).map((m) => [m.toolCallId, m.content])).to.deep.equal([['a', 'old a'], ['b', 'found b'], ['c', 'ToolRejectedError: no']]);
    expect(done.status).to.equal('completed');
  });

  it('does not tell again a call told before, and merges its delta with the others\' in call order', async () => {
    const { tools } = lookups();
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools });
    const messages: Message[] = [...asked, { role: 'tool', toolCallId: 'a', content: 'old a' }];
    const done = await runner.runFrom(agent, point({ messages, state: { before: 1 }, calls: [{ outcome: result(0, 'a', 'old a', { a: 'told' }), told: true }] }));
    expect(done.events.map(summary)).to.deep.equal(['RESULT b', 'RESULT c', 'MODEL 2', 'COMPLETED done']);
    expect(done.state).to.deep.equal({ before: 1, a: 'told', b: true, c: true });
    expect(done.messages.filter((m) => m.role === 'tool').map((m) => m.toolCallId)).to.deep.equal(['a', 'b', 'c']);
  });

  it('keeps the run\'s id, so a call run now has the idempotency key it had', async () => {
    const keys: string[] = [];
    const tools = new ToolRegistry().register({ name: 'lookup' }, (_args, ctx) => (keys.push(ctx.idempotencyKey), 'ok'));
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools });
    await runner.runFrom(agent, point({ calls: [{ outcome: result(0, 'a', 'x') }, { outcome: result(1, 'b', 'y') }] }));
    expect(keys).to.deep.equal(['run-1:c']);
  });

  it('asks nobody again about a call that passed its gate, and asks about the others', async () => {
    const approve = sinon.spy(() => true);
    const onToolStart = sinon.spy();
    const tools = new ToolRegistry().register({ name: 'lookup', needsApproval: true }, () => 'ok');
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools, approve, hooks: { onToolStart } });
    const done = await runner.runFrom(agent, point({ calls: [undefined, { gated: true }] }));
    expect(done.events.map(summary)).to.deep.equal(['RESULT a', 'RESULT b', 'RESULT c', 'MODEL 2', 'COMPLETED done']);
    expect(approve.getCalls().map((c) => (c.args as unknown as [{ callId: string }])[0].callId)).to.deep.equal(['a', 'c']);
    expect(onToolStart.getCalls().map((c) => (c.args as unknown as [{ callId: string }])[0].callId)).to.deep.equal(['a', 'c']);
  });

  it('resolves with the transcript it was left with, then what came after: the same as a run never left', async () => {
    const whole = await new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: calls }, { text: 'done' }]), tools: lookups().tools }).run(agent, 'go');
    const left = whole.events.slice(0, 3); // RUN_STARTED, MODEL_RESPONSE, a's result
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: lookups().tools });
    const messages: Message[] = [...asked, { role: 'tool', toolCallId: 'a', content: 'found a' }];
    const resumed = await runner.runFrom(agent, point({ events: left, messages, calls: [{ outcome: result(0, 'a', 'found a', { a: true }), told: true }] }));
    const runId = (events: readonly RunEvent[]) => events.map((event) => (event.type === 'RUN_STARTED' ? { ...event, runId: '' } : event));
    expect(runId(resumed.events)).to.deep.equal(runId(whole.events));
    expect(resumed.messages).to.deep.equal(whole.messages);
    expect(resumed.state).to.deep.equal(whole.state);
  });

  it('runs what is left inside its lanes, the known calls holding no permit (virtual time)', () => {
    const testScheduler = new TestScheduler((actual, expected) => {
      expect(actual).to.deep.equal(expected);
    });
    testScheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const b = cold('----(y|)');
      const c = cold('----(z|)');
      const tools = new ToolRegistry().register({ name: 'lookup' }, (args: unknown) => ((args as { q: string }).q === 'b' ? b : c));
      const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools, concurrency: new ConcurrencyConfig({ maxConcurrentTools: 1 }), scheduler: testScheduler, loopStallMs: false });
      const events$ = runner.runFrom$(agent, point({ calls: [{ outcome: result(0, 'a', 'x') }] }));
      expectObservable(events$.pipe(mapSummary)).toBe('a---b---(cde|)', { a: 'RESULT a', b: 'RESULT b', c: 'RESULT c', d: 'MODEL 2', e: 'COMPLETED done' });
      expectSubscriptions(b.subscriptions).toBe('^---!');
      expectSubscriptions(c.subscriptions).toBe('----^---!');
    });
  });

  const bad: Array<[string, Partial<ResumePoint>, string]> = [
    ['a turn that is not a positive integer', { turn: 0 }, 'turn'],
    ['messages that do not end with the turn\'s calls', { messages: [{ role: 'user', content: 'go' }] }, 'messages'],
    ['more calls than the turn has', { calls: [{}, {}, {}, {}] }, 'calls'],
    ['an outcome of another call', { calls: [{ outcome: result(0, 'b', 'x') }] }, 'calls[0].outcome'],
    ['a call answered in messages but not told', { messages: [...asked, { role: 'tool', toolCallId: 'a', content: 'x' }], calls: [{ outcome: result(0, 'a', 'x') }] }, 'calls[0].told'],
  ];
  for (const [title, extra, field] of bad) {
    it(`refuses ${title}, naming ${field}`, () => {
      const runner = new AgentRunner({ provider: new ScriptedProvider([]), tools: lookups().tools });
      expect(() => runner.runFrom$(agent, point(extra))).to.throw(ConfigError).with.property('field', field);
    });
  }
});
