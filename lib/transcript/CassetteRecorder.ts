// Records a run into a cassette, around the runner rather than inside it: a provider that
// keeps the run's requests and replies, a copy of the tools that keeps each call's deltas and
// notes it was dispatched, and the run's events for every call's outcome, keyed by turn and index.
import { defer, from, isObservable, tap, type Observable } from 'rxjs';
import { toErrorInfo } from '../errors.js';
import {
  AgentRunner,
  isStreamPart,
  WrittenTurn,
  type Agent,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type ModelStreamPart,
  type RunEvent,
  type RunOptions,
  type RunInput,
  type RunResult,
  type RunnerActivity,
} from '../runner/index.js';
import { ownCopy, ToolRegistry, type ToolContext } from '../tools/index.js';
import { CASSETTE_VERSION, type Cassette, type RecordedCall, type RecordedDelta, type RecordedEnding, type RecordedReply, type RecordedTurn } from './Cassette.js';
import { fingerprint } from './fingerprint.js';
import { rebodied } from './rebodied.js';
import { recordedMessage, recordedRequest } from './recordedRequest.js';
import { redactionKeys, scrubbed, scrubbedJsonText, scrubString, type Scrub } from './scrub.js';
import { acceptedResponse } from './transcript.js';
import { stoppedByItsBatch } from '../stopClass.js';

export interface CassetteRecorderOptions {
  /** The provider to record: usually a real one, once. */
  readonly provider: ModelProvider;
  /** The tools, with their real bodies. */
  readonly tools: ToolRegistry;
  /** Keys whose values are replaced by `"[redacted]"` wherever they appear, besides DEFAULT_REDACT (case-insensitive). */
  readonly redact?: readonly string[];
}

/** A recorded run: what the runner gave back, and the cassette of it. */
export interface Recording {
  readonly result: RunResult;
  readonly cassette: Cassette;
}

/** One request of the recorded run, and what came back. */
interface Exchange {
  readonly request: ModelRequest;
  reply: { response: unknown } | { error: { name: string; message: string } } | { stopped: true };
}

/** What one recording collects while the run goes. */
interface Session {
  readonly agent: Agent;
  /** The recorded run's requests in order: exchange k is turn k + 1. */
  readonly exchanges: Exchange[];
  /** Nested runs alive now; a request made while one is alive is the nested run's, not ours. */
  readonly nested: Set<string>;
  /** Every dispatch, by `runId/turn/callId`, with the deltas it recorded in order. */
  readonly dispatches: Map<string, RecordedDelta[]>;
}

const noResponse = { name: 'Error', message: 'the provider completed without a response' };

function ending(events: readonly RunEvent[]): RecordedEnding {
  const last = events[events.length - 1];
  if (last?.type === 'RUN_COMPLETED' || last?.type === 'RUN_FAILED' || last?.type === 'RUN_CANCELLED') return last;
  return { type: 'RUN_FAILED', error: { name: 'RunError', message: 'the run ended without a final event' } };
}

function reply(exchange: Exchange, scrub: Scrub): RecordedReply {
  const { reply: raw } = exchange;
  if ('stopped' in raw) return raw;
  if ('error' in raw) return { error: scrubbed(raw.error, scrub) as { name: string; message: string } };
  const accepted = acceptedResponse(raw.response);
  // A reply the runner could not decode is kept as it came, so a replay fails the same way.
  if (accepted === undefined) return { response: scrubbed(raw.response, scrub) ?? null };
  const { text, toolCalls, usage, finishReason } = accepted;
  return {
    response: {
      ...(text !== undefined ? { text: scrubString(text, scrub) } : {}),
      ...(toolCalls !== undefined
        ? {
            toolCalls: toolCalls.map((call) => ({
              id: call.id,
              name: call.name,
              arguments: typeof call.arguments === 'string' ? scrubbedJsonText(call.arguments, scrub, false) : scrubbed(call.arguments, scrub),
            })),
          }
        : {}),
      ...(usage !== undefined ? { usage } : {}),
      ...(finishReason !== undefined ? { finishReason } : {}),
    },
  };
}

