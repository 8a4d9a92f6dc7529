import { expect } from 'chai';
import * as t from 'io-ts';
import { Agent, ToolRegistry } from '../../lib/index.js';
import { agentFingerprint } from '../../lib/runner/resume/fingerprint.js';

const agent = (instructions = 'plan') => new Agent({ name: 'planner', instructions, model: 'test-model' });
const body = () => 'ok';
const registry = (book: Record<string, unknown> = {}, order: 'book first' | 'lookup first' = 'book first') => {
  const tools = new ToolRegistry();
  const add = {
    book: () => tools.register({ name: 'book', description: 'books a room', args: t.type({ room: t.string }), needsApproval: true, ...book }, body),
    lookup: () => tools.register({ name: 'lookup' }, body),
  };
  if (order === 'book first') (add.book(), add.lookup());
  else (add.lookup(), add.book());
  return tools;
};

describe('agentFingerprint', () => {
  it('is a hex sha256, the same for the same agent and tools', () => {
    expect(agentFingerprint(agent(), registry())).to.match(/^[0-9a-f]{64}$/).and.equal(agentFingerprint(agent(), registry()));
  });

  it('does not change with the order tools were registered in, nor with parallelSafe', () => {
    const base = agentFingerprint(agent(), registry());
    expect(agentFingerprint(agent(), registry({}, 'lookup first'))).to.equal(base);
    expect(agentFingerprint(agent(), registry({ parallelSafe: false }))).to.equal(base);
  });

  const changes: Array<[string, () => string]> = [
    ['the instructions', () => agentFingerprint(agent('other'), registry())],
    ['a tool\'s description', () => agentFingerprint(agent(), registry({ description: 'cancels a room' }))],
    ['a tool\'s arguments', () => agentFingerprint(agent(), registry({ args: t.type({ room: t.number }) }))],
    ['whether a tool needs approval', () => agentFingerprint(agent(), registry({ needsApproval: false }))],
    ['whether a tool is idempotent', () => agentFingerprint(agent(), registry({ idempotent: true }))],
    ['the tools the agent may call', () => agentFingerprint(new Agent({ name: 'planner', instructions: 'plan', model: 'test-model', tools: ['lookup'] }), registry())],
  ];
  for (const [what, other] of changes) {
    it(`changes with ${what}`, () => {
      expect(other()).to.not.equal(agentFingerprint(agent(), registry()));
    });
  }
});
