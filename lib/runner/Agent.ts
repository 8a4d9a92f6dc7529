// Agent: who the model is for a run (name, instructions, model), what its final
// answer must look like, which tools it may call, how it narrows the runner's lanes
// for its own turns, and what a failed call does to the run.
import { ConcurrencyConfig, describeValue, refuseNonConfig, refuseUnknownFields, type ConcurrencyOptions } from '../config/index.js';
import { ConfigError } from '../errors.js';
import { namePattern, nameRule } from '../tools/names.js';
import { isCodec, isStandardSchema, type Schema } from '../tools/standardSchema.js';

/** What a failed call does to its run. */
export const OnToolError = {
  /** The failure goes back to the model beside its siblings' results (the default). */
  SURFACE_TO_MODEL: 'SURFACE_TO_MODEL',
  /** The run ends; siblings still running or queued are stopped and classified. */
  FAIL_RUN: 'FAIL_RUN',
} as const;
export type OnToolError = (typeof OnToolError)[keyof typeof OnToolError];

export interface AgentOptions<O = unknown> {
  /** What the agent is called: 1 to 64 letters, digits, "_" or "-", as a tool's name (model APIs take no other). */
  readonly name: string;
  readonly instructions: string;
  readonly model: string;
  /** The final answer is the model's text. Default: true unless `output` is given. */
  readonly freeText?: boolean;
  /** The final answer is JSON text decoding with this io-ts codec or Standard Schema (zod, valibot, arktype). */
  readonly output?: Schema<O>;
  /** Narrows the runner's lanes for this agent's turns; never widens them. A config or its options. */
  readonly concurrency?: ConcurrencyConfig | ConcurrencyOptions;
  readonly onToolError?: OnToolError;
  /** The registry tools this agent may call (all of them when absent). */
  readonly tools?: readonly string[];
}

const fields = ['name', 'instructions', 'model', 'freeText', 'output', 'concurrency', 'onToolError', 'tools'];

function text(options: Readonly<Record<string, unknown>>, field: string, required: boolean): string {
  const value = options[field];
  if (typeof value === 'string' && (value !== '' || !required)) return value;
  throw new ConfigError(field, `Agent ${field} must be a ${required ? 'non-empty ' : ''}string, got ${describeValue(value)}`);
}

export class Agent<O = unknown> {
  readonly name: string;
  readonly instructions: string;
  readonly model: string;
  readonly freeText: boolean;
  readonly output: Schema<O> | undefined;
  readonly concurrency: ConcurrencyConfig | undefined;
  readonly onToolError: OnToolError;
  readonly tools: readonly string[] | undefined;

  constructor(options: AgentOptions<O>) {
    if (options === null || typeof options !== 'object') {
      throw new ConfigError('Agent', `Agent options must be an object, got ${describeValue(options)}`);
    }
    const record = options as unknown as Readonly<Record<string, unknown>>;
    refuseUnknownFields(record, fields, 'Agent');
    // Checked as a tool's name is: where a model API is shown an agent's name (an agent offered as
    // a tool, a message's `name`), it takes no other.
    const { name } = record;
    if (typeof name !== 'string' || !namePattern.test(name)) throw new ConfigError('name', `Agent name must be ${nameRule}, got ${describeValue(name)}`);
    this.name = name;
    this.instructions = text(record, 'instructions', false);
    this.model = text(record, 'model', true);
    const { output, concurrency, onToolError = OnToolError.SURFACE_TO_MODEL, tools, freeText } = options;
    if (output !== undefined && !isStandardSchema(output) && !isCodec(output)) {
      throw new ConfigError('output', `Agent output must be an io-ts codec or a Standard Schema (zod, valibot, arktype), got ${describeValue(output)}`);
    }
    if (freeText !== undefined && typeof freeText !== 'boolean') {
      throw new ConfigError('freeText', `Agent freeText must be a boolean, got ${describeValue(freeText)}`);
    }
    if (freeText === true && output !== undefined) {
      throw new ConfigError('freeText', 'Agent freeText cannot be true with an output codec: the final answer is either free text or decoded JSON');
    }
    refuseNonConfig(concurrency, 'concurrency', 'ConcurrencyConfig', 'Agent concurrency');
    if (onToolError !== OnToolError.SURFACE_TO_MODEL && onToolError !== OnToolError.FAIL_RUN) {
      throw new ConfigError('onToolError', `Agent onToolError must be SURFACE_TO_MODEL or FAIL_RUN, got ${describeValue(onToolError)}`);
    }
    if (tools !== undefined && (!Array.isArray(tools) || tools.some((name) => typeof name !== 'string'))) {
      throw new ConfigError('tools', `Agent tools must be an array of tool names, got ${describeValue(tools)}`);
    }
    this.freeText = freeText ?? output === undefined;
    this.output = output;
    // Plain options are checked by ConcurrencyConfig itself, with its messages.
    this.concurrency = concurrency === undefined || concurrency instanceof ConcurrencyConfig ? concurrency : new ConcurrencyConfig(concurrency);
    this.onToolError = onToolError;
    this.tools = tools === undefined ? undefined : Object.freeze([...tools]);
    Object.freeze(this);
  }
}
