// A vendor's streamed reply as the Observable of stream parts a ModelProvider may answer with:
// POST (retried until a 2xx, as a whole reply is), then the body's server-sent events parsed by
// eventsource-parser (a well-kept parser, so the framing rules, lines split across network
// chunks, comments and `retry` fields are not ours to get right), each event handed to the
// wire's decoder, which emits the parts it completes.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { Observable } from 'rxjs';
import type { ModelResponse, ModelStreamPart } from '../runner/index.js';
import { ProviderStreamError } from './errors.js';
import { causeOf, postForStream, readJson, redact, type JsonPost } from './http.js';

/** How one wire's events become stream parts: one decoder per reply. */
export interface EventDecoder {
  /** Reads one event, calling `emit` for each part it completes. True when the reply is complete (nothing after it is read). */
  event(event: EventSourceMessage, emit: (part: ModelStreamPart) => void): boolean;
  /** The body ended without the event that completes the reply: emit what remains, or throw if the reply is cut short. */
  end(emit: (part: ModelStreamPart) => void): void;
}

/** The body failed while being read (the connection closed, the request aborted); `cause` is fetch's error. */
export class BodyReadError extends Error {
  constructor(cause: unknown) {
    super(causeOf(cause), { cause });
  }
}

/**
 * Reads `body` to its end or until `onEvent` returns true, handing it each event as it
 * completes; resolves true when `onEvent` did. A throw from `onEvent` stops the reading and
 * rejects with it; a body that fails rejects with a BodyReadError. The body is cancelled when
 * left early, so its connection is given back.
 */
export async function readEvents(body: ReadableStream<Uint8Array>, onEvent: (event: EventSourceMessage) => boolean): Promise<boolean> {
  // True once onEvent said the reply is complete.
  let complete = false;
  const parser = createParser({
    onEvent: (event) => {
      if (!complete) complete = onEvent(event);
    },
  });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  try {
    while (!complete) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (error) {
        throw new BodyReadError(error);
      }
      const { done, value } = chunk;
      if (done) {
        parser.feed(decoder.decode());
        // A last event without its blank line is not an event (the SSE rule), so it is not read.
        break;
      }
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } finally {
    // Left early (complete, or failed): the rest of the body is not wanted.
    reader.cancel().catch(() => undefined);
  }
  return complete;
}

/**
 * One streamed reply: the POST, then its events through a new `decoder()`, as an Observable of
 * parts. A 2xx answered with a JSON body (a compatible server that does not stream) is read
 * whole with `whole`. Unsubscribing aborts the request; the request's signal aborting fails the
 * Observable with the signal's reason; a body that fails mid-stream is a ProviderStreamError.
 */
export function streamedReply(post: JsonPost, decoder: () => EventDecoder, whole: (reply: unknown) => ModelResponse): Observable<ModelStreamPart | ModelResponse> {
  return new Observable<ModelStreamPart | ModelResponse>((subscriber) => {
    // The request's own controller: aborted by the caller's signal, or by unsubscribing.
    const controller = new AbortController();
    const { signal } = post;
    const onAbort = (): void => controller.abort(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    // True once the reply ended, one way or another: unsubscribing then aborts nothing.
    let ended = false;
    const secrets = post.secrets ?? [];
    const emit = (part: ModelStreamPart): void => subscriber.next(part);
    const read = async (): Promise<void> => {
      const response = await postForStream({ ...post, signal: controller.signal });
      if (/^application\/json/i.test(response.headers.get('content-type') ?? '')) {
        subscriber.next(whole(await readJson(response, post.provider, (text) => redact(text, secrets))));
        return;
      }
      if (response.body === null) throw new ProviderStreamError(post.provider, undefined, 'the reply has no body');
      const decode = decoder();
      let complete: boolean;
      try {
        complete = await readEvents(response.body, (event) => decode.event(event, emit));
      } catch (error) {
        // The decoder's own errors say what was wrong; a body that failed to arrive is a closed connection.
        if (!(error instanceof BodyReadError)) throw error;
        controller.signal.throwIfAborted();
        throw new ProviderStreamError(post.provider, undefined, `the connection closed mid-stream (${redact(error.message, secrets)})`);
      }
      if (!complete) decode.end(emit);
    };
    read().then(
      () => {
        ended = true;
        subscriber.complete();
      },
      (error: unknown) => {
        ended = true;
        subscriber.error(controller.signal.aborted ? controller.signal.reason : error);
      },
    );
    return () => {
      signal.removeEventListener('abort', onAbort);
      if (!ended) controller.abort(new Error('the reply was left'));
    };
  });
}
