// A call's arguments, as the model sent them (JSON text or an object), decoded with
// the tool's codec or Standard Schema. Every failure is a value, never a throw: it becomes a
// TOOL_ERROR on that call alone and the call is never dispatched. What is decoded shares nothing
// with what the model sent, so a body that changes its arguments changes only its own.
import { isLeft, left, right, type Either } from 'fp-ts/lib/Either.js';
import { ToolArgumentsError, toErrorInfo } from '../errors.js';
import { describePath, MAX_NESTING, NestedTooDeepError, nestedTooDeep, tooDeep } from '../nesting.js';
import { ownCopy } from './plainData.js';
import { check, type Checked } from './standardSchema.js';
import type { ResolvedDeclaration } from './ToolDeclaration.js';

function parse(tool: string, text: string): Either<ToolArgumentsError, unknown> {
  // Some providers send an empty string for a call without arguments.
  if (text.trim() === '') return right({});
  let parsed: unknown;
  try {
    parsed = JSON.parse(text) as unknown;
  } catch (error) {
    return left(new ToolArgumentsError(tool, `arguments are not valid JSON (${(error as Error).message})`));
  }
  // Nesting past the limit takes at least two characters a level: shorter text is not measured.
  const deep = text.length > 2 * MAX_NESTING ? nestedTooDeep(parsed) : undefined;
  return deep === undefined ? right(parsed) : left(tooDeepArguments(tool, describePath('args', deep)));
}

// Arguments the body, the policies and the lanes' canonical JSON could not walk without running out of stack.
function tooDeepArguments(tool: string, path: string): ToolArgumentsError {
  return new ToolArgumentsError(tool, `arguments ${tooDeep} at ${path}`);
}

// Arguments sent as an object are the reply's own (and the transcript's): the codec reads a
// copy, since io-ts hands back the very object it was given when nothing needed changing.
// Text is parsed into a fresh object already, and needs no copy.
function copy(tool: string, raw: unknown): Either<ToolArgumentsError, unknown> {
  try {
    return right(ownCopy(raw));
  } catch (error) {
    if (error instanceof NestedTooDeepError) return left(tooDeepArguments(tool, error.path));
    return left(new ToolArgumentsError(tool, `arguments cannot be copied for the body (${toErrorInfo(error).message})`));
  }
}

/** A call's decoded arguments, or why they are refused. */
export type DecodedArguments = Either<ToolArgumentsError, unknown>;

/**
 * Parses (if text) or copies (if an object) a call's arguments, and decodes them with
 * `declaration.args`. The verdict is given at once, except from a Standard Schema that checks
 * asynchronously: then it is a Promise, which never rejects.
 */
export function decodeArguments(declaration: ResolvedDeclaration, raw: unknown): DecodedArguments | Promise<DecodedArguments> {
  const parsed = typeof raw === 'string' ? parse(declaration.name, raw) : raw == null ? right({}) : copy(declaration.name, raw);
  if (isLeft(parsed) || declaration.args === undefined) return parsed;
  const checked = check(declaration.args, parsed.right, 'args');
  return checked instanceof Promise ? checked.then((later) => refusedIf(declaration.name, later)) : refusedIf(declaration.name, checked);
}

function refusedIf(tool: string, checked: Checked): DecodedArguments {
  return isLeft(checked) ? left(new ToolArgumentsError(tool, checked.left)) : checked;
}
