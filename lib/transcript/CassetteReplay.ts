// Replays a cassette: a provider that answers each turn's request from it (after checking
// the request is the recorded one) and tools whose bodies answer each call from it, so a run
// replays with no network and no tool bodies, and fails loudly where it leaves the recording.
import { asyncScheduler, Observable, of, throwError, type SchedulerLike } from 'rxjs';
import { cancelledWhy } from '../batch/index.js';
import { canonicalJson } from '../canonical.js';
import { scheduleAfter } from '../time.js';
import { inFlightClause } from '../stopClass.js';
import { CallInterruptedError, type ErrorInfo } from '../errors.js';
import { Agent, AgentRunner, type ModelProvider, type ModelRequest, type ModelResponse, type RunEvent, type RunOptions, type RunResult } from '../runner/index.js';
import { ToolRegistry, type ToolContext } from '../tools/index.js';
import type { Cassette, RecordedCall } from './Cassette.js';
import { differences } from './differences.js';
import { CassetteMissError, CassetteUnusedError, FingerprintMismatchError, TranscriptMismatchError, type CassetteEntryRef } from './errors.js';
import { fingerprint, fingerprintChanges } from './fingerprint.js';
import { rebodied } from './rebodied.js';
import { recordedRequest } from './recordedRequest.js';
import type { Scrub } from './scrub.js';
import { stopPoint, type StopPoint } from './stopPoint.js';
import { acceptedResponse, cassetteTranscript, deterministicTranscript } from './transcript.js';

export interface CassetteReplayOptions {
  /** The agent to replay: it must have the cassette's fingerprint (with `tools`). */
  readonly agent: Agent;
  /** Your tools: their declarations are used, their bodies never called. */
  readonly tools: ToolRegistry;
  /**
   * How long a replayed call (or model request) the recording saw stopped in flight waits for
   * the stop to come again before failing loudly. Default 10; `false` waits for ever.
   */
  readonly waitSeconds?: number | false;
  /** For those waits and for landing a recorded stop. Default `asyncScheduler` (virtual inside `TestScheduler.run`). */
  readonly scheduler?: SchedulerLike;
}

/** An Error with the recorded name, message and facts, so the runner reports exactly what it reported when recording. */
function replayedError(info: ErrorInfo): Error {
  const { name, message, status, code, attempts } = info;
  const error = new Error(message);
  error.name = name;
  return Object.assign(error, status !== undefined ? { status } : {}, code !== undefined ? { code } : {}, attempts !== undefined ? { attempts } : {});
}

function outcomeText(call: RecordedCall): string {
  if (call.kind === 'error') return `${call.error.name}: ${call.error.message}`;
  if (call.kind === 'indeterminate') return `indeterminate: ${call.message}`;
  return 'a result';
}

function ref(turn: number, call: RecordedCall): CassetteEntryRef {
  return { turn, index: call.index, callId: call.callId, tool: call.tool };
}

/**
 * Replays a cassette. Construct it with the agent and tools of today (the fingerprint is checked
 * at once: FingerprintMismatchError says what changed), build a runner with its `provider` and
 * `tools`, and `run` it: the recorded run replays with no network and no tool bodies, and `run`
 * rejects with CassetteMissError, CassetteUnusedError or TranscriptMismatchError where the replay
 * left the recording. One replay replays one run.
 *
 * ## Example
 * ```ts
 * const replay = new CassetteReplay(parseCassette(await readFile('spec/cassettes/lisbon.json', 'utf8')), { agent: planner, tools });
 * const runner = new AgentRunner({ provider: replay.provider, tools: replay.tools, concurrency });
 * const result = await replay.run(runner);
 * result.status; // 'completed', as recorded
 * ```
 */
