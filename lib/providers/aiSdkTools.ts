// The tools an app already has for the AI SDK (`tool({ description, inputSchema, execute })`, the
// record it passes to `streamText`) as the runner's tools: their input schema checks the
// arguments and is what the model is shown, their `execute` is the body, and what the AI SDK
// cannot say (idempotent, parallelSafe, lanes, approval) is added beside them. The tools are
// read by their shape: nothing of `ai` is imported.
import { describeValue, refuseUnknownFields } from '../config/index.js';
import { ConfigError, toErrorInfo } from '../errors.js';
import { isPromiseLike } from '../batch/index.js';
import { own } from '../own.js';
import { isStandardSchema, ToolRegistry, type ConversationMessage, type JsonSchema, type Schema, type StandardResult, type StandardSchema, type ToolBody, type ToolContext, type ToolDeclaration, type ToolLane } from '../tools/index.js';
import type { ModelRequest } from '../runner/index.js';
import { executeAnswer } from './aiSdkExecute.js';
import { toAiSdkPrompt } from './aiSdkProvider.js';

/** One message as the AI SDK's `ModelMessage` holds it (its role and its content parts). */
export interface AiSdkModelMessage {
  readonly role: 'system' | 'user' | 'assistant' | 'tool';
  readonly content: unknown;
}

/** What an AI SDK tool's `execute` is given besides its input, as the AI SDK gives it. */
export interface AiSdkToolCallOptions {
  /** The call's id, as the model gave it (`ctx.callId`). */
  readonly toolCallId: string;
  /** The conversation the model was sent on the call's turn, as the AI SDK's model messages (`ctx.messages`). */
  readonly messages: readonly AiSdkModelMessage[];
  /** Aborts when the call is stopped or outruns its ceiling (`ctx.signal`). */
  readonly abortSignal?: AbortSignal;
  /** The tool's context, as ai 7 gives it (`extras.context[name]`; undefined if none is given). */
  readonly context?: unknown;
}

/**
 * What ai 7 calls a function description with: the tool's context (`extras.context[name]` here).
 * The runner has no sandbox, so `experimental_sandbox` is never given.
 */
export interface AiSdkDescriptionOptions {
  readonly context: unknown;
}

/**
 * An AI SDK tool, as far as the runner reads one: what `tool()` from `ai` returns, ai 6's or ai 7's.
 * `inputSchema` is a Standard Schema (zod 4, valibot, arktype), the AI SDK's `jsonSchema(...)` or
 * `zodSchema(...)` wrapper, or a function returning such a wrapper (`lazySchema`). `description`
 * is a string, or (ai 7) a function of the tool's context returning one: the runner calls it once,
 * when the tool is registered, with `{ context: extras.context[name] }`.
 */
export interface AiSdkTool {
  readonly type?: string;
  // The parameter is `never` so that ai 7's description, typed by the tool's own context, fits;
  // it is called with AiSdkDescriptionOptions.
  readonly description?: string | ((options: never) => string);
  readonly inputSchema: unknown;
  // A method, so a tool's own typed `execute` (its input and the AI SDK's options) fits it.
  execute?(input: never, options: AiSdkToolCallOptions): unknown;
  readonly needsApproval?: unknown;
}

/** What the AI SDK cannot say about its tools, by tool name. */
export interface AiSdkToolsExtras {
  /** A call stopped in flight is safe to call again. Default false. */
  readonly idempotent?: Readonly<Record<string, boolean>>;
  /** false: the tool's calls run alone, in a phase of their own. Default true. */
  readonly parallelSafe?: Readonly<Record<string, boolean>>;
  /** Every call passes the runner's `approve` first. Default: the tool's own `needsApproval` (a function counts as true). */
  readonly needsApproval?: Readonly<Record<string, boolean>>;
  /** A lane of the tool's own, taken after the tool lane (tools giving one key share it). */
  readonly lanes?: Readonly<Record<string, ToolLane>>;
  /**
   * The tool's context, as ai 7's `toolsContext` gives it: what a function description is called
   * with, and `options.context` in execute. Not checked against the tool's `contextSchema`.
   */
  readonly context?: Readonly<Record<string, unknown>>;
}

/** One AI SDK tool as the runner's declaration and body, for `ToolRegistry.register`. */
export interface AiSdkToolEntry {
  readonly declaration: ToolDeclaration<Schema | undefined>;
  readonly body: ToolBody<unknown>;
}

const extraFields = ['idempotent', 'parallelSafe', 'needsApproval', 'lanes', 'context'];

// The AI SDK's own schema wrapper (`jsonSchema(...)`, `zodSchema(...)`): the JSON Schema the
// model is shown, and maybe a validate function whose result is `{ success, value | error }`.
interface AiSdkSchema {
  readonly jsonSchema: unknown;
  readonly validate?: (value: unknown) => unknown;
}

