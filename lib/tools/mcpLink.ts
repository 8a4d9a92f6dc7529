// One MCP server's calls, as mcpTools' bodies make them: each request sent with the call's
// signal, its idempotency key and fencing tokens in `_meta`, its progress kept alive and passed
// on; each failure classified (the server's answer, a request that never left, a request cut
// off in flight, a lost server), and each result read. Nothing here imports the SDK.
import { CallInterruptedError, McpConnectionLostError, McpToolError, toErrorInfo, ToolRemovedError } from '../errors.js';
import { rateLimitedFrom } from '../rateLimited.js';
import type { McpClient, McpProgress, McpRequestOptions } from './mcp.js';
import type { ToolContext } from './ToolContext.js';

/**
 * The `_meta` keys a call carries to the server (MCP's rule: a prefix of dot-separated labels and
 * a slash, then a name). A server deduplicates a retried call by the key and refuses a stale
 * holder by the fence.
 */
export const metaKeys = Object.freeze({
  /** The call's `ctx.idempotencyKey` (`runId:callId`): the same for a retried call. */
  idempotencyKey: 'agent-lanes/idempotencyKey',
  /** The call's `ctx.fence` (its narrowest fleet lane's token), when it holds a fleet lane. */
  fence: 'agent-lanes/fence',
  /** Every fleet lane's token the call holds, by lane key (`ctx.fences`), when it holds any. */
  fences: 'agent-lanes/fences',
});

/** A tool as its calls need it: its name here and on the server, and whether calling again is safe. */
export interface LinkedTool {
  readonly name: string;
  readonly listed: string;
  readonly idempotent: boolean;
}

/** How a link sends its requests. */
export interface LinkSettings {
  /** Each request's time limit in ms (restarted by each progress report); the SDK's own when undefined. */
  readonly timeoutMs: number | undefined;
  /** The most a request may take whatever progress it reports, in ms; none when undefined. */
  readonly maxTotalMs: number | undefined;
  /** How long the ping that asks whether the server is there may take, in ms. */
  readonly probeMs: number;
}

/** A call waiting for the server: what fails it if the server is found gone. */
interface InFlight {
  readonly tool: LinkedTool;
  readonly reject: (error: unknown) => void;
}

// MCP's JSON-RPC codes: a connection the SDK saw close with the request pending, and a request
// the client gave up waiting for (its timeout, or maxTotalTimeout).
const CONNECTION_CLOSED = -32000;
const REQUEST_TIMEOUT = -32001;

/**
 * One server's calls in flight, and the check that finds the server gone. A transport can lose a
 * request without ever answering it (a Streamable HTTP stream that broke when its server died):
 * every error the client reports while calls are in flight sets off a ping, and a ping that
 * fails ends those calls. The SDK itself fails them when the connection closes (stdio).
 */
export class ServerLink {
  // Calls sent and not yet answered.
  private readonly inflight = new Set<InFlight>();
  // The ping asking whether the server is still there, while one is out.
  private probe: Promise<boolean> | undefined = undefined;
  // The server's names of tools it listed once and no longer lists, with why.
  private readonly removed = new Map<string, string>();

  constructor(
    private readonly client: McpClient,
    readonly server: string,
    private readonly settings: LinkSettings,
  ) {
    const before = client.onerror;
    client.onerror = (error: Error) => {
      before?.call(client, error);
      this.trouble();
    };
  }

  /** The server no longer lists this tool (by its name there): later calls fail at once, saying so. */
  withdraw(listed: string, why: string): void {
    this.removed.set(listed, why);
  }

  /** The server lists this tool (again). */
  restore(listed: string): void {
    this.removed.delete(listed);
  }

