// The fleet lanes' metrics through the real OpenTelemetry SDK (a MeterProvider whose reader
// exports to memory): waits, grants, holders and waiters per lane, losses by reason, requests sent
// again and time unreachable, under their documented names and units; and a meter that throws,
// wherever it throws, changes nothing a store or a run does.
import { expect } from 'chai';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader, type MetricData } from '@opentelemetry/sdk-metrics';
import { Agent, AgentRunner, ConcurrencyConfig, ScriptedProvider, ToolRegistry } from '../../../lib/index.js';
import { LaneTable, RedisLaneStore, type LaneStoreNotice } from '../../../lib/lanes/index.js';
import { LaneMetricNames, type LaneMeter } from '../../../lib/lanes/redis/metrics.js';
import { REDIS_HOST, RedisProxy, redisFixture, sleep, until } from './server.js';
import { createClient } from 'redis';

// A meter of the real SDK, read on demand.
function sdkMeter() {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const provider = new MeterProvider({ readers: [reader] });
  return {
    meter: provider.getMeter('agent-lanes-spec'),
    provider,
    /** The metrics as collected now, by name. */
    async collect(): Promise<Map<string, MetricData>> {
      exporter.reset();
      await reader.forceFlush();
      const byName = new Map<string, MetricData>();
      for (const resource of exporter.getMetrics()) for (const scope of resource.scopeMetrics) for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric);
      return byName;
    },
  };
}

// The value of a metric's point for a lane (a sum or a gauge), or a histogram's count and sum.
function pointOf(metrics: Map<string, MetricData>, name: string, attributes: Record<string, string>): unknown {
  const metric = metrics.get(name);
  const point = metric?.dataPoints.find((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v));
  if (point === undefined) return undefined;
  const value = point.value as number | { count: number; sum?: number };
  return typeof value === 'number' ? value : { count: value.count, sum: value.sum };
}

const lane = (key: string) => ({ [LaneMetricNames.KEY]: key });

