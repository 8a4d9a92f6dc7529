// One request to the model: the provider's response, value by value (a whole response, or the
// parts of a streamed turn), under an AbortController of the request's own, what the run makes
// of a response that fails or does not decode, and the final answer decoded.
import { isLeft } from 'fp-ts/lib/Either.js';
import { from, isObservable, type Observable, type ObservableInput } from 'rxjs';
import { isPromiseLike, reportUnhandled } from '../../batch/index.js';
import { describeValue } from '../../config/index.js';
import { DirectSubscriber } from '../../directSubscriber.js';
import { ProviderError, RunError, toErrorInfo } from '../../errors.js';
import { check, type Checked } from '../../tools/index.js';
import type { Agent } from '../Agent.js';
import { failed, type RunEvent } from '../events.js';
import { decodeModelResponse, isStreamPart, type DecodedResponse, type ModelProvider, type ModelRequest } from './model.js';
import { StreamPartError } from './modelStream.js';
import type { Keep } from '../../keep.js';

/** A model's decoded response, or the run's failure that stands for it. */
export type ResponseOrFailure = { readonly response: DecodedResponse } | { readonly failure: RunEvent };

// The run's failure for a provider that failed (its facts, an HTTP status, its code, the
// attempts made, go with it), or that completed without answering.
export function providerFailure(turn: number, error: unknown): RunEvent {
  if (error === undefined) return failed(new ProviderError(turn, 'the provider completed without a response'));
  if (isPartError(error)) return failed(new ProviderError(turn, `the reply does not decode: ${error.message}`));
  const info = toErrorInfo(error);
  return failed(new ProviderError(turn, info.message, info));
}

// A provider may fail with anything, a Proxy whose traps throw included: instanceof must not throw.
function isPartError(error: unknown): error is StreamPartError {
  try {
    return error instanceof StreamPartError;
  } catch {
    return false;
  }
}

export function responseOf(turn: number, raw: unknown): ResponseOrFailure {
  let decoded: ReturnType<typeof decodeModelResponse>;
  try {
    decoded = decodeModelResponse(raw);
  } catch (error) {
    // A response that throws when read (a getter, a proxy) is the provider's failure too.
    return { failure: failed(new ProviderError(turn, toErrorInfo(error).message)) };
  }
  if (isLeft(decoded)) return { failure: failed(new ProviderError(turn, `the reply does not decode: ${decoded.left}`)) };
  return { response: decoded.right };
}

// A turn whose response asks for no call: the model's text is the run's final answer.
/**
 * The run's final answer, decoded with the agent's output schema: RUN_COMPLETED with what it
 * decoded, or RUN_FAILED saying why not; a Promise when a Standard Schema checks it
 * asynchronously (it never rejects).
 */
export function finalAnswer(agent: Agent, text: string | undefined): RunEvent | Promise<RunEvent> {
  if (agent.output === undefined) return { type: 'RUN_COMPLETED', output: text ?? '' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text ?? '');
  } catch (error) {
    return failed(new RunError(`the final answer of ${agent.name} is not JSON (${(error as Error).message}); its output codec needs JSON`));
  }
  const answer = (decoded: Checked): RunEvent =>
    isLeft(decoded) ? failed(new RunError(`the final answer of ${agent.name} does not decode: ${decoded.left}`)) : { type: 'RUN_COMPLETED', output: decoded.right };
  const decoded = check(agent.output, parsed, 'output');
  return decoded instanceof Promise ? decoded.then(answer) : answer(decoded);
}

/** Who hears a request's response: a whole response, or a streamed turn's parts one by one, and how it ended. */
export interface ResponseObserver {
  /** A whole response (nothing after it is read), not decoded yet. */
  responded(value: unknown): void;
  /** A part of a streamed turn (a value with a `type`, `isStreamPart`), not decoded yet. */
  streamPart(part: unknown): void;
  responseFailed(error: unknown): void;
  responseEnded(): void;
}

