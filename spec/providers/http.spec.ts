// The shared HTTP step of the wire adapters: how long it waits before a retry (Retry-After in
// seconds, as an HTTP date or in ms, capped; otherwise doubling with jitter), that an abort
// during a backoff wait stops it at once, that an unreachable server is retried and then named,
// that a request outlasting its timeoutSeconds is aborted and named (its timer cleared however
// it ended), and that bad options are refused. Waits are injected or faked: no wall-clock ranges.
import { expect } from 'chai';
import sinon from 'sinon';
import { ConfigError } from '../../lib/index.js';
import { OpenAIChatProvider, ProviderHttpError, ProviderTimeoutError, retryDelay, retryPolicy, type RetryOptions } from '../../lib/providers.js';
import { abortableSleep, postJson, type JsonPost } from '../../lib/providers/http.js';
import { startWireServer, type WireServer } from './wireServer.js';

const NOW = Date.parse('2026-11-30T12:00:00Z');
const policy = (options: RetryOptions = {}) => retryPolicy({ random: () => 0.5, now: () => NOW, ...options });

describe('retryDelay', () => {
  const cases: ReadonlyArray<{ title: string; retry: number; headers?: Record<string, string>; options?: RetryOptions; ms: number }> = [
    { title: 'waits the Retry-After seconds', retry: 1, headers: { 'retry-after': '3' }, ms: 3000 },
    { title: 'reads fractional Retry-After seconds', retry: 1, headers: { 'retry-after': '0.25' }, ms: 250 },
    { title: 'waits until a Retry-After HTTP date', retry: 1, headers: { 'retry-after': new Date(NOW + 7000).toUTCString() }, ms: 7000 },
    { title: 'waits nothing for a Retry-After date already past', retry: 1, headers: { 'retry-after': new Date(NOW - 7000).toUTCString() }, ms: 0 },
    { title: "prefers OpenAI's retry-after-ms", retry: 1, headers: { 'retry-after-ms': '120', 'retry-after': '1' }, ms: 120 },
    { title: 'caps a Retry-After at maxDelayMs', retry: 1, headers: { 'retry-after': '3600' }, options: { maxDelayMs: 5000 }, ms: 5000 },
    { title: 'backs off from baseDelayMs without a Retry-After, jittered into the upper half', retry: 1, options: { baseDelayMs: 400 }, ms: 300 },
    { title: 'doubles the backoff for each retry', retry: 3, options: { baseDelayMs: 400 }, ms: 1200 },
    { title: 'caps the backoff at maxDelayMs before the jitter', retry: 10, options: { baseDelayMs: 400, maxDelayMs: 1000 }, ms: 750 },
    { title: 'ignores a Retry-After it cannot read and backs off', retry: 2, headers: { 'retry-after': 'soon' }, options: { baseDelayMs: 100 }, ms: 150 },
  ];
  for (const c of cases) {
    it(c.title, () => {
      expect(retryDelay(c.retry, c.headers ? new Headers(c.headers) : undefined, policy(c.options))).to.equal(c.ms);
    });
  }

  it('spreads the backoff over its upper half as random() runs from 0 to 1', () => {
    const at = (random: number) => retryDelay(1, undefined, retryPolicy({ baseDelayMs: 1000, random: () => random }));
    expect([at(0), at(0.5), at(0.999)]).to.deep.equal([500, 750, 1000]);
  });
});

describe('retryPolicy', () => {
  const bad: ReadonlyArray<[RetryOptions, string]> = [
    [{ attempts: 0 }, 'retry.attempts'],
    [{ attempts: 1.5 }, 'retry.attempts'],
    [{ attempts: 11 }, 'retry.attempts'],
    [{ baseDelayMs: -1 }, 'retry.baseDelayMs'],
    [{ maxDelayMs: 'soon' as unknown as number }, 'retry.maxDelayMs'],
    [{ sleep: 5 as unknown as RetryOptions['sleep'] }, 'retry.sleep'],
    [{ atempts: 3 } as RetryOptions, 'retry.atempts'],
  ];
  for (const [options, field] of bad) {
    it(`refuses ${JSON.stringify(options)} with a ConfigError naming ${field}`, () => {
      expect(() => retryPolicy(options)).to.throw(ConfigError).with.property('field', field);
    });
  }
});

