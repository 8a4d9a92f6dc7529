// ToolDeclaration: what a tool is (its name, description and argument codec) and
// three separate facts about it: parallelSafe (scheduling), idempotent (what a stop
// may claim) and needsApproval (the gate). Only name, description and the argument
// schema are ever shown to a model provider.
import * as t from 'io-ts';
import { ConfigError } from '../errors.js';
import { describeValue, refuseUnknownFields } from '../config/index.js';

export interface ToolDeclaration<C extends t.Decoder<unknown, unknown> | undefined = t.Decoder<unknown, unknown> | undefined> {
  /** 1 to 64 letters, digits, `_` or `-`: what providers accept as a tool name. */
  readonly name: string;
  readonly description?: string;
  /** Decodes the model's arguments before dispatch; a failure is a TOOL_ERROR on that call alone. */
  readonly args?: C;
  /** false: the call runs in a phase of its own, and identical concurrent calls run one at a time. Default true. */
  readonly parallelSafe?: boolean;
  /** true: a call stopped in flight is reported as safe to call again. Default false. */
  readonly idempotent?: boolean;
  /** true: every call passes the runner's `approve` first. Default false. */
  readonly needsApproval?: boolean;
}

/** The arguments a body receives: what the codec decodes to, or the raw JSON value without one. */
export type ArgsOf<C> = C extends t.Decoder<unknown, infer A> ? A : unknown;

/** A declaration with every default filled in. */
export interface ResolvedDeclaration {
  readonly name: string;
  readonly description: string;
  readonly args: t.Decoder<unknown, unknown> | undefined;
  readonly parallelSafe: boolean;
  readonly idempotent: boolean;
  readonly needsApproval: boolean;
}

const namePattern = /^[A-Za-z0-9_-]{1,64}$/;
const fields = ['name', 'description', 'args', 'parallelSafe', 'idempotent', 'needsApproval'];

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
    throw new ConfigError('name', `name must be 1 to 64 letters, digits, "_" or "-", got ${describeValue(name)}`);
  }
  if (description !== undefined && typeof description !== 'string') {
    throw new ConfigError('description', `description must be a string, got ${describeValue(description)}`);
  }
  if (args !== undefined && (args === null || typeof (args as { decode?: unknown }).decode !== 'function')) {
    throw new ConfigError('args', `args must be an io-ts codec, got ${describeValue(args)}`);
  }
  return {
    name,
    description: description ?? '',
    args,
    parallelSafe: flag(record, 'parallelSafe', true),
    idempotent: flag(record, 'idempotent', false),
    needsApproval: flag(record, 'needsApproval', false),
  };
}
