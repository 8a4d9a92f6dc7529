// A tracer that throws never changes what a run does: whichever method throws (startSpan, a
// span's setAttribute(s), addEvent, setStatus, end, a span processor called at once), for every
// span or only one kind, the run ends exactly as it does without a tracer, nothing is thrown
// later on a timer, nothing is blamed on the model, and the failure is told once on activity$.
// Against sdk-trace-base's real tracer, wrapped so that the chosen method throws.
import { expect } from 'chai';
import type { Context, Span, SpanOptions, Tracer } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { config, Observable } from 'rxjs';
import {
  Agent,
  AgentRunner,
  ScriptedProvider,
  ToolRegistry,
  type ModelStreamPart,
  type RunEvent,
  type RunnerActivity,
  type RunResult,
  type ToolCall,
} from '../../lib/index.js';

const ask = (id: string, name: string, args: unknown = {}): ToolCall => ({ id, name, arguments: args as ToolCall['arguments'] });
const planner = new Agent({ name: 'planner', instructions: '', model: 'big-model', tools: ['lookup', 'broken', 'delegate'] });
const researcher = new Agent({ name: 'researcher', instructions: '', model: 'small-model', tools: ['lookup'] });

type Method = 'startSpan' | 'setAttribute' | 'setAttributes' | 'addEvent' | 'setStatus' | 'end';
type Kind = 'every span' | 'chat' | 'execute_tool' | 'invoke_agent';

/** sdk-trace-base's tracer, whose `method` throws for the spans of `kind`. */
function throwing(inner: Tracer, method: Method, kind: Kind): Tracer {
  const hit = (name: string): boolean => kind === 'every span' || name.startsWith(`${kind} `);
  const fault = (): never => {
    throw new Error(`the tracer broke in ${method}`);
  };
  return {
    startSpan(name: string, options?: SpanOptions, context?: Context): Span {
      if (method === 'startSpan' && hit(name)) fault();
      const span = inner.startSpan(name, options, context);
      if (method === 'startSpan' || !hit(name)) return span;
      return new Proxy(span, {
        get(target, property) {
          if (property === method) return fault;
          const value: unknown = Reflect.get(target, property, target);
          return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
      });
    },
    startActiveSpan: inner.startActiveSpan.bind(inner) as Tracer['startActiveSpan'],
  };
}

// A streamed first turn (two calls, one of which fails), a nested run, then the answer.
function runnerWith(tracer: Tracer | undefined): AgentRunner {
  const tools = new ToolRegistry()
    .register({ name: 'lookup', description: 'Looks a city up' }, () => 'found')
    .register({ name: 'broken' }, () => {
      throw new TypeError('no');
    })
    .register({ name: 'delegate' }, async (_args, ctx) => (await ctx.runAgent(researcher, 'find')).output);
  const streamed = (): Observable<ModelStreamPart> =>
    new Observable<ModelStreamPart>((subscriber) => {
      subscriber.next({ type: 'tool-call', ...ask('c1', 'lookup') });
      subscriber.next({ type: 'tool-call', ...ask('c2', 'broken') });
      subscriber.next({ type: 'usage', inputTokens: 10, outputTokens: 2 });
      subscriber.next({ type: 'finish', finishReason: 'tool-calls' });
      subscriber.complete();
    });
  const provider = new ScriptedProvider({
    planner: [streamed, { toolCalls: [ask('d1', 'delegate')] }, { text: 'done' }],
    researcher: [{ toolCalls: [ask('r1', 'lookup')] }, { text: 'found it' }],
  });
  return new AgentRunner({ provider, tools, ...(tracer === undefined ? {} : { tracer }) });
}

// A run's result without what differs from run to run (its id).
function comparable(result: RunResult): unknown {
  return { ...result, events: result.events.map((event: RunEvent) => (event.type === 'RUN_STARTED' ? { ...event, runId: '' } : event)) };
}

/** The run, and what was told on activity$, and what was reported as nobody's (RxJS's unhandled errors). */
type Notice = Extract<RunnerActivity, { type: 'tracing-failed' }>;

async function observed(runner: AgentRunner): Promise<{ result: RunResult; notices: Notice[]; unhandled: unknown[] }> {
  const unhandled: unknown[] = [];
  const before = config.onUnhandledError;
  config.onUnhandledError = (error) => unhandled.push(error);
  const notices: Notice[] = [];
  const watching = runner.activity$.subscribe((activity) => {
    if (activity.type === 'tracing-failed') notices.push(activity);
  });
  try {
    const result = await runner.run(planner, 'go');
    // Anything thrown on a timer would come now.
    await new Promise((resolve) => setTimeout(resolve, 5));
    return { result, notices, unhandled };
  } finally {
    watching.unsubscribe();
    config.onUnhandledError = before;
  }
}

function recording(processors: SpanProcessor[] = []) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter), ...processors] });
  return { exporter, tracer: provider.getTracer('faults-spec') };
}

