// A server that reports progress keeps its request alive, and the progress reaches activity$.
// The server and the client run over the SDK's in-memory transport on sinon's fake clock, so a
// request that reports every 60 ms and takes 300 ms under a 100 ms timeout is checked exactly:
// without the progress keeping it alive it would die at 100 ms, whatever the machine's load.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { expect } from 'chai';
import sinon from 'sinon';
import { z } from 'zod';
import { Agent, AgentRunner, ScriptedProvider, ToolRegistry, type RunnerActivity, type RunResult } from '../../lib/index.js';
import { inMemory, type InMemory } from './mcpMemory.js';
import { outcomes } from './outcomes.js';

const agent = new Agent({ name: 'planner', instructions: 'plan', model: 'test-model' });


// A tool that works `steps` steps of `stepMs` each, reporting progress after each of the first
// `reports` of them (all by default), then answers.
function progressServer(): McpServer {
  const server = new McpServer({ name: 'batch', version: '1.0.0' });
  server.registerTool(
    'long',
    { description: 'Works in steps, reporting progress', inputSchema: { steps: z.number().int(), stepMs: z.number(), reports: z.number().int().optional() } },
    async ({ steps, stepMs, reports = steps }, extra) => {
      const token = extra._meta?.progressToken;
      for (let step = 1; step <= steps; step++) {
        await new Promise((resolve) => setTimeout(resolve, stepMs));
        if (token !== undefined && step <= reports) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: step, total: steps, message: `step ${step}` } });
        }
      }
      return { content: [{ type: 'text', text: `did ${steps} steps` }] };
    },
  );
  return server;
}

describe('MCP progress', () => {
  let clock: sinon.SinonFakeTimers;
  let served: InMemory;
  beforeEach(async () => {
    clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    served = await inMemory(progressServer());
  });
  afterEach(async () => {
    await served.close();
    clock.restore();
  });

  async function run(options: { timeoutSeconds: number; maxTotalSeconds?: number }, args: Record<string, unknown>, ms: number): Promise<{ result: RunResult; progress: RunnerActivity[] }> {
    const tools = await new ToolRegistry().registerMcp(served.client, options);
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'c1', name: 'long', arguments: args }] }, { text: 'done' }]), tools, loopStallMs: false });
    const progress: RunnerActivity[] = [];
    const watching = runner.activity$.subscribe((activity) => activity.type === 'progress' && progress.push(activity));
    const running = runner.run(agent, 'go');
    await clock.tickAsync(ms);
    const result = await running;
    watching.unsubscribe();
    return { result, progress };
  }

  it('keeps a request alive past its timeout while the server reports progress, and passes each report to activity$', async () => {
    const { result, progress } = await run({ timeoutSeconds: 0.1 }, { steps: 5, stepMs: 60 }, 400);
    expect(outcomes(result)).to.deep.equal(['c1=did 5 steps']);
    expect(progress.map((activity) => activity.type === 'progress' && [activity.callId, activity.tool, activity.progress, activity.total, activity.message])).to.deep.equal(
      [1, 2, 3, 4, 5].map((step) => ['c1', 'long', step, 5, `step ${step}`]),
    );
    expect(progress[0]).to.include({ turn: 1, index: 0 });
  });

  it('times out once the reports stop: a call stopped in flight', async () => {
    const { result, progress } = await run({ timeoutSeconds: 0.1 }, { steps: 5, stepMs: 60, reports: 2 }, 400);
    expect(progress).to.have.length(2);
    expect(outcomes(result)).to.deep.equal(['c1? long was in flight when its request to MCP server batch got no answer in time (MCP error -32001: Request timed out). The side effect may have landed']);
  });

  it('stops a request at maxTotalSeconds however much progress it reports', async () => {
    const { result } = await run({ timeoutSeconds: 0.1, maxTotalSeconds: 0.2 }, { steps: 5, stepMs: 60 }, 400);
    expect(outcomes(result)).to.have.length(1);
    expect(outcomes(result)[0]).to.match(/^c1\? long was in flight when its request to MCP server batch got no answer in time \(MCP error -32001: Maximum total timeout exceeded\)\. The side effect may have landed$/);
  });

  it('refuses a bad maxTotalSeconds, naming the field', async () => {
    const refused = await new ToolRegistry().registerMcp(served.client, { maxTotalSeconds: 0 }).then(
      () => undefined,
      (error: unknown) => error as { field?: string; message?: string },
    );
    expect(refused).to.deep.include({ field: 'maxTotalSeconds', message: 'maxTotalSeconds must be a positive number of seconds, got 0' });
  });
});

describe("a tool body's progress", () => {
  it("reaches activity$ from ctx.progress, and is checked (a TypeError names what is wrong)", async () => {
    const errors: string[] = [];
    const tools = new ToolRegistry().register({ name: 'work' }, (_args, ctx) => {
      ctx.progress(1, 2, 'half');
      ctx.progress(2);
      for (const bad of [() => ctx.progress(Number.NaN), () => ctx.progress(1, 'two' as never), () => ctx.progress(1, 2, 3 as never)]) {
        try {
          bad();
        } catch (error) {
          errors.push((error as Error).message);
        }
      }
      return 'worked';
    });
    const runner = new AgentRunner({ provider: new ScriptedProvider([{ toolCalls: [{ id: 'w', name: 'work', arguments: {} }] }, { text: 'done' }]), tools });
    const progress: unknown[] = [];
    runner.activity$.subscribe((activity) => {
      if (activity.type === 'progress') progress.push({ callId: activity.callId, progress: activity.progress, total: activity.total, message: activity.message });
    });
    const result = await runner.run(agent, 'go');
    expect(outcomes(result)).to.deep.equal(['w=worked']);
    expect(progress).to.deep.equal([
      { callId: 'w', progress: 1, total: 2, message: 'half' },
      { callId: 'w', progress: 2, total: undefined, message: undefined },
    ]);
    expect(errors).to.deep.equal([
      'progress(progress, total?, message?) expects progress to be a finite number, got NaN',
      'progress(progress, total?, message?) expects total to be a finite number or undefined, got two',
      'progress(progress, total?, message?) expects message to be a string or undefined, got number',
    ]);
  });
});