describe('postJson', () => {
  let server: WireServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('stops at once when the signal aborts during a backoff wait, sending nothing more', async () => {
    server = await startWireServer([{ status: 429, headers: { 'retry-after': '30' }, body: { error: { message: 'slow down' } } }, { body: {} }]);
    const controller = new AbortController();
    // The real timer-based sleep, watched: the abort comes once the long wait has begun.
    let waiting!: () => void;
    const began = new Promise<void>((resolve) => (waiting = resolve));
    const waits: number[] = [];
    const retry = retryPolicy({
      sleep: (ms, signal) => {
        waits.push(ms);
        waiting();
        return abortableSleep(ms, signal);
      },
    });
    const pending = postJson({ provider: 'test wire', url: `${server.url}/v1/x`, headers: {}, body: {}, signal: controller.signal, retry }).catch((e: unknown) => e);
    await began;
    const reason = new Error('cancelled by the user');
    controller.abort(reason);
    expect(await pending).to.equal(reason);
    // 30s asked, capped at the default maxDelayMs of 20s.
    expect(waits).to.deep.equal([20_000]);
    expect(server.received).to.have.length(1);
  });

  it('does not start when the signal has already aborted', async () => {
    server = await startWireServer([{ body: {} }]);
    const controller = new AbortController();
    controller.abort(new Error('too late'));
    const error = await postJson({ provider: 'test wire', url: server.url, headers: {}, body: {}, signal: controller.signal, retry: policy() }).catch((e: unknown) => e);
    expect((error as Error).message).to.equal('too late');
    expect(server.received).to.have.length(0);
  });

  it('retries a server it cannot reach, then fails with a ProviderHttpError that has no status', async () => {
    // A port that was just free: nothing listens there.
    const gone = await startWireServer([]);
    const url = gone.url;
    await gone.close();
    const waits: number[] = [];
    const retry = retryPolicy({ attempts: 2, baseDelayMs: 10, random: () => 0, sleep: async (ms) => void waits.push(ms) });
    const error = await postJson({ provider: 'test wire at nowhere', url, headers: {}, body: {}, signal: new AbortController().signal, retry }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ProviderHttpError);
    expect(error).to.include({ status: undefined, attempts: 2 });
    expect((error as Error).message).to.match(/^test wire at nowhere could not be reached: fetch failed .*\(after 2 attempts\)$/);
    expect(waits).to.deep.equal([5]);
  });

  it('abortableSleep resolves after its time and rejects with the reason when aborted', async () => {
    await abortableSleep(1, new AbortController().signal);
    const controller = new AbortController();
    const pending = abortableSleep(60_000, controller.signal).catch((e: unknown) => e);
    controller.abort('stop');
    expect(await pending).to.equal('stop');
  });
});