// The AI SDK's validation result as a Standard Schema's.
function standardResult(result: unknown): StandardResult<unknown> {
  const { success, value, error } = (result ?? {}) as { success?: unknown; value?: unknown; error?: unknown };
  if (success === true) return { value };
  return { issues: [{ message: success === false ? toErrorInfo(error).message : `the schema's validate answered ${describeValue(result)}` }] };
}

// The wrapper's validate as a Standard Schema, so its failures read as any other's.
function standardOf(schema: AiSdkSchema, validate: (value: unknown) => unknown): StandardSchema {
  return {
    '~standard': {
      version: 1,
      vendor: 'ai',
      validate: (value) => {
        const result = validate.call(schema, value);
        return isPromiseLike(result) ? Promise.resolve(result).then(standardResult) : standardResult(result);
      },
    },
  };
}

// What a tool's inputSchema gives its declaration: a Standard Schema is taken as it is (the
// model is shown its own converter's JSON Schema); the AI SDK's wrapper gives its JSON Schema
// as the parameters, and its validate (if any) checks the arguments.
function argsOf(name: string, inputSchema: unknown): Pick<ToolDeclaration<Schema | undefined>, 'args' | 'parameters'> {
  if (isStandardSchema(inputSchema)) return { args: inputSchema };
  const schema = typeof inputSchema === 'function' ? (inputSchema as () => unknown)() : inputSchema;
  if (isStandardSchema(schema)) return { args: schema };
  if (schema === null || typeof schema !== 'object' || !('jsonSchema' in schema)) {
    throw new ConfigError(`${name}.inputSchema`, `tool ${name}: inputSchema must be a Standard Schema (zod, valibot, arktype) or the AI SDK's jsonSchema(...) / zodSchema(...), got ${describeValue(inputSchema)}`);
  }
  const wrapper = schema as AiSdkSchema;
  const { jsonSchema: parameters, validate } = wrapper;
  if (isPromiseLike(parameters)) {
    throw new ConfigError(`${name}.inputSchema`, `tool ${name}: its JSON Schema is given later (a Promise); the runner needs it when the tool is registered: give it as an object`);
  }
  return { parameters: parameters as JsonSchema, ...(typeof validate === 'function' ? { args: standardOf(wrapper, validate) } : {}) };
}

// The conversation as the AI SDK's model messages: the prompt it would send, without a system message.
function modelMessages(messages: readonly ConversationMessage[]): AiSdkModelMessage[] {
  const request: ModelRequest = { agent: '', model: '', instructions: '', messages, tools: [] };
  return toAiSdkPrompt(request) as AiSdkModelMessage[];
}

// The options an execute is given: its messages made only if it reads them.
class CallOptions implements AiSdkToolCallOptions {
  readonly toolCallId: string;
  readonly abortSignal: AbortSignal;
  readonly context: unknown;
  #messages: readonly AiSdkModelMessage[] | undefined = undefined;
  readonly #ctx: ToolContext;
  constructor(ctx: ToolContext, context: unknown) {
    this.toolCallId = ctx.callId;
    this.abortSignal = ctx.signal;
    this.context = context;
    this.#ctx = ctx;
  }