/**
 * One request to the model: it asks the provider (`send`) and hands `observer` its response, value
 * by value: a whole response (nothing after it is read), or the parts of a streamed turn until
 * the stream ends. What the provider returned may be a Promise (followed with `then`, no
 * Observable made), an Observable, or anything RxJS can read. Each request has its own
 * AbortController, whose signal the provider is handed: a provider that keeps a signal sees only
 * this request's abort, and one that leaves its listeners behind leaves them on a signal nobody
 * keeps. Unsubscribing leaves the request, aborted only if its response was not complete by then;
 * made before it is sent, it can be left while the provider is still being asked (a provider
 * that stops its own run). Every value, failure and ending the provider sends after the response
 * is complete, or after the request was left, is ignored.
 *
 * The subscriber of the provider's Observable itself (a `DirectSubscriber`: no wrapper, and no
 * copy of it, whatever RxJS's config says): leaving the request reaches the provider's
 * subscription however far its subscribe has got.
 */
export class Request extends DirectSubscriber<unknown> {
  private readonly controller = new AbortController();
  // Set once the response is complete or failed, or the request was left: later values are ignored.
  private done = false;

  constructor(private readonly observer: ResponseObserver) {
    super();
  }

  /** Asks the provider. */
  send(provider: ModelProvider, request: ModelRequest): void {
    let produced: unknown;
    try {
      produced = provider.respond(request, this.controller.signal);
    } catch (error) {
      this.fail(error);
      return;
    }
    if (isPromiseLike(produced)) {
      try {
        // Followed even if the request was left meanwhile: a rejection must not go unhandled.
        produced.then(
          (value) => {
            this.value(value);
            // A Promise gives one value: a stream part alone is a stream that ended.
            if (isStreamPart(value)) this.complete();
          },
          (error: unknown) => this.fail(error),
        );
      } catch (error) {
        // A thenable whose `then` throws is the provider's failure too.
        this.fail(error);
      }
      return;
    }
    // An Observable, as the contract says; anything else RxJS can read (an async iterable, say)
    // is taken as it always was, and the rest is the provider's failure.
    let response$: Observable<unknown>;
    try {
      response$ = isObservable(produced) ? produced : from(produced as ObservableInput<unknown>);
    } catch {
      this.fail(new TypeError(`respond must return a Promise or an Observable of the reply (wrap a ready one in Promise.resolve or of), got ${describeValue(produced)}`));
      return;
    }
    // A request left while the provider was asked does not subscribe what it returned.
    if (this.done) return;
    try {
      response$.subscribe(this);
    } catch (error) {
      this.fail(error);
    }
  }

  // Observer of the provider's Observable.
  override next(value: unknown): void {
    this.value(value);
  }

  override error(error: unknown): void {
    this.fail(error);
  }

  override complete(): void {
    if (this.done) return;
    this.done = true;
    this.observer.responseEnded();
    this.release();
  }

  // Left by the run: the request is aborted unless its response was complete, then let go.
  override unsubscribe(): void {
    if (!this.done) {
      this.done = true;
      this.controller.abort(new Error('the run stopped'));
    }
    super.unsubscribe();
  }

  private value(value: unknown): void {
    if (this.done) return;
    if (isStreamPart(value)) return this.observer.streamPart(value);
    // A whole response: it is complete, whatever else the provider would send. It is
    // handed on first, then the provider's subscription let go.
    this.done = true;
    this.observer.responded(value);
    this.release();
  }

  private fail(error: unknown): void {
    if (this.done) return;
    this.done = true;
    this.observer.responseFailed(error);
    this.release();
  }

  // The response is complete: the provider's subscription is let go. A teardown of the provider's
  // that throws cannot take the response back: it is reported as RxJS reports one nobody can receive.
  private release(): void {
    try {
      super.unsubscribe();
    } catch (error) {
      reportUnhandled(error);
    }
  }
}

/**
 * @internal One request, inert, for keepWarmShapes (lib/shapes.ts), with the plain EventTarget
 * each request's AbortSignal is made from before it becomes a signal.
 */
export function keepShapes(keep: Keep): void {
  keep(() => new Request({ responded: () => undefined, streamPart: () => undefined, responseFailed: () => undefined, responseEnded: () => undefined }));
  keep(() => new EventTarget());
}