function calls(events: readonly RunEvent[], turn: number, runId: string, session: Session, scrub: Scrub): RecordedCall[] {
  const recorded: RecordedCall[] = [];
  // A call id the model repeated in one response is dispatched once at most: the first time.
  const claimed = new Set<string>();
  for (const event of events) {
    if ((event.type !== 'TOOL_RESULT' && event.type !== 'TOOL_ERROR' && event.type !== 'TOOL_INDETERMINATE') || event.turn !== turn) continue;
    const { callId, tool } = event;
    const key = `${runId}/${turn}/${callId}`;
    const dispatched = !claimed.has(callId) && session.dispatches.has(key);
    if (dispatched) claimed.add(callId);
    const base = { index: recorded.length, callId, tool, dispatched };
    if (event.type === 'TOOL_RESULT') {
      const deltas = (dispatched ? session.dispatches.get(key)! : []).map((delta) => scrubbed(delta, scrub) as RecordedDelta);
      const result = scrubbed(event.result, scrub);
      recorded.push({ ...base, stopped: false, kind: 'result', ...(result !== undefined ? { result } : {}), ...(deltas.length > 0 ? { deltas } : {}) });
    } else if (event.type === 'TOOL_ERROR') {
      const error = scrubbed(event.error, scrub) as { name: string; message: string };
      recorded.push({ ...base, stopped: event.error.name === 'CallStoppedError', kind: 'error', error });
    } else {
      // Stopped by its batch (a cancel, a deadline, FAIL_RUN): the replay waits for that stop. Cut
      // off alone (its own request interrupted, its lease lost): the replay ends it the same way.
      const byItsBatch = stoppedByItsBatch(tool, event.message);
      recorded.push({ ...base, stopped: byItsBatch, kind: 'indeterminate', message: scrubString(event.message, scrub) });
    }
  }
  return recorded;
}

/**
 * Records a run into a cassette. Build the runner with the recorder's `provider` and `tools`
 * (they forward to yours), then `record` a run: the cassette keys every model exchange by turn
 * and every tool outcome by turn and call index, so it does not depend on which call finished
 * first. Nested runs started from a tool body are not recorded: a replay answers the tool
 * call itself. One recording at a time per recorder.
 *
 * ## Example
 * ```ts
 * const recorder = new CassetteRecorder({ provider: realProvider, tools, redact: ['accountNumber'] });
 * const runner = new AgentRunner({ provider: recorder.provider, tools: recorder.tools, concurrency });
 * const { result, cassette } = await recorder.record(runner, planner, 'Four nights in Lisbon', { tenant: 'acme' });
 * await writeFile('spec/cassettes/lisbon.json', stringifyCassette(cassette));
 * ```
 */
export class CassetteRecorder {
  /** Forwards to your provider, and keeps the recorded run's requests and replies. */
  readonly provider: ModelProvider;
  /** Your tools, the same declarations; each body is yours, watched for its deltas. */
  readonly tools: ToolRegistry;
  private readonly inner: ModelProvider;
  private readonly redact: readonly string[];
  // The recording under way, if any.
  private session: Session | undefined;

  constructor(options: CassetteRecorderOptions) {
    if (options === null || typeof options !== 'object') throw new TypeError('CassetteRecorder expects { provider, tools, redact? }');
    const { provider, tools, redact = [] } = options;
    if (provider === null || typeof provider !== 'object' || typeof provider.respond !== 'function') {
      throw new TypeError('CassetteRecorder: provider must have a respond(request, signal) method');
    }
    if (!(tools instanceof ToolRegistry)) throw new TypeError('CassetteRecorder: tools must be a ToolRegistry');
    if (!Array.isArray(redact) || redact.some((key) => typeof key !== 'string')) throw new TypeError('CassetteRecorder: redact must be an array of key names');
    this.inner = provider;
    this.redact = redactionKeys(redact);
    this.provider = { respond: (request, signal) => this.respond(request, signal) };
    this.tools = rebodied(tools, (_declaration, body) => (args, ctx) => this.invoke(body, args, ctx));
  }

  /**
   * Runs `agent` on `runner` (built with this recorder's provider and tools) and records it.
   * Resolves for every ending of the run, as `runner.run` does; rejects only for misuse.
   */
  async record(runner: AgentRunner, agent: Agent, input: RunInput, options: RunOptions = {}): Promise<Recording> {
    if (!(runner instanceof AgentRunner) || runner.provider !== this.provider || runner.tools !== this.tools) {
      throw new TypeError('CassetteRecorder.record: build the runner with the recorder\'s provider and tools: new AgentRunner({ provider: recorder.provider, tools: recorder.tools, ... })');
    }
    if (this.session !== undefined) throw new Error('CassetteRecorder records one run at a time: wait for the recording under way, or use a second recorder');
    const session: Session = { agent, exchanges: [], nested: new Set(), dispatches: new Map() };
    this.session = session;
    const watching = runner.activity$.subscribe((activity: RunnerActivity) => {
      if (activity.type === 'run-started' && activity.parent !== undefined) session.nested.add(activity.runId);
      if (activity.type === 'run-ended') session.nested.delete(activity.runId);
    });
    let result: RunResult;
    try {
      result = await runner.run(agent, input, options);
    } finally {
      watching.unsubscribe();
      this.session = undefined;
    }
    return { result, cassette: this.cassette(session, runner.tools, options, result) };
  }