  get messages(): readonly AiSdkModelMessage[] {
    return (this.#messages ??= modelMessages(this.#ctx.messages));
  }
}

function bodyOf(execute: (input: unknown, options: AiSdkToolCallOptions) => unknown, context: unknown): ToolBody<unknown> {
  return (input, ctx) => executeAnswer(() => execute(input, new CallOptions(ctx, context)));
}

// The description the model is shown: a string as it is; a function (ai 7) called now, with the
// tool's context, as the AI SDK calls it when it prepares a step's tools.
function descriptionOf(name: string, description: unknown, context: unknown): string | undefined {
  if (description === undefined || typeof description === 'string') return description;
  if (typeof description !== 'function') throw new ConfigError(`${name}.description`, `tool ${name}: description must be a string or a function returning one, got ${describeValue(description)}`);
  let text: unknown;
  try {
    text = (description as (options: AiSdkDescriptionOptions) => unknown)({ context });
  } catch (error) {
    throw new ConfigError(`${name}.description`, `tool ${name}: its description function threw: ${toErrorInfo(error).message}`);
  }
  if (typeof text !== 'string') throw new ConfigError(`${name}.description`, `tool ${name}: its description function must return a string, got ${describeValue(text)}`);
  return text;
}

function flagOf(tool: AiSdkTool): boolean | undefined {
  const { needsApproval } = tool;
  if (needsApproval === undefined || typeof needsApproval === 'boolean') return needsApproval;
  // A function decides per call in the AI SDK; here every call goes to the runner's approve.
  return true;
}

function checkExtras(extras: AiSdkToolsExtras, names: ReadonlySet<string>): void {
  if (extras === null || typeof extras !== 'object') throw new ConfigError('extras', `the extras must be an object, got ${describeValue(extras)}`);
  refuseUnknownFields(extras, extraFields, 'the AI SDK tools extras');
  for (const field of extraFields) {
    const byTool = (extras as Readonly<Record<string, unknown>>)[field];
    if (byTool === undefined) continue;
    if (byTool === null || typeof byTool !== 'object') throw new ConfigError(field, `${field} must be an object keyed by tool name, got ${describeValue(byTool)}`);
    for (const name of Object.keys(byTool)) {
      if (!names.has(name)) throw new ConfigError(`${field}.${name}`, `${field} names ${name}, which is not one of the tools (${[...names].join(', ')})`);
    }
  }
}

/**
 * The AI SDK tools of `tools` (the record passed to `streamText`) as the runner's declarations
 * and bodies, with `extras` added. A tool without `execute`, or a provider-defined tool, is a
 * ConfigError naming it: the runner runs the bodies itself.
 *
 * ## Example
 * ```ts
 * const entries = aiSdkTools({ weather }, { idempotent: { weather: true } });
 * for (const { declaration, body } of entries) registry.register(declaration, body);
 * ```
 */
export function aiSdkTools(tools: Readonly<Record<string, AiSdkTool>>, extras: AiSdkToolsExtras = {}): AiSdkToolEntry[] {
  if (tools === null || typeof tools !== 'object') throw new ConfigError('tools', `the tools must be a record of AI SDK tools, got ${describeValue(tools)}`);
  const names = Object.keys(tools);
  checkExtras(extras, new Set(names));
  return names.map((name) => {
    const tool = tools[name]!;
    if (tool === null || typeof tool !== 'object') throw new ConfigError(name, `tool ${name} must be an AI SDK tool, got ${describeValue(tool)}`);
    if (tool.type !== undefined && tool.type !== 'function' && tool.type !== 'dynamic') {
      throw new ConfigError(`${name}.type`, `tool ${name} is a ${String(tool.type)} tool, run by its provider; only tools with an execute of their own can run in the lanes`);
    }
    if (typeof tool.execute !== 'function') throw new ConfigError(`${name}.execute`, `tool ${name} has no execute function; the runner runs each tool's body itself`);
    const needsApproval = (extras.needsApproval === undefined ? undefined : own(extras.needsApproval, name)) ?? flagOf(tool);
    const idempotent = (extras.idempotent === undefined ? undefined : own(extras.idempotent, name));
    const parallelSafe = (extras.parallelSafe === undefined ? undefined : own(extras.parallelSafe, name));
    const lane = (extras.lanes === undefined ? undefined : own(extras.lanes, name));
    const context = extras.context === undefined ? undefined : own(extras.context, name);
    const description = descriptionOf(name, tool.description, context);
    const declaration: ToolDeclaration<Schema | undefined> = {
      name,
      ...(description !== undefined ? { description } : {}),
      ...argsOf(name, tool.inputSchema),
      ...(needsApproval !== undefined ? { needsApproval } : {}),
      ...(idempotent !== undefined ? { idempotent } : {}),
      ...(parallelSafe !== undefined ? { parallelSafe } : {}),
      ...(lane !== undefined ? { lane } : {}),
    };
    return { declaration, body: bodyOf(tool.execute as (input: unknown, options: AiSdkToolCallOptions) => unknown, context) };
  });
}

/**
 * Registers the AI SDK tools of `tools` in `registry` (a new one if none is given), with
 * `extras`, and returns it. All or nothing: a bad tool, or a name already taken, registers none.
 *
 * ## Example
 * ```ts
 * const registry = registerAiSdkTools({ weather, bookFlight }, {
 *   idempotent: { weather: true },
 *   parallelSafe: { bookFlight: false },
 *   needsApproval: { bookFlight: true },
 * });
 * ```
 */
export function registerAiSdkTools(tools: Readonly<Record<string, AiSdkTool>>, extras: AiSdkToolsExtras = {}, registry: ToolRegistry = new ToolRegistry()): ToolRegistry {
  const entries = aiSdkTools(tools, extras);
  // Checked on a scratch registry first, so a failure leaves `registry` as it was.
  const scratch = new ToolRegistry();
  for (const { declaration, body } of entries) {
    if (registry.has(declaration.name)) throw new ConfigError('name', `a tool named ${declaration.name} is already registered`);
    scratch.register(declaration, body);
  }
  for (const { declaration, body } of entries) registry.register(declaration, body);
  return registry;
}
