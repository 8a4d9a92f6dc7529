// A turn whose response asks for no call: the model's text is the run's final answer.
import { isLeft } from 'fp-ts/lib/Either.js';
import { RunError } from '../../errors.js';
import { check, type Checked } from '../../tools/index.js';
import type { Agent } from '../Agent.js';
import { failed, type RunEvent } from '../events.js';

/**
 * The run's final answer, decoded with the agent's output schema: RUN_COMPLETED with what it
 * decoded, or RUN_FAILED saying why not; a Promise when a Standard Schema checks it
 * asynchronously (it never rejects).
 */
export function finalAnswer(agent: Agent, text: string | undefined): RunEvent | Promise<RunEvent> {
  if (agent.output === undefined) return { type: 'RUN_COMPLETED', output: text ?? '' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text ?? '');
  } catch (error) {
    return failed(new RunError(`the final answer of ${agent.name} is not JSON (${(error as Error).message}); its output codec needs JSON`));
  }
  const answer = (decoded: Checked): RunEvent =>
    isLeft(decoded) ? failed(new RunError(`the final answer of ${agent.name} does not decode: ${decoded.left}`)) : { type: 'RUN_COMPLETED', output: decoded.right };
  const decoded = check(agent.output, parsed, 'output');
  return decoded instanceof Promise ? decoded.then(answer) : answer(decoded);
}