describe('postJson timeoutSeconds', () => {
  let server: WireServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  const recorded = (attempts: number) => {
    const waits: number[] = [];
    return { waits, retry: retryPolicy({ attempts, baseDelayMs: 10, random: () => 0, sleep: async (ms) => void waits.push(ms) }) };
  };

  it('aborts a request the endpoint never answers, retries it as a failure to connect, then names the timeout', async () => {
    server = await startWireServer(['hang', 'hang']);
    const { waits, retry } = recorded(2);
    const error = await postJson({ provider: 'test wire', url: server.url, headers: {}, body: {}, signal: new AbortController().signal, retry, timeoutSeconds: 0.05 }).catch(
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(ProviderTimeoutError).and.to.be.instanceOf(ProviderHttpError);
    expect(error).to.include({ name: 'ProviderTimeoutError', seconds: 0.05, attempts: 2, status: undefined });
    expect((error as Error).message).to.equal('test wire did not reply within 0.05s (its timeoutSeconds) (after 2 attempts)');
    expect(server.received).to.have.length(2);
    expect(waits).to.deep.equal([5]);
    // The endpoint saw the request go away: the fetch was aborted, not left open.
    await server.hungUp;
  });

  it('counts reading the body against the timeout: a reply whose body stalls times out too', async () => {
    server = await startWireServer(['stall']);
    const error = await postJson({
      provider: 'test wire',
      url: server.url,
      headers: {},
      body: {},
      signal: new AbortController().signal,
      retry: recorded(1).retry,
      timeoutSeconds: 0.05,
    }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ProviderTimeoutError);
    expect((error as Error).message).to.equal('test wire did not reply within 0.05s (its timeoutSeconds)');
    await server.hungUp;
  });

  describe('with a faked clock', () => {
    let clock: sinon.SinonFakeTimers;
    beforeEach(() => {
      clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    });
    afterEach(() => clock.restore());

    /** A fetch that answers with `reply` (or rejects with it), or, without one, waits until its signal aborts. */
    const fetchWith =
      (reply?: () => Response | Error): typeof fetch =>
      (_url, init) =>
        new Promise<Response>((resolve, reject) => {
          const answer = reply?.();
          if (answer instanceof Error) reject(answer);
          else if (answer !== undefined) resolve(answer);
          else init!.signal!.addEventListener('abort', () => reject(init!.signal!.reason), { once: true });
        });
    const post = (answer: typeof fetch, signal: AbortSignal, timeoutSeconds?: number | false): Promise<unknown> => {
      const request: JsonPost = { provider: 'test wire', url: 'http://127.0.0.1:9/x', headers: {}, body: {}, signal, retry: recorded(1).retry, fetch: answer };
      return postJson(timeoutSeconds === undefined ? request : { ...request, timeoutSeconds });
    };

    it('clears its timer when the reply comes', async () => {
      expect(await post(fetchWith(() => new Response('{"ok":true}')), new AbortController().signal, 30)).to.deep.equal({ ok: true });
      expect(clock.countTimers()).to.equal(0);
    });

    it('clears its timer when the request fails', async () => {
      const error = await post(fetchWith(() => new TypeError('fetch failed')), new AbortController().signal, 30).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(ProviderHttpError).and.not.to.be.instanceOf(ProviderTimeoutError);
      expect(clock.countTimers()).to.equal(0);
    });

    it('clears its timer and rejects with the reason when the caller aborts, not naming a timeout', async () => {
      const controller = new AbortController();
      const pending = post(fetchWith(), controller.signal, 30).catch((e: unknown) => e);
      expect(clock.countTimers()).to.equal(1);
      const reason = new Error('the run stopped');
      controller.abort(reason);
      expect(await pending).to.equal(reason);
      expect(clock.countTimers()).to.equal(0);
    });

    it('times out at exactly timeoutSeconds, not before', async () => {
      const pending = post(fetchWith(), new AbortController().signal, 30).catch((e: unknown) => e);
      let settled = false;
      void pending.then(() => (settled = true));
      await clock.tickAsync(29_999);
      expect(settled).to.equal(false);
      await clock.tickAsync(1);
      expect(await pending).to.be.instanceOf(ProviderTimeoutError).with.property('seconds', 30);
      expect(clock.countTimers()).to.equal(0);
    });

    it('arms no timer without timeoutSeconds, or with false', async () => {
      for (const timeoutSeconds of [undefined, false] as const) {
        const controller = new AbortController();
        const pending = post(fetchWith(), controller.signal, timeoutSeconds).catch((e: unknown) => e);
        expect(clock.countTimers()).to.equal(0);
        controller.abort(new Error('done'));
        await pending;
      }
    });

    it('gives a provider 600 seconds per request by default', async () => {
      const provider = new OpenAIChatProvider({ baseURL: 'http://127.0.0.1:9/v1', retry: { attempts: 1 }, fetch: fetchWith(), stream: false });
      const request = { agent: 'a', model: 'm', instructions: '', messages: [{ role: 'user' as const, content: 'hi' }], tools: [] };
      const pending = Promise.resolve(provider.respond(request, new AbortController().signal)).catch((e: unknown) => e);
      await clock.tickAsync(600_000);
      const error = await pending;
      expect(error).to.be.instanceOf(ProviderTimeoutError);
      expect((error as Error).message).to.equal('OpenAI Chat Completions at 127.0.0.1:9 did not reply within 600s (its timeoutSeconds)');
    });
  });

  const bad: ReadonlyArray<unknown> = [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 3_000_000, '30', true, null];
  for (const timeoutSeconds of bad) {
    it(`refuses timeoutSeconds ${String(timeoutSeconds)} with a ConfigError naming the field`, async () => {
      const error = await postJson({
        provider: 'test wire',
        url: 'http://127.0.0.1:9/x',
        headers: {},
        body: {},
        signal: new AbortController().signal,
        retry: retryPolicy(),
        timeoutSeconds: timeoutSeconds as number,
      }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(ConfigError).with.property('field', 'timeoutSeconds');
      expect(() => new OpenAIChatProvider({ baseURL: 'http://127.0.0.1:9/v1', timeoutSeconds: timeoutSeconds as number }))
        .to.throw(ConfigError, /^timeoutSeconds must be a number of seconds above 0 and at most 2147483, or false for no limit; got /)
        .with.property('field', 'timeoutSeconds');
    });
  }
});
