// Tools from a Model Context Protocol server: every tool the server lists becomes a tool of the
// registry, shown to the model with the server's own input schema, scheduled by its annotations
// (idempotent, parallel-safe) and run in a lane of its server's, so one slow server cannot take
// the whole turn. The client is the caller's (`@modelcontextprotocol/sdk`'s Client, over stdio or
// Streamable HTTP); nothing here imports the SDK, so the library loads without it.
import * as t from 'io-ts';
import { describeValue, refuseUnknownFields } from '../config/index.js';
import { ConfigError, McpConnectionLostError, McpToolError, toErrorInfo } from '../errors.js';
import { jsonForm } from '../json.js';
import type { JsonSchema } from './jsonSchema.js';
import type { ToolBody } from './ToolContext.js';
import type { ToolDeclaration, ToolLane } from './ToolDeclaration.js';

/** Per request, as the SDK takes them: the call's signal (its cancellation) and a time limit in ms. */
export interface McpRequestOptions {
  readonly signal?: AbortSignal;
  readonly timeout?: number;
}

/** What the server says of a tool's behaviour (MCP's ToolAnnotations): hints, not guarantees. */
export interface McpToolAnnotations {
  readonly title?: string;
  readonly readOnlyHint?: boolean;
  readonly destructiveHint?: boolean;
  readonly idempotentHint?: boolean;
  readonly openWorldHint?: boolean;
}

/** A tool as the server lists it. */
export interface McpToolInfo {
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly inputSchema: { readonly [key: string]: unknown };
  readonly annotations?: McpToolAnnotations;
}

/**
 * What mcpTools asks of an MCP client, connected already: the SDK's `Client` is one, over any
 * transport. `onerror` is chained (the handler set before is still called, first), so the
 * client's transport errors can set off the check for a server that went away.
 */
export interface McpClient {
  listTools(params?: { cursor?: string }, options?: McpRequestOptions): Promise<{ readonly tools: readonly McpToolInfo[]; readonly nextCursor?: string }>;
  callTool(params: { name: string; arguments?: Record<string, unknown> }, resultSchema?: undefined, options?: McpRequestOptions): Promise<unknown>;
  ping(options?: McpRequestOptions): Promise<unknown>;
  getServerVersion(): { readonly name: string } | undefined;
  onerror?: ((error: Error) => void) | undefined;
}

/** Facts about one tool that win over what its annotations say. */
export interface McpToolOverride {
  readonly parallelSafe?: boolean;
  readonly idempotent?: boolean;
  readonly needsApproval?: boolean;
}

export interface McpToolsOptions {
  /** The server's name: its lane is `mcp:<server>`. Default: the name the server gave when the client connected. */
  readonly server?: string;
  /** How many calls to this server run at once, across every run on the runner (its lane's permits). Default 4. */
  readonly perServer?: number;
  /** Put before each tool's name (`files_`), so two servers' tools cannot clash. Default none. */
  readonly prefix?: string;
  /** Only these of the server's tools, by the server's names. Default: every tool it lists. */
  readonly tools?: readonly string[];
  /** Per tool, by the server's name: facts that win over its annotations. */
  readonly overrides?: Readonly<Record<string, McpToolOverride>>;
  /** Each request's time limit for the SDK, in seconds. Default: the SDK's own (60 s). */
  readonly timeoutSeconds?: number;
  /** How long a ping may take when the server is asked whether it is still there. Default 5. */
  readonly probeSeconds?: number;
}

/** One MCP tool, ready for `registry.register(declaration, body)`. */
export interface McpTool {
  readonly declaration: ToolDeclaration<t.UnknownRecordC>;
  readonly body: ToolBody<{ readonly [key: string]: unknown }>;
  /** The tool as the server listed it. */
  readonly listed: McpToolInfo;
}

const optionFields = ['server', 'perServer', 'prefix', 'tools', 'overrides', 'timeoutSeconds', 'probeSeconds'];
const overrideFields = ['parallelSafe', 'idempotent', 'needsApproval'];
const namePattern = /^[A-Za-z0-9_-]{1,64}$/;
// MCP's JSON-RPC code for a connection the SDK saw close with the request still pending.
const CONNECTION_CLOSED = -32000;

