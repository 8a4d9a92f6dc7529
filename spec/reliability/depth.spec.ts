// Values from outside nested past 1000 levels: a caller's conversation, state and snapshot, a
// journal's entries, a model's arguments (in a reply or a stream). Each gets a named error
// saying where, as a result does (lib/json.ts); never a RangeError, and `run` still resolves.
import { expect } from 'chai';
import { isLeft } from 'fp-ts/lib/Either.js';
import { from } from 'rxjs';
import { Agent, AgentRunner, ConfigError, InMemoryRunJournal, JournalError, ScriptedProvider, ToolRegistry, type Message, type ModelStreamPart, type RunResult, type ScriptStep } from '../../lib/index.js';
import { decodeConversation } from '../../lib/runner/index.js';

const agent = new Agent({ name: 'a', instructions: '', model: 'm' });
// `levels` objects, each inside the next, as JSON text and as an object (built without recursion).
const deepText = (levels: number): string => '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);
const deepObject = (levels: number): Record<string, unknown> => {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value as Record<string, unknown>;
};
const place = (root: string): string => `${root}.a.a.a.a.….a.a`;
const tools = () => new ToolRegistry().register({ name: 't' }, () => 'ok');
const runner = (steps: ScriptStep[], extra: { journal?: InMemoryRunJournal } = {}) => new AgentRunner({ provider: new ScriptedProvider(steps), tools: tools(), ...extra });
const outcomes = (result: RunResult) =>
  result.events.flatMap((e) => (e.type === 'TOOL_ERROR' ? [`${e.callId} ${e.error.name}: ${e.error.message}`] : e.type === 'TOOL_RESULT' || e.type === 'TOOL_INDETERMINATE' ? [`${e.callId} ${e.type}`] : []));
async function refusal(make: () => unknown): Promise<unknown> {
  try {
    return await make();
  } catch (error) {
    return error;
  }
}

describe('values nested too deep', () => {
  const tooDeep = (root: string) => `bad arguments for t: arguments nested more than 1000 levels deep at ${place(root)}`;

  for (const form of ['JSON text', 'an object'] as const) {
    it(`fails a call whose arguments (${form}) nest past 1000 levels alone, naming where; 1000 levels run`, async () => {
      const args = (levels: number) => (form === 'JSON text' ? deepText(levels) : deepObject(levels));
      const result = await runner([{ toolCalls: [{ id: 'c1', name: 't', arguments: args(5000) }, { id: 'c2', name: 't', arguments: args(1000) }, { id: 'c3', name: 't', arguments: args(1001) }] }, { text: 'done' }]).run(agent, 'go');
      expect(result.status).to.equal('completed');
      expect(outcomes(result)).to.deep.equal([`c1 ToolArgumentsError: ${tooDeep('args')}`, 'c2 TOOL_RESULT', `c3 ToolArgumentsError: ${tooDeep('args')}`]);
    });
  }

  it('fails a streamed call whose arguments nest past 1000 levels alone', async () => {
    const parts: ModelStreamPart[] = [
      { type: 'tool-call', id: 'c1', name: 't', arguments: deepText(5000) },
      { type: 'tool-call', id: 'c2', name: 't', arguments: '{}' },
    ];
    const result = await runner([() => from(parts), { text: 'done' }]).run(agent, 'go');
    expect(result.status).to.equal('completed');
    expect(outcomes(result)).to.deep.equal([`c1 ToolArgumentsError: ${tooDeep('args')}`, 'c2 TOOL_RESULT']);
  });

  for (const form of ['JSON text', 'an object'] as const) {
    it(`refuses a conversation whose call arguments (${form}) nest past 1000 levels: run$ throws, run rejects, decodeConversation refuses, naming the place`, async () => {
      const input: Message[] = [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: '', toolCalls: [{ id: 'x', name: 't', arguments: form === 'JSON text' ? deepText(5000) : deepObject(5000) }] },
        { role: 'tool', toolCallId: 'x', content: 'ok' },
        { role: 'user', content: 'again' },
      ];
      const field = place('input[1].toolCalls[0].arguments');
      const decoded = decodeConversation(input);
      expect(isLeft(decoded) && decoded.left).to.be.instanceOf(ConfigError).and.to.include({ field, message: `${field} is nested more than 1000 levels deep` });
      for (const error of [await refusal(() => runner([{ text: 'done' }]).run$(agent, input)), await refusal(() => runner([{ text: 'done' }]).run(agent, input))]) {
        expect(error).to.be.instanceOf(ConfigError).and.to.include({ field, message: `${field} is nested more than 1000 levels deep` });
      }
    });
  }

  it('refuses a starting state nested past 1000 levels, naming the place', async () => {
    for (const error of [await refusal(() => runner([{ text: 'done' }]).run$(agent, 'go', { state: deepObject(5000) })), await refusal(() => runner([{ text: 'done' }]).run(agent, 'go', { state: deepObject(5000) }))]) {
      expect(error).to.be.instanceOf(ConfigError).and.to.include({ field: place('state'), message: `${place('state')} is nested more than 1000 levels deep` });
    }
    expect((await runner([{ text: 'done' }]).run(agent, 'go', { state: deepObject(999) })).status).to.equal('completed');
  });

  it('refuses a snapshot nested past its bound when resumed, naming the place', async () => {
    const registry = new ToolRegistry().register({ name: 'book', needsApproval: true }, () => 'booked');
    const first = await new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'b', name: 'book', arguments: deepText(999) }] }, { text: 'done' }]), tools: registry }).run(agent, 'go', { state: deepObject(999) });
    if (first.status !== 'interrupted') throw new Error(`expected an interrupted run, got ${first.status}`);
    const resumer = () => new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: registry });
    // What the library writes resumes: its own levels around a state and arguments as deep as allowed.
    expect((await resumer().resume(agent, JSON.parse(JSON.stringify(first.snapshot)), { approvals: { b: true } })).status).to.equal('completed');
    const tampered = { ...first.snapshot, state: deepObject(5000) };
    const error = await refusal(() => resumer().resume(agent, tampered, { approvals: { b: true } }));
    expect(error).to.be.instanceOf(ConfigError).and.to.include({ field: 'snapshot.state.a.a.a.….a.a', message: 'snapshot.state.a.a.a.….a.a is nested more than 2000 levels deep' });
  });

  it('refuses to recover a run from a journal entry nested past its bound: JournalError naming the entry', async () => {
    const journal = new InMemoryRunJournal();
    const registry = new ToolRegistry().register({ name: 'hang' }, (_args, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', resolve)));
    const run = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'h', name: 'hang', arguments: '{}' }] }]), tools: registry, journal }).run$(agent, 'go');
    let runId = '';
    const subscription = run.subscribe((event) => {
      if (event.type === 'RUN_STARTED') runId = event.runId;
    });
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    await journal.flushed();
    journal.simulateCrash();
    const second = journal.reopen();
    const read = second.read.bind(second);
    second.read = async (id: string) => {
      const entries = await read(id);
      return [{ ...entries[0]!, state: deepObject(5000) } as (typeof entries)[number], ...entries.slice(1)];
    };
    const error = await refusal(() => new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: registry, journal: second }).recover(agent, runId));
    subscription.unsubscribe();
    expect(error).to.be.instanceOf(JournalError);
    expect((error as Error).message).to.match(/^run .* cannot be recovered: entries\.0\.state\.a\.a\.a\.….a\.a \(a started entry\) is nested more than 2000 levels deep$/);
  });
});