export class CassetteReplay {
  readonly cassette: Cassette;
  readonly agent: Agent;
  /** Answers each request from the cassette. */
  readonly provider: ModelProvider;
  /** Your tools' declarations, with bodies that answer from the cassette. */
  readonly tools: ToolRegistry;
  private readonly scrub: Scrub;
  private readonly waitMs: number | undefined;
  private readonly scheduler: SchedulerLike;
  private readonly stop: StopPoint | undefined;
  // Aborts the replayed run where the recorded one was cancelled.
  private readonly cancel = new AbortController();
  // Model requests received: the turn being replayed.
  private asked = 0;
  // Turns whose request was answered, and calls (`turn/index`) that were.
  private readonly usedTurns = new Set<number>();
  private readonly usedCalls = new Set<string>();
  // Every miss, in the order they happened; the first is the cause.
  private readonly misses: CassetteMissError[] = [];
  // Set once the run's options were handed out: one replay replays one run.
  private started = false;

  constructor(cassette: Cassette, options: CassetteReplayOptions) {
    if (options === null || typeof options !== 'object') throw new TypeError('CassetteReplay expects (cassette, { agent, tools, waitSeconds?, scheduler? })');
    const { agent, tools, waitSeconds = 10, scheduler = asyncScheduler } = options;
    if (!(agent instanceof Agent)) throw new TypeError('CassetteReplay: agent must be an Agent');
    if (!(tools instanceof ToolRegistry)) throw new TypeError('CassetteReplay: tools must be a ToolRegistry');
    if (waitSeconds !== false && !(typeof waitSeconds === 'number' && waitSeconds > 0 && Number.isFinite(waitSeconds))) {
      throw new TypeError('CassetteReplay: waitSeconds must be a positive number of seconds or false');
    }
    const current = fingerprint(agent, tools);
    if (current.sha256 !== cassette.fingerprint.sha256) {
      throw new FingerprintMismatchError(cassette.fingerprint.sha256, current.sha256, fingerprintChanges(cassette.fingerprint, current));
    }
    this.cassette = cassette;
    this.agent = agent;
    this.scrub = { redact: new Set(cassette.redact) };
    this.waitMs = waitSeconds === false ? undefined : waitSeconds * 1000;
    this.scheduler = scheduler;
    this.stop = stopPoint(cassette, scheduler);
    if (cassette.ending.type === 'RUN_CANCELLED') this.stop?.onReached(() => this.cancelAsRecorded());
    this.provider = { respond: (request) => this.respond(request) };
    this.tools = rebodied(tools, (declaration) => (_args, ctx) => this.answer(declaration.name, ctx));
  }

  /**
   * The options the recorded run was started with (tenant, state, maxTurns), and a signal that
   * aborts where the recorded run was cancelled (and when `signal` does). For driving
   * `runner.run$` yourself; then call `verify(events)`.
   */
  runOptions(signal?: AbortSignal): RunOptions {
    if (this.started) throw new Error('a CassetteReplay replays one run: make a new one for each run');
    this.started = true;
    const { tenant, state, maxTurns } = this.cassette.run;
    if (this.cassette.turns.length === 0 && this.cassette.ending.type === 'RUN_CANCELLED') this.cancelAsRecorded();
    return {
      tenant,
      state,
      signal: signal === undefined ? this.cancel.signal : AbortSignal.any([this.cancel.signal, signal]),
      ...(maxTurns !== undefined ? { maxTurns } : {}),
    };
  }

  /**
   * Replays the recorded run on `runner` (built with this replay's provider and tools). Resolves
   * with the run's result; rejects with the first CassetteMissError, else CassetteUnusedError,
   * else TranscriptMismatchError when the replayed transcript is not the recorded one.
   */
  async run(runner: AgentRunner, options: { readonly signal?: AbortSignal } = {}): Promise<RunResult> {
    if (!(runner instanceof AgentRunner) || runner.provider !== this.provider || runner.tools !== this.tools) {
      throw new TypeError('CassetteReplay.run: build the runner with the replay\'s provider and tools: new AgentRunner({ provider: replay.provider, tools: replay.tools, ... })');
    }
    const { input, history } = this.cassette.run;
    // The recorded conversation, then the message the recorded run answered.
    const given = history === undefined ? input : [...history, { role: 'user' as const, content: input }];
    const result = await runner.run(this.agent, given, this.runOptions(options.signal));
    this.verify(result.events);
    return result;
  }

