// The shared HTTP step of the wire adapters: how long it waits before a retry (Retry-After in
// seconds, as an HTTP date or in ms, capped; otherwise doubling with jitter), that an abort
// during a backoff wait stops it at once, that an unreachable server is retried and then named,
// and that bad retry options are refused. Waits are injected: no wall-clock ranges.
import { expect } from 'chai';
import { ConfigError, ProviderHttpError, abortableSleep, postJson, retryDelay, retryPolicy, type RetryOptions } from '../../lib/index.js';
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
