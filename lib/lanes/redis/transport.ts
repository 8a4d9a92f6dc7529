// How the fleet lanes' scripts reach Redis: EVALSHA (the whole script when Redis lost it), each
// sent with a request id, sent again on the reconnected client when an attempt fails on the way
// (a reset connection, a restart under the timeout), and given up once the timeout has passed
// since it was first sent. Only then does RedisLaneStore hear of the failure. A repeat is safe:
// the script gives back the answer it recorded for the id (scripts.ts), so nothing is granted twice.
import { toErrorInfo } from '../../errors.js';
import type { RedisConnection } from './connection.js';
import type { Op } from './requests.js';
import type { Script } from './scripts.js';

/** Redis did not answer a script within the store's `timeoutSeconds`. */
export class RedisTimeoutError extends Error {
  override readonly name = 'RedisTimeoutError';
}

// Redis's error replies that mean "not now" rather than "never": counted as unreachable.
const unavailableReply = /^(BUSY|LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|READONLY)\b/;

export function messageOf(error: unknown): string {
  return toErrorInfo(error).message;
}

/**
 * True when Redis could not be reached or cannot serve now; false for an answer that is an error
 * (a script's own failure), which fails the request it was for and says nothing of Redis.
 */
export function isUnreachable(error: unknown): boolean {
  if (error instanceof RedisTimeoutError) return true;
  const { name } = toErrorInfo(error);
  const message = messageOf(error);
  const isReply = name === 'ErrorReply' || name === 'ReplyError' || /^[A-Z]{3,}\b/.test(message);
  return !isReply || unavailableReply.test(message);
}

// The waits before the attempts after the first: short, since a client that reconnects queues
// what it is handed meanwhile, and a restarted Redis answers within a second.
const retryDelays = [10, 25, 50, 100, 200, 250];

/** What the transport tells its store. */
export interface TransportListener {
  replied(op: Op, reply: unknown): void;
  /** An answer that came after its op was given up. */
  late(op: Op, reply: unknown): void;
  /** The op failed for good: an error answer, or no answer within the timeout. */
  failed(op: Op, error: unknown): void;
  /** An attempt failed on the way and the op is sent again. */
  retried(op: Op, error: unknown): void;
}

export class ScriptTransport {
  /** Scripts sent and not answered, oldest first. */
  readonly pending = new Set<Op>();
  // The timer that gives up on the oldest unanswered script.
  private sweep: ReturnType<typeof setTimeout> | undefined = undefined;
  // Who waits for every answer to be in (idle()).
  private idlers: Array<() => void> = [];
  private closed = false;

  constructor(
    private readonly connection: RedisConnection,
    private readonly timeoutMs: number,
    private readonly timeoutSeconds: number,
    private readonly listener: TransportListener,
  ) {}

  /** Sends `op` (its script and arguments, the request id first). */
  send(op: Op): void {
    this.pending.add(op);
    this.sweep ??= unref(setTimeout(this.sweepSoon, this.timeoutMs));
    this.attempt(op);
  }

  private attempt(op: Op): void {
    this.run(op.script, op.lane.keys, op.args).then(
      (reply) => {
        if (op.done) return this.listener.late(op, reply);
        this.finish(op);
        this.listener.replied(op, reply);
      },
      (error: unknown) => {
        if (op.done) return;
        const delay = retryDelays[Math.min(op.retries, retryDelays.length - 1)]!;
        // Sent again only while the whole exchange stays within the timeout.
        if (!this.closed && isUnreachable(error) && performance.now() + delay < op.sentAt + this.timeoutMs) {
          op.retries++;
          op.retryTimer = unref(
            setTimeout(() => {
              op.retryTimer = undefined;
              if (!op.done) this.attempt(op);
            }, delay),
          );
          this.listener.retried(op, error);
          return;
        }
        this.finish(op);
        this.listener.failed(op, error);
      },
    );
  }

  // EVALSHA, and the whole script if Redis no longer has it (a restart, SCRIPT FLUSH).
  private run(script: Script, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    let answer: Promise<unknown>;
    try {
      answer = this.connection.evalsha(script.sha1, keys, args);
    } catch (error) {
      return Promise.reject(error);
    }
    return answer.catch((error: unknown) => {
      if (!/^NOSCRIPT\b/.test(messageOf(error))) throw error;
      return this.connection.eval(script.source, keys, args);
    });
  }

  /** A script run outside the store's requests (a snapshot, the epoch), bounded by the timeout. */
  ask(script: Script, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      // Decided after the loop has read its sockets (setImmediate): an answer that came while
      // this process was busy is not taken for a missing one.
      const timer = setTimeout(() => setImmediate(() => reject(this.timedOut())), this.timeoutMs);
      this.run(script, keys, args).then(
        (answer) => {
          clearTimeout(timer);
          resolve(answer);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  /** Resolves once every script sent has its answer (or was given up). */
  idle(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idlers.push(resolve));
  }

  /** No more attempts; the sweep ends once nothing is pending. */
  close(): void {
    this.closed = true;
    if (this.pending.size === 0 && this.sweep !== undefined) {
      clearTimeout(this.sweep);
      this.sweep = undefined;
    }
  }

  private timedOut(): RedisTimeoutError {
    return new RedisTimeoutError(`Redis did not answer within ${this.timeoutSeconds} s`);
  }

  // Scripts unanswered for longer than the timeout fail: Redis counts as unreachable. The verdict
  // waits for the loop to read its sockets (timers run before I/O in Node's loop): a process that
  // was busy past the timeout must not take answers waiting in its own socket for missing ones.
  private readonly sweepSoon = (): void => {
    setImmediate(this.sweepNow);
  };

  private readonly sweepNow = (): void => {
    this.sweep = undefined;
    const now = performance.now();
    const cutoff = now - this.timeoutMs;
    for (const op of this.pending) {
      if (op.sentAt > cutoff) break;
      this.finish(op);
      this.listener.failed(op, this.timedOut());
    }
    const oldest = this.pending.values().next().value;
    if (oldest !== undefined) this.sweep = unref(setTimeout(this.sweepSoon, Math.max(1, oldest.sentAt + this.timeoutMs - now)));
  };

  private finish(op: Op): void {
    op.done = true;
    if (op.retryTimer !== undefined) clearTimeout(op.retryTimer);
    op.retryTimer = undefined;
    this.pending.delete(op);
    if (this.pending.size > 0) return;
    if (this.closed && this.sweep !== undefined) {
      clearTimeout(this.sweep);
      this.sweep = undefined;
    }
    if (this.idlers.length === 0) return;
    const idlers = this.idlers;
    this.idlers = [];
    for (const resolve of idlers) resolve();
  }
}

// Timers of the store never keep a process alive by themselves: its connections do, while they are open.
export function unref<T extends { unref(): unknown }>(timer: T): T {
  timer.unref();
  return timer;
}
