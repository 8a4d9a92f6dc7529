// ScriptedProvider: a model that answers from a script, for examples and for tests
// (the library's and its users'). It records every request it was sent, and says
// clearly when a run asks for more turns than the script has.
import { from, isObservable, of, throwError, type Observable } from 'rxjs';
import type { ModelProvider, ModelRequest, ModelResponse, ModelStreamPart } from '../runner/index.js';

/**
 * One scripted turn: the response itself, or a function of the request giving it (or a Promise
 * of it, or an Observable of it or of the turn's stream parts, to script a streamed turn).
 */
export type ScriptStep =
  | ModelResponse
  | ((request: ModelRequest, signal: AbortSignal) => ModelResponse | Promise<ModelResponse> | Observable<ModelResponse | ModelStreamPart>);

/** The responses in order; or, keyed by agent name, each agent's own responses in order (for sub-agents). */
export type Script = readonly ScriptStep[] | Readonly<Record<string, readonly ScriptStep[]>>;

/**
 * A provider that plays a script.
 *
 * ## Example
 * ```ts
 * const provider = new ScriptedProvider([
 *   { toolCalls: [{ id: 'c1', name: 'search', arguments: '{"q":"hotels in Lisbon"}' }] },
 *   (request) => ({ text: `found ${request.messages.length} messages` }),
 * ]);
 * ```
 */
export class ScriptedProvider implements ModelProvider {
  /** Every request received, in order. */
  readonly requests: ModelRequest[] = [];
  private readonly script: Script;
  // The next step to play, per agent name (or under '' for a plain list).
  private readonly positions = new Map<string, number>();

  constructor(script: Script) {
    if (script === null || typeof script !== 'object') {
      throw new TypeError(`ScriptedProvider expects an array of responses or an object of agent name to responses, got ${typeof script}`);
    }
    this.script = script;
  }

  /**
   * Plays the next step. Plain responses come back synchronously (an Observable), so scripted
   * runs stay deterministic and run in virtual time inside `TestScheduler.run`.
   */
  respond(request: ModelRequest, signal: AbortSignal): Observable<ModelResponse | ModelStreamPart> {
    this.requests.push(request);
    const key = Array.isArray(this.script) ? '' : request.agent;
    const steps: readonly ScriptStep[] | undefined = Array.isArray(this.script)
      ? (this.script as readonly ScriptStep[])
      : Object.prototype.hasOwnProperty.call(this.script, key)
        ? (this.script as Readonly<Record<string, readonly ScriptStep[]>>)[key]
        : undefined;
    if (steps === undefined) {
      return throwError(() => new Error(`ScriptedProvider has no script for agent ${request.agent}`));
    }
    const position = this.positions.get(key) ?? 0;
    if (position >= steps.length) {
      const whose = key === '' ? '' : ` for agent ${key}`;
      return throwError(() => new Error(`ScriptedProvider ran out of script${whose}: it has ${steps.length} responses and request ${position + 1} asked for another`));
    }
    this.positions.set(key, position + 1);
    const step = steps[position]!;
    if (typeof step !== 'function') return of(step);
    try {
      const produced = step(request, signal);
      if (isObservable(produced)) return produced;
      return typeof (produced as { then?: unknown }).then === 'function' ? from(produced as Promise<ModelResponse>) : of(produced as ModelResponse);
    } catch (error) {
      return throwError(() => error);
    }
  }
}
