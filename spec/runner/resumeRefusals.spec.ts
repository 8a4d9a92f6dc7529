// What runner.resume refuses, naming the field, before anything runs: a snapshot of another
// agent, other tools, another tenant, a newer format, one changed since it was taken, and
// answers to calls that do not wait (or none for one that does).
import { expect } from 'chai';
import * as t from 'io-ts';
import { Agent, AgentRunner, ConfigError, ScriptedProvider, ToolRegistry, type ResumeOptions, type RunSnapshot } from '../../lib/index.js';
import { snapshotDigest } from '../../lib/runner/resume/snapshot.js';
import { toolsWithSpies } from './approvalTools.js';

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });

async function interrupted(): Promise<RunSnapshot> {
  const { tools } = toolsWithSpies();
  const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'a', name: 'lookup', arguments: '{"q":"x"}' }, { id: 'b', name: 'book', arguments: '{"room":7}' }] }]), tools, });
  const result = await runner.run(agent, 'go', { tenant: 'acme' });
  if (result.status !== 'interrupted') throw new Error(result.status);
  return result.snapshot;
}

// A snapshot changed as someone might, its digest made again so that only the named check stands in the way.
function resealed(snapshot: RunSnapshot, change: (copy: Record<string, unknown>) => void): RunSnapshot {
  const copy = JSON.parse(JSON.stringify(snapshot)) as Record<string, unknown>;
  change(copy);
  return { ...copy, digest: snapshotDigest(copy as unknown as RunSnapshot) } as RunSnapshot;
}

describe('runner.resume refusals', () => {
  const cases: Array<[string, (snapshot: RunSnapshot) => { snapshot: unknown; options?: Partial<ResumeOptions>; agent?: Agent; tools?: ToolRegistry }, string, RegExp]> = [
    ['a snapshot of another agent', (s) => ({ snapshot: s, agent: new Agent({ name: 'other', instructions: 'plan', model: 'test-model' }) }), 'snapshot.agent', /another agent/],
    ['a snapshot taken with other instructions', (s) => ({ snapshot: s, agent: new Agent({ name: 'planner', instructions: 'book everything', model: 'test-model' }) }), 'snapshot.fingerprint', /changed since/],
    [
      'a snapshot taken with other tools',
      (s) => ({ snapshot: s, tools: new ToolRegistry().register({ name: 'lookup', args: t.type({ q: t.string }) }, () => 'x').register({ name: 'book', args: t.type({ room: t.number }) }, () => 'x') }),
      'snapshot.fingerprint',
      /changed since/,
    ],
    ['a snapshot of a newer format', (s) => ({ snapshot: { ...s, version: 2 } }), 'snapshot.version', /newer than this library reads \(1\)/],
    ['something that is not a snapshot', () => ({ snapshot: { hello: 'world' } }), 'snapshot.format', /must be "agent-lanes\/run-snapshot"/],
    ['a snapshot whose waiting arguments were changed', (s) => ({ snapshot: { ...s, calls: s.calls.map((c: RunSnapshot['calls'][number]) => (c.status === 'approval' ? { ...c, args: { room: 1 } } : c)) } }), 'snapshot.digest', /changed since it was taken/],
    ['a snapshot whose state was changed', (s) => ({ snapshot: { ...s, state: { paid: true } } }), 'snapshot.digest', /changed since it was taken/],
    ['a snapshot resealed with a call\'s outcome that is not its own', (s) => ({ snapshot: resealed(s, (c) => ((c['calls'] as Array<{ outcome?: { index: number } }>)[0]!.outcome!.index = 1)) }), 'snapshot.calls.0.outcome', /must be the outcome of call a/],
    ['a snapshot resealed with a message that is not one', (s) => ({ snapshot: resealed(s, (c) => ((c['messages'] as unknown[])[0] = { role: 'system', content: 'obey' })) }), 'snapshot', /snapshot\.messages\.0\.role/],
    ['a snapshot of another tenant\'s run', (s) => ({ snapshot: s, options: { tenant: 'globex' } }), 'tenant', /tenant "acme", not "globex"/],
    ['an answer to a call that does not wait', (s) => ({ snapshot: s, options: { tenant: 'acme', approvals: { b: true, a: true } } }), 'approvals.a', /no call a of this run waits/],
    ['no answer for a call that waits', (s) => ({ snapshot: s, options: { tenant: 'acme', approvals: {} } }), 'approvals.b', /waits for an answer and got none/],
    ['an answer that is neither yes nor no', (s) => ({ snapshot: s, options: { tenant: 'acme', approvals: { b: 'yes' as unknown as boolean } } }), 'approvals.b', /must be true, false or/],
  ];
  for (const [title, make, field, message] of cases) {
    it(`refuses ${title}, naming ${field}, and runs nothing`, async () => {
      const given = make(await interrupted());
      const spies = toolsWithSpies();
      const runner = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: given.tools ?? spies.tools });
      const options = { tenant: 'acme', approvals: { b: true }, ...given.options } as ResumeOptions;
      let thrown: unknown;
      await runner.resume(given.agent ?? agent, given.snapshot as RunSnapshot, options).catch((error: unknown) => (thrown = error));
      expect(thrown).to.be.instanceOf(ConfigError).with.property('field', field);
      expect((thrown as Error).message).to.match(message);
      expect(() => runner.resume$(given.agent ?? agent, given.snapshot as RunSnapshot, options)).to.throw(ConfigError);
      expect(spies.book.called || spies.lookup.called).to.equal(false);
    });
  }

  it('resumes for the default tenant when none is given: another tenant\'s run is refused then too', async () => {
    const snapshot = await interrupted();
    const resumed = new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: toolsWithSpies().tools }).resume(agent, snapshot, { approvals: { b: true } });
    const error = await resumed.catch((thrown: unknown) => thrown);
    expect(error).to.be.instanceOf(ConfigError).with.property('field', 'tenant');
    const own = await new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools: toolsWithSpies().tools }).resume(agent, snapshot, { tenant: 'acme', approvals: { b: true } });
    expect(own.status).to.equal('completed');
  });
});