  call(tool: LinkedTool, args: { readonly [key: string]: unknown }, ctx: ToolContext): Promise<unknown> {
    const withdrawn = this.removed.get(tool.listed);
    if (withdrawn !== undefined) return Promise.reject(new ToolRemovedError(tool.name, withdrawn));
    const { signal } = ctx;
    return new Promise<unknown>((resolve, reject) => {
      const flight: InFlight = { tool, reject };
      this.inflight.add(flight);
      let sent: Promise<unknown>;
      try {
        sent = this.client.callTool({ name: tool.listed, arguments: args as Record<string, unknown>, _meta: metaOf(ctx) }, undefined, this.optionsOf(ctx));
      } catch (error) {
        this.inflight.delete(flight);
        reject(error);
        return;
      }
      sent.then(
        (result) => {
          if (!this.inflight.delete(flight)) return;
          try {
            resolve(resultOf(tool.name, this.server, result));
          } catch (error) {
            reject(error);
          }
        },
        (error: unknown) => {
          if (!this.inflight.delete(flight)) return;
          // A stopped call's outcome is the batch's already; the SDK's rejection says only that it was cancelled.
          if (signal.aborted) reject(error);
          else this.failed(flight, error);
        },
      );
    });
  }

  // The request's options: the call's signal, its time limits, and its progress, which keeps it
  // alive and goes on to the call's context (so to activity$).
  private optionsOf(ctx: ToolContext): McpRequestOptions {
    const { timeoutMs, maxTotalMs } = this.settings;
    const report = typeof ctx.progress === 'function' ? ctx.progress : undefined;
    const onprogress = (progress: McpProgress): void => {
      if (report === undefined || ctx.signal.aborted) return;
      const { progress: done, total, message } = progress;
      // The server's numbers, taken only when they are numbers: a bad report is dropped, never a failed call.
      if (typeof done !== 'number' || !Number.isFinite(done)) return;
      try {
        report.call(ctx, done, typeof total === 'number' && Number.isFinite(total) ? total : undefined, typeof message === 'string' ? message : undefined);
      } catch {
        // A report the call can no longer make (it has ended) changes nothing about the request.
      }
    };
    return {
      signal: ctx.signal,
      onprogress,
      resetTimeoutOnProgress: true,
      ...(timeoutMs === undefined ? {} : { timeout: timeoutMs }),
      ...(maxTotalMs === undefined ? {} : { maxTotalTimeout: maxTotalMs }),
    };
  }

  // A call the client failed: the server's own error, or one that says the request never left,
  // goes back as it is; a closed connection is a lost call; a timeout of the client's or a
  // gateway's (504) is a call cut off in flight; another HTTP status is the server's answer;
  // anything else (a transport's error) is a lost call if the server is gone, and a call cut off
  // in flight if it is there (a connection cut, a stream that broke).
  private failed(flight: InFlight, error: unknown): void {
    const code = isMcpError(error) ? error.code : undefined;
    if (code === CONNECTION_CLOSED) {
      flight.reject(this.lost(flight.tool, 'the connection closed'));
      return;
    }
    if (code === REQUEST_TIMEOUT) {
      flight.reject(new CallInterruptedError(`its request to MCP server ${this.server} got no answer in time (${messageOf(error)})`, { code }));
      return;
    }
    if (code !== undefined || neverSent(error)) {
      flight.reject(error);
      return;
    }
    const status = httpStatusOf(error);
    // A gateway gave up waiting for the server: the request reached it, whether or not the
    // gateway answers anything else now (a ping through it may time out the same way).
    if (status === GATEWAY_TIMEOUT) {
      flight.reject(new CallInterruptedError(`its request to MCP server ${this.server} ended with HTTP 504, a gateway's timeout (${messageOf(error)})`, { status }));
      return;
    }
    // Any other answer over HTTP is the server's (or its proxy's) refusal, given back as it is;
    // a 429 is its "slow down", which pauses the tool's rate lane.
    if (status !== undefined) {
      flight.reject(rateLimitedFrom(error) ?? error);
      return;
    }
    void this.check().then((alive) => {
      if (!alive) flight.reject(this.lost(flight.tool, messageOf(error)));
      else flight.reject(new CallInterruptedError(`its request to MCP server ${this.server} was cut off while the server stayed up (${messageOf(error)})`));
    });
  }