/**
 * Every tool of a connected MCP server, as declarations and bodies for a ToolRegistry.
 *
 * Each tool is shown to the model with the server's input schema as it is (the server
 * validates the arguments; here they need only be an object). Its annotations are scheduling
 * facts: `idempotentHint: true` makes it idempotent (a call stopped in flight is safe to call
 * again); `destructiveHint: true` on a tool that is neither `readOnlyHint` nor idempotent makes
 * it `parallelSafe: false` (a phase of its own). `overrides` wins over both. Every tool of the
 * server takes the server's lane (`mcp:<server>`, `perServer` permits) after its tool lane.
 *
 * A call passes its signal to the SDK, so a stopped call is cancelled on the server (MCP's
 * `notifications/cancelled`). A call whose connection is lost (the server exited, or its stream
 * broke and a ping finds the server gone) fails with McpConnectionLostError, which says whether
 * it is safe to call again. A result is the tool's `structuredContent` if it has one, else its
 * text (the text items joined by newlines), else its content items; `isError` is an McpToolError.
 *
 * ## Example
 * ```ts
 * const client = new Client({ name: 'planner', version: '1.0.0' });
 * await client.connect(new StdioClientTransport({ command: 'node', args: ['files-server.mjs'] }));
 * const tools = new ToolRegistry();
 * for (const { declaration, body } of await mcpTools(client, { perServer: 2, prefix: 'files_' })) tools.register(declaration, body);
 * // or: await new ToolRegistry().registerMcp(client, { perServer: 2, prefix: 'files_' })
 * ```
 */
export async function mcpTools(client: McpClient, options: McpToolsOptions = {}): Promise<McpTool[]> {
  if (client === null || typeof client !== 'object' || typeof client.listTools !== 'function' || typeof client.callTool !== 'function') {
    throw new ConfigError('client', `client must be a connected MCP client (listTools, callTool), got ${describeValue(client)}`);
  }
  const settings = checkOptions(options);
  const server = settings.server ?? client.getServerVersion?.()?.name;
  if (typeof server !== 'string' || server === '') {
    throw new ConfigError('server', 'the MCP server gave no name: name it with options.server (connect the client first)');
  }
  const listed = await listAll(client);
  const known = new Set(listed.map((tool) => tool.name));
  for (const name of [...(settings.tools ?? []), ...Object.keys(settings.overrides)]) {
    if (!known.has(name)) {
      throw new ConfigError('tools', `MCP server ${server} has no tool named ${JSON.stringify(name)}; its tools: ${[...known].join(', ') || '(none)'}`);
    }
  }
  const chosen = settings.tools === undefined ? listed : listed.filter((tool) => settings.tools!.includes(tool.name));
  const link = new ServerLink(client, server, settings.timeoutMs, settings.probeMs);
  const lane: ToolLane = Object.freeze({ key: `mcp:${server}`, limit: settings.perServer });
  return chosen.map((tool) => toolOf(tool, link, lane, settings));
}

interface Settings {
  readonly server: string | undefined;
  readonly perServer: number;
  readonly prefix: string;
  readonly tools: readonly string[] | undefined;
  readonly overrides: Readonly<Record<string, McpToolOverride>>;
  readonly timeoutMs: number | undefined;
  readonly probeMs: number;
}

function checkOptions(options: McpToolsOptions): Settings {
  if (options === null || typeof options !== 'object') throw new ConfigError('options', `mcpTools options must be an object, got ${describeValue(options)}`);
  refuseUnknownFields(options, optionFields, 'mcpTools options', { noun: 'option' });
  const { server, perServer = 4, prefix = '', tools, overrides = {}, timeoutSeconds, probeSeconds = 5 } = options;
  if (server !== undefined && (typeof server !== 'string' || server === '')) throw new ConfigError('server', `server must be a non-empty string, got ${describeValue(server)}`);
  if (!Number.isInteger(perServer) || perServer < 1) throw new ConfigError('perServer', `perServer must be a positive integer, got ${describeValue(perServer)}`);
  if (typeof prefix !== 'string') throw new ConfigError('prefix', `prefix must be a string, got ${describeValue(prefix)}`);
  if (tools !== undefined && (!Array.isArray(tools) || !tools.every((name) => typeof name === 'string'))) {
    throw new ConfigError('tools', `tools must be an array of the server's tool names, got ${describeValue(tools)}`);
  }
  if (overrides === null || typeof overrides !== 'object') throw new ConfigError('overrides', `overrides must be an object of tool names, got ${describeValue(overrides)}`);
  for (const [name, override] of Object.entries(overrides)) {
    if (override === null || typeof override !== 'object') throw new ConfigError(`overrides.${name}`, `overrides.${name} must be an object, got ${describeValue(override)}`);
    refuseUnknownFields(override, overrideFields, `overrides.${name}`, { field: `overrides.${name}` });
    for (const field of overrideFields) {
      const value = (override as Record<string, unknown>)[field];
      if (value !== undefined && typeof value !== 'boolean') throw new ConfigError(`overrides.${name}.${field}`, `overrides.${name}.${field} must be a boolean, got ${describeValue(value)}`);
    }
  }
  return { server, perServer, prefix, tools, overrides, timeoutMs: seconds(timeoutSeconds, 'timeoutSeconds'), probeMs: seconds(probeSeconds, 'probeSeconds')! };
}

function seconds(value: number | undefined, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !(value > 0) || !Number.isFinite(value)) throw new ConfigError(field, `${field} must be a positive number of seconds, got ${describeValue(value)}`);
  return value * 1000;
}

