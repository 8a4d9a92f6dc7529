// Tools from a Model Context Protocol server: every tool the server lists becomes a tool of the
// registry, shown to the model with the server's own input schema, scheduled by its annotations
// (idempotent, parallel-safe) and run in a lane of its server's, so one slow server cannot take
// the whole turn. The client is the caller's (`@modelcontextprotocol/sdk`'s Client, over stdio or
// Streamable HTTP); nothing here imports the SDK, so the library loads without it.
import * as t from 'io-ts';
import { describeValue, refuseUnknownFields } from '../config/index.js';
import { ConfigError, toErrorInfo } from '../errors.js';
import { jsonForm } from '../json.js';
import type { JsonSchema } from './jsonSchema.js';
import { ServerLink, type LinkedTool } from './mcpLink.js';
import { namesOf } from './mcpNames.js';
import { namePattern } from './names.js';
import type { ToolBody } from './ToolContext.js';
import type { ToolDeclaration, ToolLane } from './ToolDeclaration.js';

/**
 * Per request, as the SDK takes them: the call's signal (its cancellation), a time limit in ms,
 * and the server's progress (each report restarts the time limit, up to `maxTotalTimeout`).
 */
export interface McpRequestOptions {
  readonly signal?: AbortSignal;
  readonly timeout?: number;
  readonly onprogress?: (progress: McpProgress) => void;
  readonly resetTimeoutOnProgress?: boolean;
  readonly maxTotalTimeout?: number;
}