  // The client reported an error: if calls are waiting, ask whether the server is still there.
  private trouble(): void {
    if (this.inflight.size === 0) return;
    void this.check().then((alive) => {
      if (alive) return;
      const flights = [...this.inflight];
      this.inflight.clear();
      for (const flight of flights) flight.reject(this.lost(flight.tool, 'its stream broke and the server does not answer a ping'));
    });
  }

  // One ping at a time, shared by whoever asks while it is out; it never rejects.
  private check(): Promise<boolean> {
    if (this.probe !== undefined) return this.probe;
    const probe = Promise.resolve()
      .then(() => this.client.ping({ timeout: this.settings.probeMs }))
      .then(
        () => true,
        () => false,
      );
    this.probe = probe;
    void probe.then(() => {
      if (this.probe === probe) this.probe = undefined;
    });
    return probe;
  }

  private lost(tool: LinkedTool, why: string): McpConnectionLostError {
    return new McpConnectionLostError(tool.name, this.server, tool.idempotent, why);
  }
}

// What the server is told of the call, under agent-lanes' own `_meta` keys. A context that lacks
// a field (a body called by hand) sends what it has.
function metaOf(ctx: ToolContext): Record<string, unknown> {
  const meta: Record<string, unknown> = {};
  if (typeof ctx.idempotencyKey === 'string') meta[metaKeys.idempotencyKey] = ctx.idempotencyKey;
  const { fence, fences } = ctx;
  if (typeof fence === 'string') meta[metaKeys.fence] = fence;
  if (fences !== undefined && fences !== null && Object.keys(fences).length > 0) meta[metaKeys.fences] = { ...fences };
  return meta;
}

const GATEWAY_TIMEOUT = 504;

// The HTTP status a transport's error carries: the SDK's StreamableHTTPError keeps it as `code`.
function httpStatusOf(error: unknown): number | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, status } = error as { code?: unknown; status?: unknown };
  const value = typeof status === 'number' ? status : code;
  return typeof value === 'number' && value >= 100 && value <= 599 ? value : undefined;
}

function messageOf(error: unknown): string {
  return toErrorInfo(error).message;
}

// Errors that say the request never left: the SDK refusing to send on a connection closed
// already, or a connection that could not be made. The call failed; nothing can have landed.
const unreachable = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);
function neverSent(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.message === 'Not connected') return true;
  const { cause } = error as { cause?: unknown };
  const code = cause !== null && typeof cause === 'object' ? (cause as { code?: unknown }).code : undefined;
  return typeof code === 'string' && unreachable.has(code);
}

function isMcpError(error: unknown): error is { readonly code: number } {
  return error instanceof Error && error.name === 'McpError' && typeof (error as { code?: unknown }).code === 'number';
}

/** What a call gives back: the structured content, else the text, else the content items. */
function resultOf(tool: string, server: string, result: unknown): unknown {
  if (result === null || typeof result !== 'object') return result;
  const { isError, content, structuredContent } = result as { isError?: unknown; content?: unknown; structuredContent?: unknown };
  if (isError === true) throw new McpToolError(tool, server, textOf(content) ?? 'the server gave no reason');
  if (structuredContent !== null && typeof structuredContent === 'object') return structuredContent;
  if (Array.isArray(content)) return textOf(content) ?? content;
  // An older server's answer (`toolResult`), or something else: as it came.
  return 'toolResult' in result ? (result as { toolResult: unknown }).toolResult : result;
}

// The text items joined by newlines, or undefined if any item is not text.
function textOf(content: unknown): string | undefined {
  if (!Array.isArray(content) || content.length === 0) return undefined;
  const texts: string[] = [];
  for (const item of content as unknown[]) {
    if (item === null || typeof item !== 'object' || (item as { type?: unknown }).type !== 'text') return undefined;
    const { text } = item as { text?: unknown };
    if (typeof text !== 'string') return undefined;
    texts.push(text);
  }
  return texts.join('\n');
}
