// The runner's tools by name: each declaration (checked once, defaults filled in),
// its body, and what a model provider is shown of it (name, description, JSON Schema).
import { ConfigError } from '../errors.js';
import { toJsonSchema, type JsonSchema } from './jsonSchema.js';
import { mcpServerOf, type McpClient, type McpToolsOptions } from './mcp.js';
import { followToolList } from './mcpToolList.js';
import { isCodec, type Schema } from './standardSchema.js';
import type { ToolBody } from './ToolContext.js';
import { resolveDeclaration, type ArgsOf, type ResolvedDeclaration, type ToolDeclaration } from './ToolDeclaration.js';

/** What a model provider sees of a tool. `parallelSafe` and `idempotent` are never part of it. */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  readonly parameters: JsonSchema;
}

export interface RegisteredTool {
  readonly declaration: ResolvedDeclaration;
  readonly body: ToolBody<unknown>;
  readonly spec: ToolSpec;
}

/**
 * The tools a runner can dispatch.
 *
 * ## Example
 * ```ts
 * const tools = new ToolRegistry()
 *   .register({ name: 'search', args: t.type({ q: t.string }), idempotent: true }, ({ q }) => search(q))
 *   .register({ name: 'weather', args: z.object({ city: z.string() }) }, ({ city }) => forecast(city))
 *   .register({ name: 'booking', args: Booking, parallelSafe: false }, (booking, ctx) => book(booking, ctx.idempotencyKey));
 * ```
 */
export class ToolRegistry {
  private readonly tools = new Map<string, RegisteredTool>();
  // Tools taken out (an MCP server that stopped listing one), by name, with why.
  private readonly removed = new Map<string, string>();
  // Bumped by every change, so a runner sees a change from its next turn on.
  private changes = 0;

  /** Adds a tool; chainable. A second tool with the same name throws ConfigError. */
  register<C extends Schema | undefined = undefined>(declaration: ToolDeclaration<C>, body: ToolBody<ArgsOf<C>>): this {
    const resolved = resolveDeclaration(declaration);
    if (typeof body !== 'function') {
      throw new ConfigError('body', `the body of tool ${resolved.name} must be a function, got ${typeof body}`);
    }
    if (this.tools.has(resolved.name)) {
      throw new ConfigError('name', `a tool named ${resolved.name} is already registered`);
    }
    const spec: ToolSpec = { name: resolved.name, description: resolved.description, parameters: resolved.parameters ?? toJsonSchema(isCodec(resolved.args) ? resolved.args : undefined) };
    this.tools.set(resolved.name, { declaration: resolved, body: body as ToolBody<unknown>, spec });
    this.removed.delete(resolved.name);
    this.changes++;
    return this;
  }

  /**
   * Takes a tool out: a runner stops showing it to the model from its next turn, and a later call
   * to it fails alone with ToolRemovedError, saying `why` ("MCP server files no longer lists
   * it"). Returns false when no such tool was registered. A tool registered again comes back.
   */
  unregister(name: string, why = 'it was unregistered'): boolean {
    if (!this.tools.delete(name)) return false;
    this.removed.set(name, why);
    this.changes++;
    return true;
  }

  /** Why a tool of that name was taken out, if it was (and not registered again since). */
  removedWhy(name: string): string | undefined {
    return this.removed.get(name);
  }

  /** Counts the changes to the registry (tools registered or taken out): a runner rereads its tools when it moves. */
  get version(): number {
    return this.changes;
  }

  /**
   * Registers every tool of a connected MCP server (see `mcpTools`): its input schema shown to
   * the model, its annotations as scheduling facts, its server as a lane of its own. All or
   * nothing: a name already taken (or any other bad declaration) registers none of them. Then it
   * follows the server's `notifications/tools/list_changed`: tools it adds are registered, tools
   * it removes are taken out (docs/mcp.md).
   */
  async registerMcp(client: McpClient, options: McpToolsOptions = {}): Promise<this> {
    const served = await mcpServerOf(client, options);
    const { tools } = served;
    for (const { declaration } of tools) {
      if (this.tools.has(declaration.name)) {
        throw new ConfigError('name', `a tool named ${declaration.name} is already registered (give the MCP server's tools a prefix)`);
      }
      resolveDeclaration(declaration);
    }
    for (const { declaration, body } of tools) this.register(declaration, body);
    followToolList(this, served);
    return this;
  }

  get(name: string): RegisteredTool | undefined {
    return this.tools.get(name);
  }

  has(name: string): boolean {
    return this.tools.has(name);
  }

  /** How many tools are registered. */
  get size(): number {
    return this.tools.size;
  }

  /** The registered names, in registration order. */
  get names(): string[] {
    return [...this.tools.keys()];
  }

  /** What a provider is shown: every tool, or only those named (in that order). */
  specs(names?: readonly string[]): ToolSpec[] {
    if (names === undefined) return [...this.tools.values()].map((tool) => tool.spec);
    return names.map((name) => this.tools.get(name)?.spec).filter((spec): spec is ToolSpec => spec !== undefined);
  }
}
