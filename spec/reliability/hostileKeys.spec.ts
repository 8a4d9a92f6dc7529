// Names that Object.prototype also has (`constructor`, `toString`, `__proto__`...) as call ids,
// tool names, tenants, lane keys and approvals: each is a name like any other. Generated worlds
// run, wait for approvals and are resumed; each call gets exactly what its own key says.
import { jsonSchema } from 'ai';
import { expect } from 'chai';
import fc from 'fast-check';
import {
  Agent,
  AgentRunner,
  ConfigError,
  ScriptedProvider,
  ToolRegistry,
  type ConcurrencyOptions,
  type RunResult,
  type ToolOutcomeEvent,
} from '../../lib/index.js';
import type { Approval } from '../../lib/runner/resume/snapshotFormat.js';

const interruptedOf = (result: RunResult) => {
  if (result.status !== 'interrupted') throw new Error(`expected an interrupted run, got ${result.status}`);
  return result;
};
import { aiSdkTools } from '../../lib/providers/aiSdkProvider.js';
import { seed } from './seed.js';

const hostile = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'plain'] as const;
const name = fc.constantFrom(...hostile);
const agent = new Agent({ name: 'a', instructions: '', model: 'm' });

// A record with `key` as an own data property, as JSON.parse makes one (`{ [key]: v }` in a literal would too).
const recordOf = <V>(entries: ReadonlyArray<readonly [string, V]>): Record<string, V> => JSON.parse(JSON.stringify(Object.fromEntries(entries))) as Record<string, V>;

const world = fc.record({
  calls: fc.uniqueArray(fc.record({ id: name, tool: name }), { minLength: 1, maxLength: 6, selector: (c) => c.id }),
  needsApproval: fc.subarray([...hostile]),
  tenant: name,
  limited: fc.subarray([...hostile]),
  answers: fc.array(fc.constantFrom<Approval>(true, false, { approved: false, reason: 'over budget' }), { minLength: 6, maxLength: 6 }),
});

const prototypeNames = Object.getOwnPropertyNames(Object.prototype).sort();
const isOutcome = (e: { type: string }): e is ToolOutcomeEvent => e.type === 'TOOL_RESULT' || e.type === 'TOOL_ERROR' || e.type === 'TOOL_INDETERMINATE';

describe('hostile keys (properties)', () => {
  it('gives each call what its own id, tool, tenant, limits and answer say', async () => {
    await fc.assert(
      fc.asyncProperty(world, async ({ calls, needsApproval, tenant, limited, answers }) => {
        const tools = new ToolRegistry();
        for (const tool of hostile) tools.register({ name: tool, needsApproval: needsApproval.includes(tool) }, (args: unknown, ctx) => `${tool} ${ctx.callId} ${ctx.tenant} ${JSON.stringify(args)}`);
        const concurrency: ConcurrencyOptions = {
          maxConcurrentTools: 3,
          perTool: recordOf(limited.map((tool) => [tool, 2])),
          perToolSeconds: recordOf(limited.map((tool) => [tool, 30])),
          perToolRate: recordOf(limited.map((tool) => [tool, { limit: 100, perSeconds: 1, burst: 100 }])),
          perTenant: 4,
          perTenantRate: recordOf([[tenant, { limit: 100, perSeconds: 1, burst: 100 }]]),
        };
        const toolCalls = calls.map(({ id, tool }) => ({ id, name: tool, arguments: JSON.stringify(recordOf([[id, tool]])) }));
        const first = await new AgentRunner({ provider: new ScriptedProvider([{ toolCalls }, { text: 'done' }]), tools, concurrency }).run(agent, 'go', { tenant });
        const waiting = calls.filter((c) => needsApproval.includes(c.tool));
        const answerOf = new Map(waiting.map((c, i) => [c.id, answers[i]!]));
        let events = first.events;
        if (waiting.length > 0) {
          const { pending, snapshot } = interruptedOf(first);
          expect(pending.map((p) => p.callId)).to.deep.equal(waiting.map((c) => c.id));
          const resume = (approvals: Record<string, Approval>): Promise<RunResult> =>
            new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools, concurrency }).resume(agent, snapshot, { approvals, tenant });
          // A waiting call left unanswered is refused by its own id, whatever it is named.
          const unanswered = await resume({}).then(
            () => undefined,
            (error: unknown) => error,
          );
          expect(unanswered, 'resumed with no answers').to.be.instanceOf(ConfigError).and.to.have.property('field', `approvals.${waiting[0]!.id}`);
          const resumed = await resume(recordOf([...answerOf]));
          events = [...first.events.filter(isOutcome), ...resumed.events];
          expect(resumed.status).to.equal('completed');
        } else expect(first.status).to.equal('completed');
        const outcomes = events.filter(isOutcome);
        expect(outcomes.map((o) => o.callId)).to.deep.equal(calls.map((c) => c.id));
        outcomes.forEach((outcome, i) => {
          const { id, tool } = calls[i]!;
          const answer = answerOf.get(id);
          if (answer === undefined || answer === true) expect(outcome, id).to.deep.include({ type: 'TOOL_RESULT', result: `${tool} ${id} ${tenant} ${JSON.stringify(recordOf([[id, tool]]))}` });
          else expect(outcome, id).to.deep.include({ type: 'TOOL_ERROR', error: { name: 'ToolRejectedError', message: `approval rejected the call: ${answer === false ? 'not approved' : answer.reason}` } });
        });
        expect(Object.getOwnPropertyNames(Object.prototype).sort()).to.deep.equal(prototypeNames);
      }),
      { numRuns: 60, seed },
    );
  });

  it('resumed with approvals: {}, refuses a waiting call named like an Object member rather than reading the prototype', async () => {
    for (const id of hostile) {
      const tools = new ToolRegistry().register({ name: 'book', needsApproval: true }, () => 'booked');
      const first = await new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id, name: 'book', arguments: '{}' }] }, { text: 'done' }]), tools }).run(agent, 'go');
      const refused = await new AgentRunner({ provider: new ScriptedProvider([{ text: 'done' }]), tools })
        .resume(agent, interruptedOf(first).snapshot, { approvals: {} })
        .then(
          (result) => result,
          (error: unknown) => error,
        );
      expect(refused, id).to.be.instanceOf(ConfigError).and.to.include({ field: `approvals.${id}`, message: `approvals.${id}: call ${id} waits for an answer and got none` });
    }
  });

  it('reads the AI SDK tools extras by their own keys: a tool named constructor has no extras it was not given', () => {
    const execute = () => 'ran';
    const tools = recordOf<unknown>(hostile.map((tool) => [tool, {}]));
    for (const tool of hostile) Object.assign(tools[tool] as object, { execute, inputSchema: jsonSchema({ type: 'object' }) });
    const entries = aiSdkTools(tools as Parameters<typeof aiSdkTools>[0], { idempotent: recordOf([['valueOf', true]]), needsApproval: {} });
    const declared = new Map(entries.map((entry) => [entry.declaration.name, entry.declaration]));
    expect([...declared.keys()]).to.deep.equal([...hostile]);
    for (const tool of hostile) {
      expect(declared.get(tool)!.needsApproval, `${tool}.needsApproval`).to.equal(undefined);
      expect(declared.get(tool)!.idempotent, `${tool}.idempotent`).to.equal(tool === 'valueOf' ? true : undefined);
      expect(declared.get(tool)!.parallelSafe, `${tool}.parallelSafe`).to.equal(undefined);
    }
  });
});
