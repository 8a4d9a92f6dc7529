// The wire adapters' retries honour what a failure says of itself: a `retryable` or
// `isRetryable` boolean of its own (the AI SDK's APICallError has the latter) decides whether a
// failed request is sent again; a failure that says nothing is retried as a failure to connect.
import { APICallError } from '@ai-sdk/provider';
import { expect } from 'chai';
import { Agent, AgentRunner, ToolRegistry } from '../../lib/index.js';
import { OpenAIChatProvider, ProviderHttpError, retryPolicy } from '../../lib/providers.js';
import { postJson, retryableFlag } from '../../lib/providers/http.js';

// A fetch that fails every request with `make()`, counting them.
function failingFetch(make: () => unknown): { fetch: typeof fetch; sent: () => number } {
  let sent = 0;
  return {
    fetch: async () => {
      sent++;
      throw make();
    },
    sent: () => sent,
  };
}

const noWait = () => retryPolicy({ attempts: 3, sleep: async () => undefined });
const post = (doFetch: typeof fetch) =>
  postJson({ provider: 'test wire', url: 'http://127.0.0.1:9/v1/x', headers: {}, body: {}, signal: new AbortController().signal, retry: noWait(), fetch: doFetch }).catch((e: unknown) => e);

const flagged = (fields: Record<string, unknown>) => Object.assign(new Error('refused by the gateway'), fields);

describe('retryableFlag', () => {
  const cases: ReadonlyArray<{ readonly title: string; readonly error: unknown; readonly flag: boolean | undefined }> = [
    { title: 'retryable: false', error: flagged({ retryable: false }), flag: false },
    { title: 'retryable: true', error: flagged({ retryable: true }), flag: true },
    { title: 'isRetryable: false', error: flagged({ isRetryable: false }), flag: false },
    { title: 'isRetryable: true', error: flagged({ isRetryable: true }), flag: true },
    { title: 'both, retryable first', error: flagged({ retryable: true, isRetryable: false }), flag: true },
    { title: 'an APICallError that is not retryable', error: new APICallError({ message: 'bad request', url: 'u', requestBodyValues: {}, statusCode: 400 }), flag: false },
    { title: 'an APICallError of a 503', error: new APICallError({ message: 'unavailable', url: 'u', requestBodyValues: {}, statusCode: 503 }), flag: true },
    { title: 'a string flag', error: flagged({ retryable: 'no' }), flag: undefined },
    { title: 'a flag behind a getter', error: Object.defineProperty(new Error('x'), 'retryable', { get: () => false }), flag: undefined },
    { title: 'no flag', error: new Error('x'), flag: undefined },
    { title: 'a string', error: 'x', flag: undefined },
    { title: 'null', error: null, flag: undefined },
    {
      title: 'a Proxy whose traps throw',
      error: new Proxy({}, { getOwnPropertyDescriptor: () => { throw new Error('trap'); } }),
      flag: undefined,
    },
  ];
  for (const c of cases) {
    it(`reads ${c.title} as ${String(c.flag)}`, () => {
      expect(retryableFlag(c.error)).to.equal(c.flag);
    });
  }
});

describe('retries of a failed request', () => {
  const cases: ReadonlyArray<{ readonly title: string; readonly make: () => unknown; readonly sent: number }> = [
    { title: 'retryable: false', make: () => flagged({ retryable: false }), sent: 1 },
    { title: 'isRetryable: false', make: () => flagged({ isRetryable: false }), sent: 1 },
    { title: 'an APICallError of a 400', make: () => new APICallError({ message: 'bad request', url: 'u', requestBodyValues: {}, statusCode: 400 }), sent: 1 },
    { title: 'retryable: true', make: () => flagged({ retryable: true }), sent: 3 },
    { title: 'isRetryable: true', make: () => flagged({ isRetryable: true }), sent: 3 },
    { title: 'no flag (a failure to connect)', make: () => new TypeError('fetch failed'), sent: 3 },
  ];
  for (const c of cases) {
    it(`sends ${c.sent === 1 ? 'once' : `${c.sent} times`} a request failing with ${c.title}, then names the failure`, async () => {
      const failing = failingFetch(c.make);
      const error = await post(failing.fetch);
      expect(failing.sent()).to.equal(c.sent);
      expect(error).to.be.instanceOf(ProviderHttpError);
      expect(error).to.include({ attempts: c.sent });
    });
  }

  it('fails a run at once through a provider whose fetch says its failure is not retryable, with the attempts made', async () => {
    const failing = failingFetch(() => flagged({ isRetryable: false }));
    const provider = new OpenAIChatProvider({ apiKey: 'k', baseURL: 'http://127.0.0.1:9/v1', fetch: failing.fetch, stream: false, retry: { attempts: 3, sleep: async () => undefined } });
    const result = await new AgentRunner({ provider, tools: new ToolRegistry() }).run(new Agent({ name: 'a', instructions: '', model: 'm' }), 'go');
    expect(result.status).to.equal('failed');
    expect(result.error).to.include({ name: 'ProviderError', attempts: 1 });
    expect(result.error!.message).to.contain('refused by the gateway');
    expect(failing.sent()).to.equal(1);
  });
});