  /**
   * Throws the first miss of the replay, else the entries it left unused, else (given the
   * replayed events) where its transcript differs from the recorded one.
   */
  verify(events?: readonly RunEvent[]): void {
    if (this.misses.length > 0) throw this.misses[0];
    const unused: CassetteEntryRef[] = [];
    for (const { turn, calls } of this.cassette.turns) {
      if (!this.usedTurns.has(turn)) unused.push({ turn });
      for (const call of calls) if (call.dispatched && !this.usedCalls.has(`${turn}/${call.index}`)) unused.push(ref(turn, call));
    }
    if (unused.length > 0) throw new CassetteUnusedError(unused);
    if (events === undefined) return;
    const recorded = cassetteTranscript(this.cassette);
    const replayed = deterministicTranscript(events);
    for (let i = 0; i < Math.max(recorded.length, replayed.length); i++) {
      const difference = differences(recorded[i], replayed[i], 1)[0];
      if (difference !== undefined) throw new TranscriptMismatchError(i, difference);
    }
  }

  // Cancels the replayed run with the reason the recorded one was given (the text after "the
  // run was cancelled: "), so that its RUN_CANCELLED and stop messages read as recorded.
  private cancelAsRecorded(): void {
    const { ending } = this.cassette;
    const prefix = `${cancelledWhy}: `;
    this.cancel.abort(ending.type === 'RUN_CANCELLED' && ending.reason.startsWith(prefix) ? ending.reason.slice(prefix.length) : undefined);
  }

  private missed(miss: CassetteMissError): CassetteMissError {
    this.misses.push(miss);
    return miss;
  }

  // Never answers; fails loudly if the stop the recording saw does not come within waitSeconds.
  private waitForStop(at: CassetteEntryRef, what: string): Observable<never> {
    return new Observable<never>((subscriber) => {
      if (this.waitMs === undefined) return undefined;
      const seconds = this.waitMs / 1000;
      const timer = scheduleAfter(this.scheduler, () => {
        const { ending } = this.cassette;
        const how = ending.type === 'RUN_FAILED' ? `${ending.error.name}: ${ending.error.message}` : ending.type;
        subscriber.error(this.missed(new CassetteMissError(at, `the recorded run stopped ${what} (${how}); the replay waited ${seconds}s for that stop and it did not come`)));
      }, this.waitMs);
      return () => timer.unsubscribe();
    });
  }

  private respond(request: ModelRequest): Observable<ModelResponse> {
    const turn = ++this.asked;
    const { turns, ending, fingerprint: recorded } = this.cassette;
    const entry = turns[turn - 1];
    if (entry === undefined) {
      // The recorded run was cancelled after its last batch, before it asked again: cancel here too.
      if (ending.type === 'RUN_CANCELLED' && turns.length > 0 && this.stop !== undefined) {
        this.scheduler.schedule(() => this.cancelAsRecorded());
        return this.waitForStop({ turn }, 'before this request');
      }
      const miss = new CassetteMissError(
        { turn },
        `the run asked the model for turn ${turn} and the cassette holds ${turns.length} (the recorded run ended there with ${ending.type})`,
        turns.length > 0 ? { turn: turns.length } : undefined,
      );
      return throwError(() => this.missed(miss));
    }
    const who = differences(
      { agent: recorded.agent.name, model: recorded.agent.model, instructions: recorded.agent.instructions },
      { agent: request.agent, model: request.model, instructions: request.instructions },
      1,
    )[0];
    const current = recordedRequest(request, this.scrub);
    const difference = who ?? differences(entry.request, current, 1)[0];
    if (difference !== undefined) {
      const text = canonicalJson(current);
      const same = turns.find((other) => canonicalJson(other.request) === text);
      const where = difference.path === '' ? 'as a whole' : `at ${difference.path}`;
      const detail = `the request differs from the recorded one ${where}: recorded ${canonicalJson(difference.recorded)}, now ${canonicalJson(difference.current)}`;
      return throwError(() => this.missed(new CassetteMissError({ turn }, detail, { turn: same?.turn ?? turn }, difference)));
    }
    this.usedTurns.add(turn);
    const { reply } = entry;
    if ('stopped' in reply) {
      if (ending.type === 'RUN_CANCELLED') this.scheduler.schedule(() => this.cancelAsRecorded());
      return this.waitForStop({ turn }, 'while the model was asked');
    }
    if ('error' in reply) return throwError(() => replayedError(reply.error));
    if (this.stop?.turn === turn) this.stop.responded();
    return of(reply.response as ModelResponse);
  }

