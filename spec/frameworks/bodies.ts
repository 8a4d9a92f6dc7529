// What the framework specs count from the tool bodies' side: which bodies started, and how many
// ran at once per tool and per tenant (each body knows its tool and its request's tenant by its
// closure, not from the lanes), plus the settled activities a ToolLanes told.
import type { Subscription } from 'rxjs';
import type { ToolLanes } from '../../lib/index.js';

/** Bodies as they run: starts, and the most that ran at once by tool and by tenant. */
export class BodyTally {
  /** The call ids of the bodies that started, in order. */
  readonly started: string[] = [];
  /** The call ids of the bodies that ended (returned or threw). */
  readonly ended: string[] = [];
  private readonly running = new Map<string, number>();
  private readonly most = new Map<string, number>();

  /** Runs `work` as one body of `tool` for `tenant`, counted while it runs. */
  async body<T>(tool: string, tenant: string, callId: string, work: () => Promise<T>): Promise<T> {
    this.started.push(callId);
    const keys = [`tool:${tool}`, `tenant:${tenant}`, 'all'];
    for (const key of keys) {
      const now = (this.running.get(key) ?? 0) + 1;
      this.running.set(key, now);
      this.most.set(key, Math.max(this.most.get(key) ?? 0, now));
    }
    try {
      return await work();
    } finally {
      for (const key of keys) this.running.set(key, this.running.get(key)! - 1);
      this.ended.push(callId);
    }
  }

  /** The most bodies that ran at once: of a tool (`tool:x`), of a tenant (`tenant:x`), or `all`. */
  mostAtOnce(key: string): number {
    return this.most.get(key) ?? 0;
  }

  /** How many run now, under the same keys. */
  runningNow(key: string): number {
    return this.running.get(key) ?? 0;
  }
}

/** A settled activity of a ToolLanes: the call, and its stop class when it was stopped. */
export interface Settled {
  readonly callId: string;
  readonly tool: string;
  readonly stopClass: string | undefined;
}

/** Records every `settled` activity of `toolLanes` until unsubscribed. */
export function settledOf(toolLanes: ToolLanes): { readonly settled: Settled[]; readonly subscription: Subscription } {
  const settled: Settled[] = [];
  const subscription = toolLanes.activity$.subscribe((activity) => {
    if (activity.type !== 'settled') return;
    const { callId, tool } = activity;
    const stopClass = (activity as { stopClass?: string }).stopClass;
    settled.push({ callId, tool, stopClass });
  });
  return { settled, subscription };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` holds, polling; fails naming `what` after `ms`. */
export async function until(check: () => boolean, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** A body that waits for its signal to abort, then rejects with its reason (a body that honours its stop). */
export function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}
