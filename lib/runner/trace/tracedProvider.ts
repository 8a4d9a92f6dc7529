// The provider a traced run asks: the runner's own, each request inside its `chat` span. The
// span is active for the whole request: while `respond` is called, and while the Observable it
// returns is subscribed (where a provider starts its fetch, or an AI SDK model's doStream), so
// spans made for it, then and in what follows from it, nest under the chat span. The answer
// passes through as it came (a Promise, an Observable, a value), watched for its ending; a
// tracer that throws ends the run's tracing, never the request.
import type { OtelAttributes, OtelContext, OtelTracer } from './otelShapes.js';
import { isObservable, Observable } from 'rxjs';
import { isPromiseLike } from '../../batch/index.js';
import type { ModelProvider, ModelRequest } from '../model/model.js';
import { ChatSpan, type SpanRun } from './traceSpans.js';
import { TracingAttributes } from './tracingNames.js';

/** What a chat span needs of its run's trace besides what every span does: the tracer, the run's span context, the provider. */
export interface ChatRun extends SpanRun {
  readonly tracing: { readonly tracer: OtelTracer };
  readonly context: OtelContext | undefined;
  readonly provider: { readonly name: string; readonly server: OtelAttributes };
}

/** What a provider's respond gives back, whatever its kind. */
type Responding = ReturnType<ModelProvider['respond']>;

/** `provider`, each of its requests traced by `run`. */
export function tracedProvider(run: ChatRun, provider: ModelProvider): ModelProvider {
  // The number of requests made so far: the turn each chat span names.
  let requests = 0;
  return { respond: (request, signal) => chat(run, provider, request, signal, ++requests) };
}

// The chat span of one request, or undefined once the run's tracing is over (the tracer threw).
function open(run: ChatRun, request: ModelRequest, turn: number): { chat: ChatSpan; context: OtelContext } | undefined {
  if (run.broken) return undefined;
  try {
    const { api, provider } = run;
    const span = run.tracing.tracer.startSpan(
      `chat ${request.model}`,
      {
        kind: api.SpanKind.CLIENT,
        startTime: run.now(),
        attributes: {
          [TracingAttributes.OPERATION]: 'chat',
          [TracingAttributes.PROVIDER_NAME]: provider.name,
          [TracingAttributes.REQUEST_MODEL]: request.model,
          ...provider.server,
          [TracingAttributes.AGENT_NAME]: request.agent,
          [TracingAttributes.TURN]: turn,
        },
      },
      run.context,
    );
    const chat = new ChatSpan(run, span);
    run.chats.add(chat);
    return { chat, context: api.trace.setSpan(run.context ?? api.context.active(), span) };
  } catch (error) {
    run.broke(error);
    return undefined;
  }
}

function chat(run: ChatRun, provider: ModelProvider, request: ModelRequest, signal: AbortSignal, turn: number): Responding {
  const traced = open(run, request, turn);
  if (traced === undefined) return provider.respond(request, signal);
  const { chat, context } = traced;
  const { api } = run;
  let produced: unknown;
  try {
    produced = api.context.with(context, () => provider.respond(request, signal));
  } catch (error) {
    chat.fail(error);
    throw error;
  }
  if (isObservable(produced)) {
    const answer$ = produced;
    return new Observable<unknown>((subscriber) => {
      subscriber.add(() => chat.left());
      // Subscribed inside the span: a provider that starts its request here starts it in the chat's context.
      subscriber.add(
        api.context.with(context, () =>
          answer$.subscribe({
            next: (value) => {
              chat.saw(value);
              subscriber.next(value);
            },
            error: (error: unknown) => {
              chat.fail(error);
              subscriber.error(error);
            },
            complete: () => {
              chat.done();
              subscriber.complete();
            },
          }),
        ),
      );
    }) as Responding;
  }
  if (isPromiseLike(produced)) {
    // A provider that ignores its signal may never settle: the run's stop ends the span.
    const abandoned = (): void => chat.left();
    signal.addEventListener('abort', abandoned, { once: true });
    return Promise.resolve(produced).then(
      (value) => {
        signal.removeEventListener('abort', abandoned);
        chat.saw(value);
        chat.done();
        return value;
      },
      (error: unknown) => {
        signal.removeEventListener('abort', abandoned);
        chat.fail(error);
        throw error;
      },
    ) as Responding;
  }
  chat.saw(produced);
  chat.done();
  return produced as Responding;
}

/** What a provider says of itself for the spans: its GenAI provider name (`_OTHER` when it names none) and its server. */
export function providerOf(provider: { readonly providerName?: unknown; readonly server?: unknown }): { name: string; server: OtelAttributes } {
  const { providerName, server } = provider;
  const name = typeof providerName === 'string' && providerName !== '' ? providerName : '_OTHER';
  const attributes: OtelAttributes = {};
  if (server !== null && typeof server === 'object') {
    const { address, port } = server as { address?: unknown; port?: unknown };
    if (typeof address === 'string' && address !== '') attributes[TracingAttributes.SERVER_ADDRESS] = address;
    if (typeof port === 'number' && Number.isInteger(port) && port > 0) attributes[TracingAttributes.SERVER_PORT] = port;
  }
  return { name, server: attributes };
}