  // The run's input is read from its RUN_STARTED, as the runner checked and copied it.
  private cassette(session: Session, tools: ToolRegistry, options: RunOptions, result: RunResult): Cassette {
    const started = result.events.find((event) => event.type === 'RUN_STARTED');
    const runId = started?.type === 'RUN_STARTED' ? started.runId : '';
    const input = started?.type === 'RUN_STARTED' ? started.input : '';
    const history = started?.type === 'RUN_STARTED' ? started.history : undefined;
    const scrub: Scrub = { redact: new Set(this.redact), runId };
    const turns = session.exchanges.map(
      (exchange, i): RecordedTurn => ({
        turn: i + 1,
        request: recordedRequest(exchange.request, scrub),
        reply: reply(exchange, scrub),
        calls: calls(result.events, i + 1, runId, session, scrub),
      }),
    );
    return {
      version: CASSETTE_VERSION,
      fingerprint: fingerprint(session.agent, tools),
      redact: this.redact,
      run: {
        agent: session.agent.name,
        tenant: options.tenant ?? 'default',
        input: scrubString(input, scrub),
        ...(history !== undefined ? { history: history.map((message) => recordedMessage(message, scrub)) } : {}),
        state: (scrubbed(options.state ?? {}, scrub) ?? {}) as Readonly<Record<string, unknown>>,
        ...(options.maxTurns !== undefined ? { maxTurns: options.maxTurns } : {}),
      },
      turns,
      ending: scrubbed(ending(result.events), scrub) as RecordedEnding,
    };
  }

  private respond(request: ModelRequest, signal: AbortSignal): ReturnType<ModelProvider['respond']> | Observable<ModelResponse | ModelStreamPart> {
    const session = this.session;
    // The recorded run asks only between batches, so while a nested run is alive the request is the nested run's.
    if (session === undefined || session.nested.size > 0 || request.agent !== session.agent.name) return this.inner.respond(request, signal);
    // Stays `stopped` unless the provider answers before the run stops.
    const exchange: Exchange = { request, reply: { stopped: true } };
    session.exchanges.push(exchange);
    // Set once the reply is decided; whatever the provider sends after it is not recorded.
    let answered = false;
    // A streamed turn, kept as the whole response it amounts to: a replay answers it whole, with the same transcript.
    let writing: WrittenTurn | undefined;
    return defer(() => {
      const produced = this.inner.respond(request, signal);
      return isObservable(produced) ? produced : from(produced);
    }).pipe(
      tap({
        next: (value) => {
          if (answered) return;
          if (writing === undefined && !isStreamPart(value)) {
            answered = true;
            exchange.reply = { response: value };
            return;
          }
          writing ??= new WrittenTurn();
          try {
            writing.read(value);
          } catch (error) {
            // The runner fails the run with this; the replay fails it the same way.
            answered = true;
            exchange.reply = { error: { name: 'StreamPartError', message: `the reply does not decode: ${toErrorInfo(error).message}` } };
          }
        },
        error: (error: unknown) => {
          if (answered) return;
          answered = true;
          exchange.reply = { error: toErrorInfo(error) };
        },
        complete: () => {
          if (answered) return;
          answered = true;
          exchange.reply = writing === undefined ? { error: noResponse } : { response: writing.response().response };
        },
      }),
    );
  }

  private invoke(body: (args: unknown, ctx: ToolContext) => unknown, args: unknown, ctx: ToolContext): unknown {
    const session = this.session;
    if (session === undefined) return body(args, ctx);
    // The recorded run's calls run between its requests: the turn is the number of requests made.
    const key = `${ctx.runId}/${session.exchanges.length}/${ctx.callId}`;
    const deltas: RecordedDelta[] = session.dispatches.get(key) ?? [];
    session.dispatches.set(key, deltas);
    const record = (delta: RecordedDelta): void => {
      ctx.record(delta);
      // A copy all the way down (the runner took the delta, so it is JSON-like): a body that
      // goes on changing its object after recording it does not change the cassette.
      deltas.push(ownCopy(delta) as RecordedDelta);
    };
    return body(args, { ...ctx, record });
  }
}
