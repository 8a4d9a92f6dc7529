// A bench's child process, forked and read message by message: what the partner bench and the
// frameworks bench drive their processes with. `close` asks it to end and waits until it has.
import { fork, type ChildProcess } from 'node:child_process';

export interface BenchChild<M> {
  readonly child: ChildProcess;
  /** The next message it sends (one it sent already, or the next to come). */
  next(): Promise<M>;
  /** Sends it `command` (its own way of being told to end) and waits for it to exit. */
  close(command: unknown): Promise<void>;
}

export function forkChild<M>(file: string, what: string): BenchChild<M> {
  const child = fork(file, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const arrived: M[] = [];
  const waiting: Array<{ resolve: (m: M) => void; reject: (e: Error) => void }> = [];
  child.on('message', (raw) => {
    const message = raw as M;
    const waiter = waiting.shift();
    if (waiter) waiter.resolve(message);
    else arrived.push(message);
  });
  child.on('exit', (code) => {
    for (const waiter of waiting.splice(0)) waiter.reject(new Error(`a ${what} process exited (${code}) mid-scenario`));
  });
  return {
    child,
    next: () => {
      const message = arrived.shift();
      if (message !== undefined) return Promise.resolve(message);
      return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
    },
    close: (command) =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.send(command as object);
      }),
  };
}
