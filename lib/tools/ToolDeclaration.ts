// ToolDeclaration: what a tool is (its name, description and argument codec) and
// three separate facts about it: parallelSafe (scheduling), idempotent (what a stop
// may claim) and needsApproval (the gate), and a lane of its own if it has one (its
// server's). Only name, description and the argument schema are ever shown to a model provider.
// The arguments are checked with an io-ts codec or with any Standard Schema (zod, valibot, arktype).
import { ConfigError, toErrorInfo } from '../errors.js';
import { describeValue, refuseUnknownFields } from '../config/index.js';
import { jsonForm } from '../json.js';
import type { JsonSchema } from './jsonSchema.js';
import { namePattern, nameRule } from './names.js';
import { describeStandard, isCodec, isStandardSchema, type Schema, type SchemaOutput, type StandardSchema } from './standardSchema.js';

/**
 * A lane a tool's calls take besides the runner's (after the tool lane): `key` names it in the
 * runner's shared lanes, across every run, and `limit` is its permits. Tools that give the same
 * key share the lane (an MCP server's tools share their server's); the first to make it sets
 * its limit while it is in use.
 */
export interface ToolLane {
  readonly key: string;
  readonly limit: number;
}

export interface ToolDeclaration<C extends Schema | undefined = Schema | undefined> {
  /** 1 to 64 letters, digits, `_` or `-`: what providers accept as a tool name. */
  readonly name: string;
  readonly description?: string;
  /**
   * Checks the model's arguments before the call enters its lanes; a failure is a TOOL_ERROR on that call alone.
   * An io-ts codec, or a Standard Schema (zod 4, valibot, arktype): the model is shown the JSON
   * Schema the codec describes, or the one the Standard Schema's own converter gives
   * (`~standard.jsonSchema`, zod's `toJSONSchema`); one without a converter needs `parameters`.
   */
  readonly args?: C;
  /** false: the call runs in a phase of its own, and identical concurrent calls run one at a time. Default true. */
  readonly parallelSafe?: boolean;
  /** true: a call stopped in flight is reported as safe to call again. Default false. */
  readonly idempotent?: boolean;
  /** true: every call passes the runner's `approve` first. Default false. */
  readonly needsApproval?: boolean;
  /**
   * The JSON Schema the model is shown for the arguments, as it is (an MCP server's input
   * schema), in place of the one derived from `args`. An object schema (`type: 'object'`).
   * `args`, if given too, still decodes what the model sends.
   */
  readonly parameters?: JsonSchema;
  /** A lane of the tool's own, taken after the tool lane: calls to one server share its lane. */
  readonly lane?: ToolLane;
  /**
   * What one call costs, for the tenant's cost budget (`perTenantBudget.cost`): a call the budget
   * cannot cover is not started. A body may report its actual cost (`ctx.reportCost`), which
   * replaces this figure. A positive finite number; absent: a call costs nothing until it reports.
   */
  readonly cost?: number;
}

/** The arguments a body receives: what the codec decodes to (or the schema's output), or the raw JSON value without one. */
export type ArgsOf<C> = SchemaOutput<C>;

/** A declaration with every default filled in. */
export interface ResolvedDeclaration {
  readonly name: string;
  readonly description: string;
  readonly args: Schema | undefined;
  readonly parallelSafe: boolean;
  readonly idempotent: boolean;
  readonly needsApproval: boolean;
  /** The schema shown as it is (declared, or a Standard Schema's own), or undefined to derive it from an io-ts `args`. */
  readonly parameters: JsonSchema | undefined;
  readonly lane: ToolLane | undefined;
  /** What one call costs, for cost budgets (undefined: nothing declared). */
  readonly cost: number | undefined;
}

const fields = ['name', 'description', 'args', 'parallelSafe', 'idempotent', 'needsApproval', 'parameters', 'lane', 'cost'];
// The keys of the lanes the batch takes itself: a tool's own lane must not land in one of them.
const reservedLane = /^(tenant|turn|turn-tool|tool|args):/;

// The schema in its JSON form (a frozen copy, so the caller's object can change nothing later),
// an object schema since providers take no other kind of tool parameters.
function checkParameters(parameters: unknown): JsonSchema {
  let form: unknown;
  try {
    form = jsonForm(parameters);
  } catch (error) {
    throw new ConfigError('parameters', `parameters must be a JSON Schema in plain JSON (${toErrorInfo(error).message})`);
  }
  if (!isObjectSchema(form)) {
    throw new ConfigError('parameters', `parameters must be an object JSON Schema ({ type: 'object', ... }), got ${describeValue(parameters)}`);
  }
  return form;
}

