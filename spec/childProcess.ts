// A spec's child process run to its end: what it printed, and whether it exited by itself
// within a bound (it is killed otherwise). How a spec sees that something leaves no timer or
// socket behind: the child does its part and falls off the end of its script, with no
// process.exit, and the process ends only if nothing of it is left.
import { spawn } from 'node:child_process';

export interface ChildEnding {
  /** True when it exited by itself within the bound; false when it had to be killed. */
  readonly exitedAlone: boolean;
  readonly code: number | null;
  /** Its standard output, line by line. */
  readonly lines: readonly string[];
  readonly stderr: string;
}

/** Runs `file` (TypeScript, through tsx) with `args`; kills it if it has not exited within `ms`. */
export function runToExit(file: string, args: readonly string[], ms: number): Promise<ChildEnding> {
  const child = spawn(process.execPath, ['--import', 'tsx', file, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  return new Promise((resolve) => {
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, ms);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ exitedAlone: !killed, code, lines: stdout.split('\n').filter((line) => line !== ''), stderr });
    });
  });
}