/** A progress report from the server (MCP's `notifications/progress`), as the SDK hands it on. */
export interface McpProgress {
  readonly progress: number;
  readonly total?: number;
  readonly message?: string;
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
 * client's transport errors can set off the check for a server that went away; so is
 * `fallbackNotificationHandler`, through which registerMcp follows the server's list of tools.
 */
export interface McpClient {
  listTools(params?: { cursor?: string }, options?: McpRequestOptions): Promise<{ readonly tools: readonly McpToolInfo[]; readonly nextCursor?: string }>;
  callTool(params: { name: string; arguments?: Record<string, unknown>; _meta?: Record<string, unknown> }, resultSchema?: undefined, options?: McpRequestOptions): Promise<unknown>;
  ping(options?: McpRequestOptions): Promise<unknown>;
  getServerVersion(): { readonly name: string } | undefined;
  onerror?: ((error: Error) => void) | undefined;
  /** Where the client hands a notification it has no handler for; registerMcp chains it to hear `notifications/tools/list_changed`. */
  fallbackNotificationHandler?: ((notification: { readonly method: string }) => Promise<void>) | undefined;
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
  /** Each request's time limit for the SDK, in seconds, restarted by every progress report. Default: the SDK's own (60 s). */
  readonly timeoutSeconds?: number;
  /** The most a request may take, however much progress it reports, in seconds. Default: none (the call's own ceilings still bound it). */
  readonly maxTotalSeconds?: number;
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

const optionFields = ['server', 'perServer', 'prefix', 'tools', 'overrides', 'timeoutSeconds', 'maxTotalSeconds', 'probeSeconds'];
const overrideFields = ['parallelSafe', 'idempotent', 'needsApproval'];

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
 * A name a model API cannot take (a dot, a space, more than 64 characters) is mapped to one it
 * can (namesOf: the same way every time, never another tool's); the server is called by its own.
 *
 * A call passes its signal to the SDK, so a stopped call is cancelled on the server (MCP's
 * `notifications/cancelled`), and sends its idempotency key and fencing tokens in `_meta`
 * (`mcpMetaKeys`). The server's progress keeps the request alive and reaches `activity$`. A
 * request the client gave up on (its timeout), a gateway's 504 or a connection cut while the
 * server stays up is a call stopped in flight (CallInterruptedError). A call whose connection is
 * lost (the server exited, or its stream broke and a ping finds the server gone) fails with
 * McpConnectionLostError, which says whether it is safe to call again. A result is the tool's
 * `structuredContent` if it has one, else its text (the text items joined by newlines), else
 * its content items; `isError` is an McpToolError. `registry.registerMcp` also follows the
 * server's list of tools as it changes; `mcpTools` alone is a snapshot.
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
  return (await mcpServerOf(client, options)).tools;
}

/** A connected server's tools, and what is needed to make more of them as its list changes. */
export interface McpServerTools {
  readonly client: McpClient;
  readonly server: string;
  readonly link: ServerLink;
  readonly settings: Settings;
  readonly lane: ToolLane;
  readonly tools: McpTool[];
}

/** The server's tools as mcpTools gives them, with the link they share (registerMcp follows its list with it). */
export async function mcpServerOf(client: McpClient, options: McpToolsOptions, taken?: ReadonlySet<string>): Promise<McpServerTools> {
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
  const chosen = chosenOf(listed, settings);
  const firstUnfit = chosen.find((tool) => !namePattern.test(`${settings.prefix}${tool.name}`) && namePattern.test(tool.name));
  if (!/^[A-Za-z0-9_-]{0,56}$/.test(settings.prefix)) {
    const example = firstUnfit ?? chosen[0];
    const shown = example === undefined ? '' : `MCP tool ${JSON.stringify(example.name)} of server ${server} would be named ${JSON.stringify(`${settings.prefix}${example.name}`)}, which is not 1 to 64 letters, digits, "_" or "-": `;
    throw new ConfigError('prefix', `${shown}the prefix ${JSON.stringify(settings.prefix)} must be at most 56 letters, digits, "_" or "-"`);
  }
  const names = namesOf(chosen.map((tool) => tool.name), settings.prefix, taken);
  const link = new ServerLink(client, server, { timeoutMs: settings.timeoutMs, maxTotalMs: settings.maxTotalMs, probeMs: settings.probeMs });
  const lane: ToolLane = Object.freeze({ key: `mcp:${server}`, limit: settings.perServer });
  return { client, server, link, settings, lane, tools: chosen.map((tool) => toolOf(tool, names.get(tool.name)!, link, lane, settings)) };
}

/** The tools of a listing that the options choose. */
export function chosenOf(listed: readonly McpToolInfo[], settings: Settings): McpToolInfo[] {
  return settings.tools === undefined ? [...listed] : listed.filter((tool) => settings.tools!.includes(tool.name));
}

/** The options, checked, in the units the SDK takes. */
export interface Settings {
  readonly server: string | undefined;
  readonly perServer: number;
  readonly prefix: string;
  readonly tools: readonly string[] | undefined;
  readonly overrides: Readonly<Record<string, McpToolOverride>>;
  readonly timeoutMs: number | undefined;
  readonly maxTotalMs: number | undefined;
  readonly probeMs: number;
}

function checkOptions(options: McpToolsOptions): Settings {
  if (options === null || typeof options !== 'object') throw new ConfigError('options', `mcpTools options must be an object, got ${describeValue(options)}`);
  refuseUnknownFields(options, optionFields, 'mcpTools options', { noun: 'option' });
  const { server, perServer = 4, prefix = '', tools, overrides = {}, timeoutSeconds, maxTotalSeconds, probeSeconds = 5 } = options;
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
  return { server, perServer, prefix, tools, overrides, timeoutMs: seconds(timeoutSeconds, 'timeoutSeconds'), maxTotalMs: seconds(maxTotalSeconds, 'maxTotalSeconds'), probeMs: seconds(probeSeconds, 'probeSeconds')! };
}

function seconds(value: number | undefined, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !(value > 0) || !Number.isFinite(value)) throw new ConfigError(field, `${field} must be a positive number of seconds, got ${describeValue(value)}`);
  return value * 1000;
}

/** Every page of the server's tools. */
export async function listAll(client: McpClient): Promise<McpToolInfo[]> {
  const tools: McpToolInfo[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? undefined : { cursor });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}

/** One tool of the server, named `name` here (see namesOf). */
export function toolOf(tool: McpToolInfo, name: string, link: ServerLink, lane: ToolLane, settings: Settings): McpTool {
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
  return { declaration, body: (args, ctx) => link.call(linked, args, ctx), listed: tool };
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
