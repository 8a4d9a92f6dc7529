// What the crash cells share with the process they kill (recoverChild.ts): the agent, the one
// turn of six calls to `work`, and bodies that write each start and end to a log file, one line
// each ("start <id> <pid> <ms>", "end <id> <pid>"), so the bodies of both processes are counted
// from one record.
import { appendFileSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Agent, ToolRegistry, type ModelResponse } from '../../lib/index.js';
import { declarationOf, ids, Tally, TOOL, type Kind } from './kinds.js';

export const agent = new Agent({ name: 'journaled', instructions: '', model: 'scripted' });
export const calls = ids('c', 6);
export const turn: ModelResponse = { toolCalls: calls.map((id) => ({ id, name: TOOL, arguments: {} })) };

/** The `work` tool under `kind`; each body logs itself to `log`, then does what `answer` says. */
export function loggedTools(kind: Kind, log: string, answer: (callId: string) => Promise<unknown>): ToolRegistry {
  return new ToolRegistry().register(declarationOf(kind), async (_args, ctx) => {
    appendFileSync(log, `start ${ctx.callId} ${process.pid} ${performance.timeOrigin + performance.now()} ${ctx.runId}\n`);
    const value = await answer(ctx.callId);
    appendFileSync(log, `end ${ctx.callId} ${process.pid}\n`);
    return value;
  });
}

/** The log of `log` read into a Tally: the bodies of `killedPid` still running when the first line of another process comes were killed. */
export function tallyOfLog(log: string, killedPid: number): Tally {
  const tally = new Tally();
  let killed = false;
  for (const line of readFileSync(log, 'utf8').split('\n').filter(Boolean)) {
    const [what, id, pid, at, runId] = line.split(' ') as [string, string, string, string?, string?];
    if (!killed && pid !== String(killedPid)) {
      tally.killed();
      killed = true;
    }
    if (what === 'start') tally.started(id, runId!, Number(at));
    else tally.ended(id);
  }
  return tally;
}
