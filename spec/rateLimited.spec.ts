// A partner's "slow down" in the shapes it comes in, read as a RateLimitedError: an HTTP 429 from
// a wire adapter, the AI SDK's APICallError of a 429 thrown by an AI SDK tool's execute, an MCP
// transport's HTTP 429. Each fails its own call and pauses the tool's rate lane.
import { APICallError } from '@ai-sdk/provider';
import { tool, jsonSchema } from 'ai';
import { expect } from 'chai';
import { filter, firstValueFrom } from 'rxjs';
import { Agent, AgentRunner, RateLimitedError, ScriptedProvider, ToolRegistry, type RunEvent } from '../lib/index.js';
import type { LanePauseNotice } from '../lib/lanes/LaneTable.js';
import { ProviderHttpError } from '../lib/providers/index.js';
import { registerAiSdkTools } from '../lib/providers/aiSdkProvider.js';
import { rateLimitedFrom } from '../lib/rateLimited.js';

const agent = new Agent({ name: 'assistant', instructions: 'help', model: 'm' });
const oneCall = (name: string) => new ScriptedProvider([{ toolCalls: [{ id: 'c1', name, arguments: {} }] }, { text: 'done' }]);
const errorOf = (events: readonly RunEvent[]) => events.flatMap((e) => (e.type === 'TOOL_ERROR' ? [e.error] : []))[0];

describe('rateLimitedFrom', () => {
  it('keeps a RateLimitedError as it is', () => {
    const error = new RateLimitedError('slow down', 3);
    expect(rateLimitedFrom(error)).to.equal(error);
  });

  it("reads a 429's status (a wire adapter's), statusCode or code, with the wait the partner asked for", () => {
    const http = new ProviderHttpError('OpenAI Chat Completions at api.openai.com', 429, 'rate_limit_exceeded', 'Rate limit reached', 3, { retryAfterSeconds: 2 });
    const fromHttp = rateLimitedFrom(http)!;
    expect(fromHttp).to.be.instanceOf(RateLimitedError);
    expect(fromHttp.retryAfterSeconds).to.equal(2);
    expect(fromHttp.message).to.equal(http.message);
    expect((fromHttp as { cause?: unknown }).cause).to.equal(http);
    expect(rateLimitedFrom(Object.assign(new Error('too many'), { statusCode: 429 }))?.retryAfterSeconds).to.equal(0);
    expect(rateLimitedFrom(Object.assign(new Error('Error POSTing to endpoint (HTTP 429)'), { code: 429 }))).to.be.instanceOf(RateLimitedError);
  });

  it('leaves alone anything that is not a 429, and a value whose reading throws', () => {
    expect(rateLimitedFrom(Object.assign(new Error('bad'), { status: 400 }))).to.equal(undefined);
    expect(rateLimitedFrom('429')).to.equal(undefined);
    expect(rateLimitedFrom(undefined)).to.equal(undefined);
    const hostile = new Proxy({}, { getOwnPropertyDescriptor: () => { throw new Error('no'); } });
    expect(rateLimitedFrom(hostile)).to.equal(undefined);
  });
});

describe('a partner\'s 429 inside a tool body', () => {
  it("an AI SDK tool whose execute meets an APICallError of a 429 fails with RateLimitedError, and pauses the tool's rate lane", async () => {
    const summarize = tool({
      description: 'Summarizes with a model of its own',
      inputSchema: jsonSchema<Record<string, never>>({ type: 'object', properties: {}, additionalProperties: false }),
      execute: async (): Promise<string> => {
        throw new APICallError({ message: 'Rate limit reached', url: 'u', requestBodyValues: {}, statusCode: 429, responseHeaders: { 'retry-after': '7' }, data: {} });
      },
    });
    const tools = registerAiSdkTools({ summarize });
    const runner = new AgentRunner({ provider: oneCall('summarize'), tools });
    const paused = firstValueFrom(runner.activity$.pipe(filter((a): a is LanePauseNotice => a.type === 'lane-paused')));
    const result = await runner.run(agent, 'go');
    expect(errorOf(result.events)).to.include({ name: 'RateLimitedError', retryAfterSeconds: 7 });
    expect(await paused).to.include({ key: 'rate:tool:summarize', seconds: 7 });
    expect(runner.lanes.paused?.('rate:tool:summarize')).to.equal(true);
  });

  it("a body that throws a wire adapter's 429 pauses its tool's rate lane for the wait the vendor asked", async () => {
    const tools = new ToolRegistry().register({ name: 'ask' }, () => {
      throw new ProviderHttpError('Anthropic Messages at api.anthropic.com', 429, 'rate_limit_error', 'Number of requests has exceeded your rate limit', 3, { retryAfterSeconds: 5 });
    });
    const runner = new AgentRunner({ provider: oneCall('ask'), tools });
    const result = await runner.run(agent, 'go');
    expect(errorOf(result.events)).to.include({ status: 429 });
    expect(runner.lanes.paused?.('rate:tool:ask')).to.equal(true);
  });
});
