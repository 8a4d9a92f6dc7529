// A run's UI message stream as a web ReadableStream of chunks: what the AI SDK's own readers
// take (`readUIMessageStream`, `createUIMessageStreamResponse`, a `useChat` transport), beside
// the Observable toUIMessageStream gives. Reading starts the run; cancelling the reader leaves it.
import type { Observable, Subscription } from 'rxjs';
import type { RunEvent } from '../runner/index.js';
import { toUIMessageStream, type UIMessageChunk, type UIMessageStreamOptions } from './toUIMessageStream.js';

/**
 * A run's transcript as a `ReadableStream` of UI message stream chunks: the chunks
 * toUIMessageStream sends, in the same order, with the same options.
 *
 * The run is subscribed when the stream is first read (the stream asks for nothing before a
 * reader does), and its chunks are queued as they come until they are read. The stream closes
 * when the run's transcript ends (RUN_COMPLETED, RUN_FAILED or RUN_CANCELLED, each already a
 * chunk). A run that errors is an `error` chunk and `finish`, as in toUIMessageStream; anything
 * that still fails (a value the stream cannot take) errors the stream, so the reader hears it.
 * Cancelling the stream (`reader.cancel()`, a response body the client stopped reading)
 * unsubscribes the run, which stops it: its calls are classified, every permit comes back.
 *
 * ## Example
 * ```ts
 * import { readUIMessageStream } from 'ai';
 * for await (const message of readUIMessageStream({ stream: toUIMessageReadableStream(runner.run$(agent, 'Lisbon?')) })) {
 *   console.log(message.parts.map((part) => part.type));   // ['step-start', 'tool-lookup', ...], as it grows
 * }
 * ```
 */
export function toUIMessageReadableStream(run$: Observable<RunEvent>, options: UIMessageStreamOptions = {}): ReadableStream<UIMessageChunk> {
  const chunks$ = toUIMessageStream(run$, options);
  // The run's subscription, made at the first read.
  let subscription: Subscription | undefined;
  // Set once the stream was closed, errored or cancelled: nothing more goes into it.
  let ended = false;
  return new ReadableStream<UIMessageChunk>(
    {
      pull(stream) {
        if (subscription !== undefined || ended) return;
        subscription = chunks$.subscribe({
          next: (chunk) => {
            if (ended) return;
            try {
              stream.enqueue(chunk);
            } catch (error) {
              ended = true;
              subscription?.unsubscribe();
              stream.error(error);
            }
          },
          error: (error: unknown) => {
            if (ended) return;
            ended = true;
            stream.error(error);
          },
          complete: () => {
            if (ended) return;
            ended = true;
            stream.close();
          },
        });
        // A run that ended while it was subscribed has nothing left to leave.
        if (ended) subscription.unsubscribe();
      },
      cancel() {
        ended = true;
        subscription?.unsubscribe();
      },
    },
    // Nothing is asked of the run before a reader reads: the first read subscribes it.
    { highWaterMark: 0 },
  );
}
