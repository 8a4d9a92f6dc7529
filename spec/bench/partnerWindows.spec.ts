// The partner bench's simulated partner must limit as it says, or the bench's figures mean
// nothing: R per second of its clock, refusals until the next second, latency growing with the
// requests in flight, a concurrency limit of its own, and every request counted in its second.
import { expect } from 'chai';
import { PartnerWindows } from '../../bench/partner/windows.js';

const limits = { rate: 3, baseLatencyMs: 50, perInFlightMs: 2 };
// An epoch second of the partner's clock, in ms.
const second = 1_700_000_000_000;

describe('the partner bench: PartnerWindows', () => {
  it('admits R requests in a second and refuses the next until the second ends', () => {
    const windows = new PartnerWindows(limits);
    const admitted = [0, 100, 200].map((at) => windows.admit(second + at, 'a').admitted);
    expect(admitted).to.deep.equal([true, true, true]);
    expect(windows.admit(second + 750, 'a')).to.deep.equal({ admitted: false, retryAfterMs: 250 });
  });

  it('admits again in the next second', () => {
    const windows = new PartnerWindows(limits);
    for (let i = 0; i < 4; i++) windows.admit(second + 900 + i, 'a');
    expect(windows.admit(second + 1000, 'a').admitted).to.equal(true);
  });

  it('slows each admitted request by the admitted requests still in flight', () => {
    const windows = new PartnerWindows({ ...limits, rate: 10 });
    const latencies = [0, 1, 2].map(() => windows.admit(second, 'a'));
    windows.answered();
    const after = windows.admit(second, 'a');
    expect(latencies.map((l) => (l.admitted ? l.latencyMs : -1))).to.deep.equal([50, 52, 54]);
    expect(after).to.deep.equal({ admitted: true, latencyMs: 54 });
  });

  it('counts each second apart: accepted, refused, and accepted per tenant, until reset', () => {
    const windows = new PartnerWindows(limits);
    for (const [at, tenant] of [[0, 'a'], [1, 'b'], [2, 'a'], [3, 'b'], [1000, 'b']] as const) windows.admit(second + at, tenant);
    expect([...windows.seconds()]).to.deep.equal([
      [second / 1000, { accepted: 3, limited: 1, busy: 0, peak: 3, byTenant: { a: 2, b: 1 } }],
      [second / 1000 + 1, { accepted: 1, limited: 0, busy: 0, peak: 4, byTenant: { b: 1 } }],
    ]);
    windows.reset();
    expect(windows.seconds().size).to.equal(0);
  });

  it('refuses above its own concurrency limit, counted apart, and admits again once one is answered', () => {
    const windows = new PartnerWindows({ ...limits, rate: 10, maxInFlight: 2 });
    const first = [0, 1, 2].map((at) => windows.admit(second + at, 'a').admitted);
    windows.answered();
    const again = windows.admit(second + 3, 'a').admitted;
    expect(first).to.deep.equal([true, true, false]);
    expect(again).to.equal(true);
    expect(windows.seconds().get(second / 1000)).to.deep.include({ accepted: 3, limited: 1, busy: 1, peak: 2 });
  });

  it('refuses a rate that is not a whole number from 1, naming it', () => {
    expect(() => new PartnerWindows({ ...limits, rate: 0.5 })).to.throw(TypeError, /rate must be a whole number/);
  });
});