describe('A tracer that throws', () => {
  let untraced: unknown;
  before(async () => {
    const { result } = await observed(runnerWith(undefined));
    expect(result.status).to.equal('completed');
    expect(result.output).to.equal('done');
    untraced = comparable(result);
  });

  const methods: Method[] = ['startSpan', 'setAttribute', 'setAttributes', 'addEvent', 'setStatus', 'end'];
  const kinds: Kind[] = ['every span', 'chat', 'execute_tool', 'invoke_agent'];
  for (const method of methods) {
    for (const kind of kinds) {
      it(`in ${method}, for ${kind}: the run ends as it does untraced, and the failure is told once`, async () => {
        const { tracer } = recording();
        const { result, notices, unhandled } = await observed(runnerWith(throwing(tracer, method, kind)));
        expect(comparable(result)).to.deep.equal(untraced);
        expect(unhandled).to.deep.equal([]);
        // Each run whose tracer threw says so once; a method the spans of this kind never call throws nothing.
        const runs = new Set(notices.map((notice) => notice.runId));
        expect(runs.size).to.equal(notices.length);
        for (const notice of notices) expect(notice).to.deep.include({ type: 'tracing-failed', error: { name: 'Error', message: `the tracer broke in ${method}` } });
      });
    }
  }

  const always: Array<[Method, Kind]> = [
    ['startSpan', 'every span'],
    ['startSpan', 'chat'],
    ['end', 'chat'],
    ['end', 'execute_tool'],
    ['startSpan', 'invoke_agent'],
    ['addEvent', 'execute_tool'],
    ['setAttribute', 'execute_tool'],
    ['setAttributes', 'chat'],
  ];
  for (const [method, kind] of always) {
    it(`in ${method}, for ${kind}: says so on activity$, and starts no more spans for that run`, async () => {
      // Span starts and notices, in the order they came.
      const seen: string[] = [];
      const starts: SpanProcessor = {
        onStart: (span) => void seen.push(`start ${(span as unknown as ReadableSpan).name}`),
        onEnd: () => undefined,
        forceFlush: () => Promise.resolve(),
        shutdown: () => Promise.resolve(),
      };
      const { tracer } = recording([starts]);
      const runner = runnerWith(throwing(tracer, method, kind));
      const watching = runner.activity$.subscribe((activity) => {
        if (activity.type === 'tracing-failed') seen.push(`notice ${activity.runId}`);
      });
      const result = await runner.run(planner, 'go');
      watching.unsubscribe();
      expect(result.status).to.equal('completed');
      const runId = (result.events[0] as { runId: string }).runId;
      const told = seen.indexOf(`notice ${runId}`);
      expect(told, 'the planner run says its tracing stopped').to.be.at.least(0);
      expect(seen.filter((entry) => entry === `notice ${runId}`)).to.have.length(1);
      // The planner's own spans (its chat spans, its broken and delegate calls) start no more after it.
      const plannerSpans = ['start chat big-model', 'start execute_tool broken', 'start execute_tool delegate', 'start invoke_agent planner'];
      expect(seen.slice(told).filter((entry) => plannerSpans.includes(entry))).to.deep.equal([]);
    });
  }

  it('never blames the model: a chat span that throws at its start is not RUN_FAILED "model provider failed"', async () => {
    const { tracer } = recording();
    const { result } = await observed(runnerWith(throwing(tracer, 'startSpan', 'chat')));
    expect(result.status).to.equal('completed');
    expect(result.events.some((event) => event.type === 'RUN_FAILED')).to.equal(false);
  });

  it('a span processor that throws, at a span\'s start or end, changes nothing', async () => {
    for (const where of ['onStart', 'onEnd'] as const) {
      const breaking: SpanProcessor = {
        onStart: () => {
          if (where === 'onStart') throw new Error('processor broke');
        },
        onEnd: () => {
          if (where === 'onEnd') throw new Error('processor broke');
        },
        forceFlush: () => Promise.resolve(),
        shutdown: () => Promise.resolve(),
      };
      const { tracer } = recording([breaking]);
      const { result, notices, unhandled } = await observed(runnerWith(tracer));
      expect(comparable(result), where).to.deep.equal(untraced);
      expect(unhandled, where).to.deep.equal([]);
      expect(notices.length, where).to.be.greaterThan(0);
      expect(notices[0]).to.deep.include({ error: { name: 'Error', message: 'processor broke' } });
    }
  });

  it('an exporter that throws when handed a span, called at once by SimpleSpanProcessor, changes nothing', async () => {
    const exporter = new InMemorySpanExporter();
    exporter.export = () => {
      throw new Error('exporter broke');
    };
    const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).getTracer('faults-spec');
    const { result, unhandled } = await observed(runnerWith(tracer));
    expect(comparable(result)).to.deep.equal(untraced);
    expect(unhandled).to.deep.equal([]);
  });

  it('with nobody watching activity$, tells it as a process warning, once per run', async () => {
    const { tracer } = recording();
    const warnings: Error[] = [];
    const listen = (warning: Error): void => {
      if (warning.name === 'TracingFailedWarning') warnings.push(warning);
    };
    process.on('warning', listen);
    try {
      const result = await runnerWith(throwing(tracer, 'startSpan', 'invoke_agent')).run(planner, 'go');
      expect(result.status).to.equal('completed');
      await new Promise((resolve) => setImmediate(resolve));
      // The planner's run and its nested run: each told once.
      expect(warnings.map((warning) => warning.message.replace(/run [0-9a-f-]+/, 'run <id>'))).to.deep.equal([
        'tracing stopped for run <id>: the tracer threw Error: the tracer broke in startSpan',
        'tracing stopped for run <id>: the tracer threw Error: the tracer broke in startSpan',
      ]);
    } finally {
      process.off('warning', listen);
    }
  });

  it('a later run on the same runner is traced again', async () => {
    const { exporter, tracer } = recording();
    let broken = true;
    const once: Tracer = {
      startSpan: (name: string, options?: SpanOptions, context?: Context) => {
        if (broken && name === 'invoke_agent planner') {
          broken = false;
          throw new Error('once');
        }
        return tracer.startSpan(name, options, context);
      },
      startActiveSpan: tracer.startActiveSpan.bind(tracer) as Tracer['startActiveSpan'],
    };
    const provider = { respond: (request: { messages: readonly unknown[] }) => Promise.resolve(request.messages.length === 1 ? { toolCalls: [ask('c1', 'lookup')] } : { text: 'done' }) };
    const runner = new AgentRunner({ provider, tools: new ToolRegistry().register({ name: 'lookup' }, () => 1), tracer: once });
    const notices: RunnerActivity[] = [];
    const watching = runner.activity$.subscribe((activity) => void (activity.type === 'tracing-failed' && notices.push(activity)));
    const agent = new Agent({ name: 'planner', instructions: '', model: 'big-model' });
    expect((await runner.run(agent, 'go')).status).to.equal('completed');
    expect(notices).to.have.length(1);
    expect(exporter.getFinishedSpans()).to.deep.equal([]);
    expect((await runner.run(agent, 'go')).status).to.equal('completed');
    watching.unsubscribe();
    expect(notices).to.have.length(1);
    expect(exporter.getFinishedSpans().map((span: ReadableSpan) => span.name)).to.have.members(['invoke_agent planner', 'chat big-model', 'execute_tool lookup', 'chat big-model']);
  });
});