describe('RedisLaneStore metrics', function () {
  this.timeout(30_000);
  const redis = redisFixture('metrics');
  const { prefix, closers } = redis;
  const store = (meter: LaneMeter | undefined, options: Partial<ConstructorParameters<typeof RedisLaneStore>[0]> = {}) => redis.store({ meter, ...options });
  const pipeline = () => {
    const made = sdkMeter();
    closers.push(() => made.provider.shutdown());
    return made;
  };

  it('records the wait of each grant (seconds), grants, and holders and waiters per lane, under the documented names and units', async () => {
    const { meter, collect } = pipeline();
    const lanes = store(meter);
    const first = lanes.enter('tool:metered', 1, () => undefined);
    const second = lanes.enter('tool:metered', 1, () => undefined, 'acme');
    await lanes.idle();
    let metrics = await collect();
    expect(pointOf(metrics, LaneMetricNames.HOLDERS, lane('tool:metered'))).to.equal(1);
    expect(pointOf(metrics, LaneMetricNames.WAITERS, lane('tool:metered'))).to.equal(1);
    expect(pointOf(metrics, LaneMetricNames.GRANTS, lane('tool:metered'))).to.equal(1);
    expect((pointOf(metrics, LaneMetricNames.WAIT, lane('tool:metered')) as { count: number }).count).to.equal(1);
    await sleep(60);
    first.leave();
    await until(() => second.holding, 'the second grant');
    metrics = await collect();
    expect(pointOf(metrics, LaneMetricNames.GRANTS, lane('tool:metered'))).to.equal(2);
    expect(pointOf(metrics, LaneMetricNames.HOLDERS, lane('tool:metered'))).to.equal(1);
    expect(pointOf(metrics, LaneMetricNames.WAITERS, lane('tool:metered'))).to.equal(0);
    const wait = pointOf(metrics, LaneMetricNames.WAIT, lane('tool:metered')) as { count: number; sum: number };
    expect(wait.count).to.equal(2);
    // The second request waited for the first's leave, at least the 60 ms slept before it.
    expect(wait.sum).to.be.at.least(0.06);
    const units = Object.fromEntries([...metrics.values()].map((m) => [m.descriptor.name, m.descriptor.unit]));
    expect(units).to.include({
      [LaneMetricNames.WAIT]: 's',
      [LaneMetricNames.HOLDERS]: '{permit}',
      [LaneMetricNames.WAITERS]: '{request}',
      [LaneMetricNames.GRANTS]: '{grant}',
    });
    second.leave();
    await lanes.idle();
  });

  it('counts lost leases and places by reason: a lease that ran out, and the store closed', async () => {
    const { meter, collect } = pipeline();
    const lanes = store(meter);
    const lost: Error[] = [];
    lanes.enter('tool:lapsed', 1, { granted: () => undefined, lost: (error: Error) => lost.push(error) });
    await lanes.idle();
    await redis.client.del(`${prefix}{tool:lapsed}:h`);
    await until(() => lost.length === 1, 'the lease to be reported lost');
    const closing = store(meter);
    closing.enter('tool:closing', 1, () => undefined);
    closing.enter('tool:closing', 1, () => undefined);
    await closing.idle();
    await closing.close();
    const metrics = await collect();
    const reasons = (metrics.get(LaneMetricNames.LOST)?.dataPoints ?? []).map((p) => [p.attributes[LaneMetricNames.KEY], p.attributes[LaneMetricNames.REASON], p.value]);
    expect(reasons).to.have.deep.members([
      ['tool:lapsed', 'lease_expired', 1],
      ['tool:closing', 'closed', 2],
    ]);
    expect(metrics.get(LaneMetricNames.LOST)?.descriptor.unit).to.equal('{request}');
  });

  it('counts requests sent again after a reset connection, and the seconds Redis counted as unreachable', async () => {
    const { meter, collect } = pipeline();
    const proxy = new RedisProxy();
    closers.push(() => proxy.close());
    const flaky = createClient({ socket: { host: REDIS_HOST, port: await proxy.listen(), reconnectStrategy: () => 20 } });
    flaky.on('error', () => undefined);
    await flaky.connect();
    closers.push(async () => (flaky.isOpen ? flaky.close() : undefined));
    const lanes = store(meter, { client: flaky, leaseSeconds: 3, timeoutSeconds: 0.75 });
    const notices: LaneStoreNotice[] = [];
    lanes.notices$.subscribe((notice) => notices.push(notice));
    proxy.hold();
    const permit = lanes.enter('tool:flaky', 1, () => undefined);
    await until(() => proxy.held > 0, 'the request to be in flight');
    proxy.cut();
    proxy.pass();
    await until(() => permit.holding, 'the grant after the reset');
    permit.leave();
    await lanes.idle();
    let metrics = await collect();
    expect(pointOf(metrics, LaneMetricNames.RETRIES, lane('tool:flaky'))).to.be.at.least(1);
    expect(metrics.has(LaneMetricNames.UNREACHABLE) ? metrics.get(LaneMetricNames.UNREACHABLE)!.dataPoints.length : 0).to.equal(0);
    // Held past the timeout: unreachable, until it answers again.
    proxy.hold();
    lanes.enter('tool:flaky', 1, { granted: () => undefined, lost: () => undefined });
    await until(() => notices.length === 1, 'Redis to count as unreachable');
    await sleep(200);
    proxy.pass();
    proxy.cut();
    await until(() => notices.length === 2, 'Redis to answer again');
    metrics = await collect();
    const unreachable = metrics.get(LaneMetricNames.UNREACHABLE)!;
    expect(unreachable.descriptor.unit).to.equal('s');
    expect(unreachable.dataPoints[0]!.value).to.be.at.least(0.2);
  });

  it('records the same metrics for the in-process LaneTable when it is given a meter', async () => {
    const { meter, collect } = pipeline();
    const table = new LaneTable({ meter });
    const granted: string[] = [];
    const first = table.enter('tool:local', 1, () => granted.push('first'));
    const second = table.enter('tool:local', 1, { granted: () => granted.push('second') });
    let metrics = await collect();
    expect(pointOf(metrics, LaneMetricNames.HOLDERS, lane('tool:local'))).to.equal(1);
    expect(pointOf(metrics, LaneMetricNames.WAITERS, lane('tool:local'))).to.equal(1);
    await sleep(30);
    first.leave();
    expect(granted).to.deep.equal(['first', 'second']);
    metrics = await collect();
    expect(pointOf(metrics, LaneMetricNames.GRANTS, lane('tool:local'))).to.equal(2);
    const wait = pointOf(metrics, LaneMetricNames.WAIT, lane('tool:local')) as { count: number; sum: number };
    expect(wait.count).to.equal(2);
    expect(wait.sum).to.be.at.least(0.03);
    second.leave();
    expect(table.size).to.equal(0);
  });

  describe('a meter that throws', () => {
    const boom = (): never => {
      throw new Error('the meter is broken');
    };
    const instrument = { record: boom, add: boom, addCallback: boom, removeCallback: boom };
    const observeThrows = {
      createHistogram: () => ({ record: () => undefined }),
      createCounter: () => ({ add: () => undefined }),
      createObservableGauge: () => ({ addCallback: () => undefined, removeCallback: () => undefined }),
    };
    const meters: Array<[string, LaneMeter]> = [
      ['when an instrument is made', { createHistogram: boom, createCounter: boom, createObservableGauge: boom }],
      ['when a value is recorded or a callback added', { createHistogram: () => instrument, createCounter: () => instrument, createObservableGauge: () => instrument }],
      ['only when a grant is counted', { ...observeThrows, createCounter: (name: string) => ({ add: name === LaneMetricNames.GRANTS ? boom : () => undefined }) }],
    ];

    for (const [when, meter] of meters) {
      it(`changes nothing a run does, ${when}`, async () => {
        const runWith = async (given: LaneMeter | undefined, inProcess = false) => {
          const lanes = inProcess ? new LaneTable({ meter: given }) : store(given);
          const tools = new ToolRegistry().register({ name: 'search' }, async () => {
            await sleep(2);
            return 'ok';
          });
          const turn = { toolCalls: Array.from({ length: 6 }, (_, i) => ({ id: `c${i}`, name: 'search', arguments: {} })) };
          const runner = new AgentRunner({ provider: new ScriptedProvider([turn, { text: 'done' }]), tools, concurrency: new ConcurrencyConfig({ perTool: { search: 2 } }), lanes });
          const result = await runner.run(new Agent({ name: 'metered', instructions: 'work', model: 'scripted' }), 'go', { tenant: 'acme' });
          return { status: result.status, output: result.output, events: result.events.map((e) => e.type) };
        };
        expect(await runWith(meter)).to.deep.equal(await runWith(undefined));
        expect(await runWith(meter, true), 'on the in-process LaneTable').to.deep.equal(await runWith(undefined, true));
      });
    }

    it('changes nothing a store does when its observable callback throws as the SDK collects', async () => {
      const { meter, collect } = pipeline();
      let observing = 0;
      const wrapped: LaneMeter = {
        createHistogram: (name, options) => meter.createHistogram(name, options),
        createCounter: (name, options) => meter.createCounter(name, options),
        createObservableGauge: (name, options) => {
          const gauge = meter.createObservableGauge(name, options);
          return {
            addCallback: (callback) => gauge.addCallback(() => callback({ observe: () => (observing++, boom()) })),
            removeCallback: () => undefined,
          };
        },
      };
      const lanes = store(wrapped);
      const permit = lanes.enter('tool:observed', 1, () => undefined);
      await lanes.idle();
      await collect();
      expect(observing).to.be.at.least(1);
      expect(permit.holding).to.equal(true);
      permit.leave();
      await lanes.idle();
      const again = lanes.enter('tool:observed', 1, () => undefined);
      await lanes.idle();
      expect(again.holding).to.equal(true);
      again.leave();
    });
  });
});
