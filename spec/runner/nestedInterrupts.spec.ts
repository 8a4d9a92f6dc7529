// A nested run that waits for a person: its caller's call waits too, and so does the caller's
// run; the answers go back down through it on resume, the delegating call run again and its
// runAgent going on with the nested run where it waited.
import { expect } from 'chai';
import sinon from 'sinon';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type NestedRunResult, type RunResult, type Script } from '../../lib/index.js';
import { summary } from './summary.js';

const planner = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model', tools: ['delegate', 'lookup'] });
const booker = new Agent({ name: 'booker', instructions: 'book', model: 'test-model', tools: ['book', 'lookup'] });

function registry() {
  const book = sinon.spy(() => 'booked room 7');
  const lookup = sinon.spy(() => 'found');
  const seen: NestedRunResult[] = [];
  const delegate = sinon.spy(async (_args: unknown, ctx: { runAgent(agent: Agent, input: string): Promise<NestedRunResult> }) => {
    const result = await ctx.runAgent(booker, 'book room 7');
    seen.push(result);
    return result.status === 'completed' ? result.output : result.status;
  });
  const tools = new ToolRegistry()
    .register({ name: 'delegate' }, delegate as never)
    .register({ name: 'book', needsApproval: true }, book)
    .register({ name: 'lookup' }, lookup);
  return { tools, book, lookup, delegate, seen };
}

const first: Script = {
  planner: [{ toolCalls: [{ id: 'd1', name: 'delegate', arguments: {} }, { id: 'l1', name: 'lookup', arguments: {} }] }],
  booker: [{ toolCalls: [{ id: 'b1', name: 'book', arguments: { room: 7 } }, { id: 'l2', name: 'lookup', arguments: {} }] }],
};
const after: Script = { planner: [{ text: 'planned' }], booker: [{ text: 'booked it' }] };

describe('nested interrupts', () => {
  it('interrupts the caller\'s run when its nested run waits, naming the nested call under its caller\'s', async () => {
    const { tools, book, lookup, seen } = registry();
    const result = await new AgentRunner({ provider: new ScriptedProvider(first), tools }).run(planner, 'go');
    expect(result.status).to.equal('interrupted');
    const interrupted = result as Extract<RunResult, { status: 'interrupted' }>;
    expect(interrupted.pending).to.deep.equal([{ callId: 'd1/b1', tool: 'book', args: { room: 7 } }]);
    expect(seen.map((r) => r.status)).to.deep.equal(['interrupted']);
    expect(book.called).to.equal(false);
    expect(lookup.callCount).to.equal(2); // the planner's and the booker's
    expect(interrupted.snapshot.calls.map((c) => c.status)).to.deep.equal(['nested', 'settled']);
  });

  it('resumes through the caller: the delegating call runs again, its nested run goes on where it waited, and nothing else runs again', async () => {
    const before = registry();
    const interrupted = (await new AgentRunner({ provider: new ScriptedProvider(first), tools: before.tools }).run(planner, 'go')) as Extract<RunResult, { status: 'interrupted' }>;
    const now = registry();
    const resumed = await new AgentRunner({ provider: new ScriptedProvider(after), tools: now.tools }).resume(planner, interrupted.snapshot, { approvals: { 'd1/b1': true } });
    expect(now.book.callCount).to.equal(1);
    expect(now.lookup.called).to.equal(false);
    expect(now.delegate.callCount).to.equal(1);
    expect(now.seen.map((r) => [r.status, r.output])).to.deep.equal([['completed', 'booked it']]);
    expect(resumed.events.map(summary)).to.deep.equal(['RESULT d1', 'RESULT l1', 'MODEL 2', 'COMPLETED planned']);
    expect(resumed.events.find((e) => e.type === 'TOOL_RESULT' && e.callId === 'd1')).to.deep.include({ result: 'booked it' });
  });

  it('hands a refusal down to the nested run, whose model reads its reason', async () => {
    const { tools } = registry();
    const interrupted = (await new AgentRunner({ provider: new ScriptedProvider(first), tools }).run(planner, 'go')) as Extract<RunResult, { status: 'interrupted' }>;
    const provider = new ScriptedProvider(after);
    const now = registry();
    const resumed = await new AgentRunner({ provider, tools: now.tools }).resume(planner, interrupted.snapshot, { approvals: { 'd1/b1': { approved: false, reason: 'too dear' } } });
    expect(now.book.called).to.equal(false);
    expect(resumed.status).to.equal('completed');
    const bookerRequest = provider.requests.find((r) => r.agent === 'booker')!;
    expect(bookerRequest.messages.find((m) => m.toolCallId === 'b1')!.content).to.equal('ToolRejectedError: approval rejected the call: too dear');
  });
});