  private answer(tool: string, ctx: ToolContext): Observable<unknown> {
    const turn = this.asked;
    const entry = this.cassette.turns[turn - 1];
    const calls = entry?.calls ?? [];
    const same = calls.filter((call) => call.callId === ctx.callId && call.tool === tool);
    const call = same.find((c) => c.dispatched && !this.usedCalls.has(`${turn}/${c.index}`));
    if (call === undefined) {
      // Where the call sits in the response the replay gave (the runner does not tell a body its index).
      const response = entry !== undefined && 'response' in entry.reply ? acceptedResponse(entry.reply.response) : undefined;
      const position = response?.toolCalls?.findIndex((asked) => asked.id === ctx.callId && asked.name === tool) ?? -1;
      const at: CassetteEntryRef = { turn, ...(position >= 0 ? { index: position } : {}), callId: ctx.callId, tool };
      const first = same[0];
      let miss: CassetteMissError;
      if (first === undefined) {
        miss = new CassetteMissError(at, `the cassette holds no outcome for call ${ctx.callId} to ${tool} in turn ${turn}`, this.closest(at));
      } else if (same.some((c) => c.dispatched)) {
        miss = new CassetteMissError(at, 'the replay dispatched this call twice');
      } else {
        miss = new CassetteMissError(
          at,
          `the recorded run never dispatched this call (it ended with ${outcomeText(first)}) and the replay did: replay with the same lanes and policies (approve, guardrails) as the recording`,
        );
      }
      return throwError(() => this.missed(miss));
    }
    this.usedCalls.add(`${turn}/${call.index}`);
    const stop = this.stop?.turn === turn ? this.stop : undefined;
    stop?.dispatched(call.index);
    if (call.stopped) return this.waitForStop(ref(turn, call), 'this call in flight');
    if (call.kind === 'result') {
      for (const delta of call.deltas ?? []) ctx.record(delta);
      return of(call.result);
    }
    if (call.kind === 'error' && stop?.stopper === call.index) {
      // The failure that stopped the batch lands once every sibling the recording dispatched is out.
      const error = call.error;
      return new Observable<never>((subscriber) => {
        const off = stop.onReached(() => subscriber.error(replayedError(error)));
        const guard = this.waitForStop(ref(turn, call), 'its batch when this call failed').subscribe(subscriber);
        return () => {
          off();
          guard.unsubscribe();
        };
      });
    }
    // A call cut off in flight by itself: the same clause again, so the batch builds the same outcome.
    if (call.kind === 'indeterminate') return throwError(() => new CallInterruptedError(inFlightClause(tool, call.message)));
    return throwError(() => replayedError(call.kind === 'error' ? call.error : { name: 'Error', message: outcomeText(call) }));
  }

  // The recorded call nearest to one the cassette does not hold: the entry at its position in
  // its turn, else the same id and tool in the nearest turn, else the same tool in the nearest
  // turn, else the first call of its turn.
  private closest(at: CassetteEntryRef): CassetteEntryRef | undefined {
    const all = this.cassette.turns.flatMap((t) => t.calls.map((call) => ({ turn: t.turn, call })));
    const byDistance = (a: (typeof all)[number], b: (typeof all)[number]) =>
      Math.abs(a.turn - at.turn) - Math.abs(b.turn - at.turn) || a.turn - b.turn || a.call.index - b.call.index;
    const nearest = (candidates: typeof all) => [...candidates].sort(byDistance)[0];
    const found =
      all.find((c) => c.turn === at.turn && c.call.index === at.index) ??
      nearest(all.filter((c) => c.call.callId === at.callId && c.call.tool === at.tool)) ??
      nearest(all.filter((c) => c.call.tool === at.tool)) ??
      all.find((c) => c.turn === at.turn);
    return found === undefined ? undefined : ref(found.turn, found.call);
  }
}

