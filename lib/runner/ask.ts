// One request to the model: the provider's answer, value by value (a whole response, or the
// parts of a streamed turn), under an AbortController of the request's own, and what the run
// makes of a reply that fails or does not decode.
import { isLeft } from 'fp-ts/lib/Either.js';
import { from, isObservable, Observable, type ObservableInput } from 'rxjs';
import { describeValue } from '../config/index.js';
import { ProviderError, toErrorInfo } from '../errors.js';
import { failed, type RunEvent } from './events.js';
import { decodeModelResponse, type DecodedResponse, type ModelRequest } from './model.js';
import { isStreamPart, StreamPartError } from './modelStream.js';
import type { RunnerParts } from './parts.js';

export type Answer = { readonly reply: DecodedResponse } | { readonly failure: RunEvent };

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

export function answerOf(turn: number, raw: unknown): Answer {
  let decoded: ReturnType<typeof decodeModelResponse>;
  try {
    decoded = decodeModelResponse(raw);
  } catch (error) {
    // A reply that throws when read (a getter, a proxy) is the provider's failure too.
    return { failure: failed(new ProviderError(turn, toErrorInfo(error).message)) };
  }
  if (isLeft(decoded)) return { failure: failed(new ProviderError(turn, `the reply does not decode: ${decoded.left}`)) };
  return { reply: decoded.right };
}

/**
 * The provider's answer to one request, value by value: a whole response (nothing after it is
 * read), or the parts of a streamed turn until the stream ends. What the provider returned may
 * be a Promise, an Observable, or anything RxJS can read. Each request has its own
 * AbortController, aborted only if the request is left before its answer is complete (the run
 * stopped while it was asked, or was left mid-stream).
 */
export function ask(parts: RunnerParts, request: ModelRequest): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    // Each request its own controller: a provider that keeps a signal sees only this request's abort.
    const controller = new AbortController();
    // Set once the answer is complete, or failed: later values are ignored, and the teardown does not abort.
    let done = false;
    subscriber.add(() => {
      if (!done) {
        done = true;
        controller.abort(new Error('the run stopped'));
      }
    });
    const fail = (error: unknown): void => {
      if (done) return;
      done = true;
      subscriber.error(error);
    };
    let produced: unknown;
    try {
      produced = parts.provider.respond(request, controller.signal);
    } catch (error) {
      return fail(error);
    }
    // A Promise or an Observable, as the contract says; anything else RxJS can read (an
    // async iterable, say) is taken as it always was, and the rest is the provider's failure.
    let reply$: Observable<unknown>;
    try {
      reply$ = isObservable(produced) ? produced : from(produced as ObservableInput<unknown>);
    } catch {
      return fail(new TypeError(`respond must return a Promise or an Observable of the reply (wrap a ready one in Promise.resolve or of), got ${describeValue(produced)}`));
    }
    // Returned, so a reply that ended while being subscribed is unsubscribed at once.
    return reply$.subscribe({
      next: (value) => {
        if (done) return;
        if (isStreamPart(value)) return subscriber.next(value);
        // A whole response: the answer is complete, whatever else the provider would send.
        done = true;
        subscriber.next(value);
        subscriber.complete();
      },
      error: fail,
      complete: () => {
        if (done) return;
        done = true;
        subscriber.complete();
      },
    });
  });
}
