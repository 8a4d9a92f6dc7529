// A spec file's fleet of forked worker processes on one Redis (spec/lanes/redis/fleet.spec.ts,
// rate.spec.ts, spec/frameworks/fleetRate.spec.ts, aiSdkFleet.spec.ts): each worker is a
// TypeScript file run through tsx, given its config as JSON in argv, telling its parent `ready`,
// waiting for `go`, and telling `done` with what its calls ended with. Its bodies stamp their
// starts by Redis's clock on a list `<prefix>stamps`, read here as a counter of starts in windows.
import { fork, type ChildProcess } from 'node:child_process';
import { clearPrefix, nodeRedis, requireRedis, uniquePrefix, until, type NodeRedis } from './server.js';

/** One worker of a fleet forked ready: start it with `go`; `done` is its report. */
export interface ReadyWorker<Done> {
  readonly child: ChildProcess;
  go(): void;
  readonly done: Promise<Done>;
}

/** Resolves with the exit code once `child` has exited (at once if it had). */
export function exited(child: ChildProcess): Promise<number | null> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve(child.exitCode) : new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** The most stamps in any window of `ms` starting at a stamp (`stamps` sorted). */
export function mostInWindow(stamps: readonly number[], ms: number): number {
  let most = 0;
  for (let i = 0; i < stamps.length; i++) {
    let j = i;
    while (j < stamps.length && stamps[j]! < stamps[i]! + ms) j++;
    most = Math.max(most, j - i);
  }
  return most;
}

/** The body starts stamped under `at` (the list `<at>stamps`), by Redis's clock in ms, sorted. */
export async function stampsUnder(client: NodeRedis, at: string): Promise<number[]> {
  return (await client.lRange(`${at}stamps`, 0, -1)).map(Number).sort((a, b) => a - b);
}

/**
 * A fleet of `workerFile`'s processes, set up in a spec file's `describe`: a connected node-redis
 * `client` (made in a `before`, once a server answers) and a key `prefix` of its own. Its `after`
 * kills any worker still running, clears the prefix and closes the client.
 */
export function forkedFleet<Config, Message extends { readonly type: string }>(name: string, workerFile: string) {
  type Done = Extract<Message, { type: 'done' }>;
  const prefix = uniquePrefix(name);
  const children: ChildProcess[] = [];
  let connected: NodeRedis | undefined;
  before(async () => {
    await requireRedis();
    connected = await nodeRedis();
  });
  after(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (connected !== undefined) {
      await clearPrefix(connected, prefix);
      await connected.close();
    }
  });

  /** Forks a worker with `config`, each of its messages to `heard`. */
  function start(config: Config, heard: (message: Message) => void): ChildProcess {
    const child = fork(workerFile, [JSON.stringify(config)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.on('message', (message) => heard(message as Message));
    children.push(child);
    return child;
  }

  /** Forks a worker for each config; resolves once every one is ready (within `readyMs`), with a way to start each and its report. */
  async function ready(configs: readonly Config[], readyMs = 60_000): Promise<Array<ReadyWorker<Done>>> {
    let readyCount = 0;
    const workers = configs.map((config) => {
      let told: (done: Done) => void = () => undefined;
      const done = new Promise<Done>((resolve) => (told = resolve));
      const child = start(config, (message) => {
        if (message.type === 'ready') readyCount++;
        else if (message.type === 'done') told(message as Done);
      });
      return { child, go: () => void child.send('go'), done };
    });
    await until(() => readyCount === configs.length, 'every process started', readyMs);
    return workers;
  }

  /** Waits for every worker's report (within a minute) and exit: the reports in the workers' order, and the exit codes. */
  async function finish(workers: ReadonlyArray<ReadyWorker<Done>>): Promise<{ readonly done: Done[]; readonly codes: Array<number | null> }> {
    let ended = 0;
    for (const worker of workers) void worker.done.then(() => ended++);
    await until(() => ended === workers.length, 'every process done', 60_000);
    const done = await Promise.all(workers.map((worker) => worker.done));
    const codes = await Promise.all(workers.map((worker) => exited(worker.child)));
    return { done, codes };
  }

  /** Forks a worker for each config, starts them together once all are ready, and waits for them to finish. */
  async function run(configs: readonly Config[], readyMs = 60_000): Promise<{ readonly done: Done[]; readonly codes: Array<number | null> }> {
    const workers = await ready(configs, readyMs);
    for (const worker of workers) worker.go();
    return finish(workers);
  }

  return {
    prefix,
    /** The client (only once the file's `before` ran). */
    get client(): NodeRedis {
      if (connected === undefined) throw new Error('the fleet is used before its before hook connected its client');
      return connected;
    },
    start,
    ready,
    finish,
    run,
  };
}