// Every page of the server's tools.
async function listAll(client: McpClient): Promise<McpToolInfo[]> {
  const tools: McpToolInfo[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? undefined : { cursor });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}

function toolOf(tool: McpToolInfo, link: ServerLink, lane: ToolLane, settings: Settings): McpTool {
  const name = `${settings.prefix}${tool.name}`;
  if (!namePattern.test(name)) {
    throw new ConfigError('prefix', `MCP tool ${JSON.stringify(tool.name)} of server ${link.server} would be named ${JSON.stringify(name)}, which is not 1 to 64 letters, digits, "_" or "-"; leave it out with options.tools`);
  }
  const { readOnlyHint, destructiveHint, idempotentHint, title } = tool.annotations ?? {};
  const override = Object.prototype.hasOwnProperty.call(settings.overrides, tool.name) ? settings.overrides[tool.name]! : {};
  const idempotent = override.idempotent ?? idempotentHint === true;
  // Only a tool that says it is destructive is run alone: MCP's default for an unannotated tool
  // is "may be destructive", which would put most servers' tools in a phase each.
  const parallelSafe = override.parallelSafe ?? !(destructiveHint === true && readOnlyHint !== true && !idempotent);
  const linked: LinkedTool = { name, listed: tool.name, idempotent };
  const declaration: ToolDeclaration<t.UnknownRecordC> = {
    name,
    description: tool.description ?? title ?? tool.title ?? '',
    args: t.UnknownRecord,
    parameters: parametersOf(tool, link.server),
    parallelSafe,
    idempotent,
    needsApproval: override.needsApproval ?? false,
    lane,
  };
  return { declaration, body: (args, ctx) => link.call(linked, args, ctx.signal), listed: tool };
}

// The input schema as the model is shown it: the server's, in its JSON form, without the
// `$schema` marker (metadata some providers refuse in tool parameters).
function parametersOf(tool: McpToolInfo, server: string): JsonSchema {
  let schema: unknown;
  try {
    schema = jsonForm(tool.inputSchema);
  } catch (error) {
    throw new ConfigError('inputSchema', `MCP tool ${tool.name} of server ${server} has an input schema that is not JSON (${toErrorInfo(error).message})`);
  }
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema) || (schema as JsonSchema)['type'] !== 'object') {
    throw new ConfigError('inputSchema', `MCP tool ${tool.name} of server ${server} has an input schema that is not an object schema: ${describeValue(tool.inputSchema)}`);
  }
  const { $schema: _marker, ...rest } = schema as JsonSchema;
  return rest;
}

/** A tool as its calls need it: its name here and on the server, and whether calling again is safe. */
interface LinkedTool {
  readonly name: string;
  readonly listed: string;
  readonly idempotent: boolean;
}

/** A call waiting for the server: what fails it if the server is found gone. */
interface InFlight {
  readonly tool: LinkedTool;
  readonly reject: (error: unknown) => void;
}

// One server's calls in flight, and the check that finds the server gone. A transport can lose a
// request without ever answering it (a Streamable HTTP stream that broke when its server died):
// every error the client reports while calls are in flight sets off a ping, and a ping that
// fails ends those calls. The SDK itself fails them when the connection closes (stdio).
class ServerLink {
  // Calls sent and not yet answered.
  private readonly inflight = new Set<InFlight>();
  // The ping asking whether the server is still there, while one is out.
  private probe: Promise<boolean> | undefined = undefined;

  constructor(
    private readonly client: McpClient,
    readonly server: string,
    private readonly timeoutMs: number | undefined,
    private readonly probeMs: number,
  ) {
    const before = client.onerror;
    client.onerror = (error: Error) => {
      before?.call(client, error);
      this.trouble();
    };
  }

  call(tool: LinkedTool, args: { readonly [key: string]: unknown }, signal: AbortSignal): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => {
      const flight: InFlight = { tool, reject };
      this.inflight.add(flight);
      const options: McpRequestOptions = this.timeoutMs === undefined ? { signal } : { signal, timeout: this.timeoutMs };
      let sent: Promise<unknown>;
      try {
        sent = this.client.callTool({ name: tool.listed, arguments: args as Record<string, unknown> }, undefined, options);
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

  // A call the client failed: the server's own error, or one that says the request never left,
  // goes back as it is; a closed connection is a lost call; anything else (a transport's error)
  // is a lost call only if the server is gone.
  private failed(flight: InFlight, error: unknown): void {
    const code = isMcpError(error) ? error.code : undefined;
    if (code === CONNECTION_CLOSED) {
      flight.reject(this.lost(flight.tool, 'the connection closed'));
      return;
    }
    if (code !== undefined || neverSent(error)) {
      flight.reject(error);
      return;
    }
    void this.check().then((alive) => flight.reject(alive ? error : this.lost(flight.tool, toErrorInfo(error).message)));
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
      .then(() => this.client.ping({ timeout: this.probeMs }))
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
