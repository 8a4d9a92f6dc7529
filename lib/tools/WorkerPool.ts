// WorkerPool: where blocking tool bodies go. A fixed number of worker threads and a
// bounded queue; when both are full a call is refused at once (WorkerPoolFullError)
// rather than the pool growing. Built on piscina, which already does fixed threads,
// a bounded queue and abortable tasks (an aborted task's thread is terminated and
// replaced), so a stopped or timed-out call really stops its work.
import { Piscina } from 'piscina';
import { describeValue } from '../config/index.js';
import { ConfigError, WorkerPoolFullError } from '../errors.js';
import type { ToolBody } from './ToolContext.js';

export interface WorkerPoolOptions {
  /** Worker threads, from 1 up; the pool never has more. */
  readonly threads: number;
  /** Calls that may wait for a thread, from 0 up; one more is refused. */
  readonly queue: number;
}

function count(value: unknown, field: string, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new ConfigError(field, `${field} must be an integer from ${min} up, got ${describeValue(value)}`);
  }
  return value;
}

/**
 * A bounded pool of worker threads for CPU-bound or blocking tool bodies.
 *
 * ## Example
 * ```ts
 * // hash.mjs:  export default ({ text }) => slowHash(text);
 * const pool = new WorkerPool({ threads: 2, queue: 8 });
 * tools.register({ name: 'hash', args: t.type({ text: t.string }) }, pool.body(new URL('./hash.mjs', import.meta.url)));
 * // ...
 * await pool.close();
 * ```
 */
export class WorkerPool {
  readonly threads: number;
  readonly queue: number;
  private readonly piscina: Piscina;
  // Calls running or waiting in the pool; a call beyond threads + queue is refused.
  private inPool = 0;
  private closed = false;

  constructor(options: WorkerPoolOptions) {
    if (options === null || typeof options !== 'object') {
      throw new ConfigError('WorkerPool', `WorkerPool options must be an object, got ${describeValue(options)}`);
    }
    this.threads = count(options.threads, 'threads', 1);
    this.queue = count(options.queue, 'queue', 0);
    this.piscina = new Piscina({
      // Kept at full strength: a thread terminated to stop a call is then replaced at once, and
      // the calls queued behind it run. With fewer kept, a queued call waited for the next new
      // call to start a thread. Idle threads do not hold the process open.
      minThreads: this.threads,
      maxThreads: this.threads,
      // The bound is kept by this class (`inPool`); piscina's own queue must also hold calls waiting for a thread to start.
      maxQueue: this.threads + this.queue,
    });
  }

  /** Worker threads alive now (never more than `threads`; zero after `close`). */
  get liveThreads(): number {
    return this.piscina.threads.length;
  }

  /** Calls running or waiting in the pool now. */
  get load(): number {
    return this.inPool;
  }

  /**
   * A tool body that runs export `exportName` of the module at `moduleUrl` in a worker, with the
   * decoded arguments, and resolves with its result (a structured clone). Aborting the call's
   * signal stops the work.
   */
  body(moduleUrl: string | URL, exportName = 'default'): ToolBody<unknown> {
    const filename = typeof moduleUrl === 'string' ? moduleUrl : moduleUrl.href;
    if (filename === '') throw new ConfigError('moduleUrl', 'moduleUrl must name a module file');
    return (args, ctx) => this.run(filename, exportName, args, ctx.signal);
  }

  /** Runs one call in the pool; refused at once when every thread is busy and the queue is full. */
  async run(filename: string, exportName: string, args: unknown, signal?: AbortSignal): Promise<unknown> {
    if (this.closed) throw new Error('the worker pool is closed');
    if (this.inPool >= this.threads + this.queue) throw new WorkerPoolFullError(this.threads, this.queue);
    this.inPool++;
    try {
      return await this.piscina.run(args, { filename, name: exportName, ...(signal ? { signal } : {}) });
    } catch (error) {
      if (error instanceof Error && /queue is at limit|no task queue available/i.test(error.message)) {
        throw new WorkerPoolFullError(this.threads, this.queue);
      }
      throw error;
    } finally {
      this.inPool--;
    }
  }

  /** Ends the threads; calls still in the pool fail. */
  async close(): Promise<void> {
    this.closed = true;
    await this.piscina.destroy();
  }
}