function isObjectSchema(form: unknown): form is JsonSchema {
  return form !== null && typeof form === 'object' && !Array.isArray(form) && (form as JsonSchema)['type'] === 'object';
}

// What the model is shown for a Standard Schema's arguments: its converter's JSON Schema, an
// object schema in plain JSON, without `$schema` (a provider reads the vocabulary, not its name).
function standardParameters(name: string, args: StandardSchema): JsonSchema {
  const fix = `give the declaration \`parameters\` (an object JSON Schema) or a schema whose library converts it (zod 4, arktype, valibot through @valibot/to-json-schema's toStandardJsonSchema)`;
  const described = describeStandard(args);
  if ('missing' in described) throw new ConfigError('args', `tool ${name}: the model cannot be shown its arguments: ${described.missing}; ${fix}`);
  let form: unknown;
  try {
    form = jsonForm(described.schema);
  } catch (error) {
    throw new ConfigError('args', `tool ${name}: the JSON Schema of its args is not plain JSON (${toErrorInfo(error).message}); ${fix}`);
  }
  if (!isObjectSchema(form)) throw new ConfigError('args', `tool ${name}: its args must describe an object (type: 'object'), got ${describeValue(described.schema)}`);
  const { $schema: _name, ...schema } = form;
  return schema;
}

function checkLane(lane: unknown): ToolLane {
  if (lane === null || typeof lane !== 'object') throw new ConfigError('lane', `lane must be an object { key, limit }, got ${describeValue(lane)}`);
  refuseUnknownFields(lane, ['key', 'limit'], 'a tool lane', { field: 'lane' });
  const { key, limit } = lane as { key?: unknown; limit?: unknown };
  if (typeof key !== 'string' || key === '' || reservedLane.test(key)) {
    throw new ConfigError('lane.key', `lane.key must be a non-empty string not starting with tenant:, turn:, turn-tool:, tool: or args:, got ${describeValue(key)}`);
  }
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1) {
    throw new ConfigError('lane.limit', `lane.limit must be a positive integer, got ${describeValue(limit)}`);
  }
  return Object.freeze({ key, limit });
}

function flag(declaration: Readonly<Record<string, unknown>>, field: string, fallback: boolean): boolean {
  const value = declaration[field];
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') {
    throw new ConfigError(field, `${field} must be a boolean, got ${describeValue(value)}`);
  }
  return value;
}

/** Checks a declaration and fills in its defaults; throws a ConfigError naming the bad field. */
export function resolveDeclaration(declaration: ToolDeclaration): ResolvedDeclaration {
  if (declaration === null || typeof declaration !== 'object') {
    throw new ConfigError('declaration', `a tool declaration must be an object, got ${describeValue(declaration)}`);
  }
  const record = declaration as unknown as Readonly<Record<string, unknown>>;
  refuseUnknownFields(record, fields, 'a tool declaration');
  const { name, description, args } = declaration;
  if (typeof name !== 'string' || !namePattern.test(name)) {
    throw new ConfigError('name', `name must be ${nameRule}, got ${describeValue(name)}`);
  }
  if (description !== undefined && typeof description !== 'string') {
    throw new ConfigError('description', `description must be a string, got ${describeValue(description)}`);
  }
  if (args !== undefined && !isStandardSchema(args) && !isCodec(args)) {
    throw new ConfigError('args', `args must be an io-ts codec or a Standard Schema (zod, valibot, arktype), got ${describeValue(args)}`);
  }
  const declared = declaration.parameters === undefined ? undefined : checkParameters(declaration.parameters);
  return {
    name,
    description: description ?? '',
    args,
    parallelSafe: flag(record, 'parallelSafe', true),
    idempotent: flag(record, 'idempotent', false),
    needsApproval: flag(record, 'needsApproval', false),
    parameters: declared ?? (args !== undefined && isStandardSchema(args) ? standardParameters(name, args) : undefined),
    lane: declaration.lane === undefined ? undefined : checkLane(declaration.lane),
    cost: checkCost(declaration.cost),
  };
}

// A declared cost: a positive finite number, or absent.
function checkCost(cost: unknown): number | undefined {
  if (cost === undefined) return undefined;
  if (typeof cost !== 'number' || !Number.isFinite(cost) || cost <= 0) throw new ConfigError('cost', `cost must be a positive finite number, got ${describeValue(cost)}`);
  return cost;
}
