// The fingerprint: a sha256 over canonical JSON of the agent (name, instructions, model,
// output codec name) and each of its tools (description, argument schema, idempotent).
// parallelSafe, needsApproval and registration order are not part of it; each listed field is.
import { expect } from 'chai';
import * as t from 'io-ts';
import { Agent, ToolRegistry, type AgentOptions, type ToolDeclaration } from '../../lib/index.js';
import { fingerprint, fingerprintChanges, type Fingerprint } from '../../lib/testing.js';

const Search = t.type({ q: t.string });
const agentOptions: AgentOptions = { name: 'planner', instructions: 'Plan the trip.', model: 'model-1' };
const search: ToolDeclaration = { name: 'search', description: 'Search hotels', args: Search, idempotent: true };
const booking: ToolDeclaration = { name: 'booking', description: 'Book', args: t.type({ hotel: t.string }), parallelSafe: false };

function tools(...declarations: ToolDeclaration[]): ToolRegistry {
  const registry = new ToolRegistry();
  for (const declaration of declarations) registry.register(declaration, () => 'ok');
  return registry;
}

const base = (): Fingerprint => fingerprint(new Agent(agentOptions), tools(search, booking));

describe('fingerprint', () => {
  it('is a sha256 of the canonical agent and tools, the same for the same definitions', () => {
    const a = base();
    expect(a.sha256).to.match(/^[0-9a-f]{64}$/);
    expect(base()).to.deep.equal(a);
    expect(a.agent).to.deep.equal({ name: 'planner', instructions: 'Plan the trip.', model: 'model-1', output: null });
    expect(a.tools.search).to.deep.equal({
      description: 'Search hotels',
      idempotent: true,
      parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'], additionalProperties: true },
    });
  });

  const onlySearch = new Agent({ ...agentOptions, tools: ['search'] });
  const unchanged: Array<{ title: string; reference: () => Fingerprint; make: () => Fingerprint }> = [
    { title: 'parallelSafe flipped', reference: base, make: () => fingerprint(new Agent(agentOptions), tools(search, { ...booking, parallelSafe: true })) },
    { title: 'needsApproval added', reference: base, make: () => fingerprint(new Agent(agentOptions), tools(search, { ...booking, needsApproval: true })) },
    { title: 'tools registered in another order', reference: base, make: () => fingerprint(new Agent(agentOptions), tools(booking, search)) },
    {
      title: 'a tool the agent may not call changed',
      reference: () => fingerprint(onlySearch, tools(search, booking)),
      make: () => fingerprint(onlySearch, tools(search, { ...booking, description: 'Other' })),
    },
  ];
  for (const c of unchanged) {
    it(`does not change with ${c.title}`, () => {
      expect(c.make().sha256).to.equal(c.reference().sha256);
      expect(fingerprintChanges(c.reference(), c.make())).to.deep.equal([]);
    });
  }

  const changed: Array<{ title: string; make: () => Fingerprint; path: string; recorded: unknown; current: unknown }> = [
    { title: 'a tool description', make: () => fingerprint(new Agent(agentOptions), tools({ ...search, description: 'Find hotels' }, booking)), path: 'tools.search.description', recorded: 'Search hotels', current: 'Find hotels' },
    { title: 'a tool argument schema', make: () => fingerprint(new Agent(agentOptions), tools({ ...search, args: t.type({ q: t.number }) }, booking)), path: 'tools.search.parameters.properties.q.type', recorded: 'string', current: 'number' },
    { title: 'the idempotent flag', make: () => fingerprint(new Agent(agentOptions), tools({ ...search, idempotent: false }, booking)), path: 'tools.search.idempotent', recorded: true, current: false },
    { title: 'a tool removed', make: () => fingerprint(new Agent(agentOptions), tools(search)), path: 'tools.booking', recorded: base().tools.booking, current: undefined },
    { title: 'the instructions', make: () => fingerprint(new Agent({ ...agentOptions, instructions: 'Plan cheaply.' }), tools(search, booking)), path: 'agent.instructions', recorded: 'Plan the trip.', current: 'Plan cheaply.' },
    { title: 'the model', make: () => fingerprint(new Agent({ ...agentOptions, model: 'model-2' }), tools(search, booking)), path: 'agent.model', recorded: 'model-1', current: 'model-2' },
    { title: 'the output codec', make: () => fingerprint(new Agent({ ...agentOptions, output: t.type({ hotel: t.string }) }), tools(search, booking)), path: 'agent.output', recorded: null, current: '{ hotel: string }' },
  ];
  for (const c of changed) {
    it(`changes with ${c.title}, and says where`, () => {
      expect(c.make().sha256).to.not.equal(base().sha256);
      expect(fingerprintChanges(base(), c.make())).to.deep.equal([{ path: c.path, recorded: c.recorded, current: c.current }]);
    });
  }
});
