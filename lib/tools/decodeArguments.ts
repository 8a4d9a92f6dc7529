// A call's arguments, as the model sent them (JSON text or an object), decoded with
// the tool's codec. Every failure is a value, never a throw: it becomes a TOOL_ERROR
// on that call alone and the call is never dispatched.
import { isLeft, left, right, type Either } from 'fp-ts/lib/Either.js';
import { describeFailures } from '../config/index.js';
import { ToolArgumentsError } from '../errors.js';
import type { ResolvedDeclaration } from './ToolDeclaration.js';

function parse(tool: string, text: string): Either<ToolArgumentsError, unknown> {
  // Some providers send an empty string for a call without arguments.
  if (text.trim() === '') return right({});
  try {
    return right(JSON.parse(text) as unknown);
  } catch (error) {
    return left(new ToolArgumentsError(tool, `arguments are not valid JSON (${(error as Error).message})`));
  }
}

/** Parses (if text) and decodes a call's arguments with `declaration.args`. */
export function decodeArguments(declaration: ResolvedDeclaration, raw: unknown): Either<ToolArgumentsError, unknown> {
  const parsed = typeof raw === 'string' ? parse(declaration.name, raw) : right(raw ?? {});
  if (isLeft(parsed) || declaration.args === undefined) return parsed;
  const decoded = declaration.args.decode(parsed.right);
  return isLeft(decoded) ? left(new ToolArgumentsError(declaration.name, describeFailures(decoded.left, 'args'))) : decoded;
}
