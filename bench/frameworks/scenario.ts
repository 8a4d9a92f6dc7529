// What the frameworks bench's parent (./index.ts) and its processes (./worker.ts) share: a
// scenario as the parent tells it, and what a process sends back. Only types and constants: the
// parent must not load the frameworks.
import type { Framework } from './apps.js';

/** How the app keeps its calls within the partner's limits: not at all, a concurrency lane, or a rate lane. */
export type FrameworkLimiter = 'none' | 'perTool' | 'perToolRate';

export interface FrameworkScenario {
  readonly framework: Framework;
  readonly limiter: FrameworkLimiter;
  /** The partner's address. */
  readonly url: string;
  /** This scenario's keys in Redis, when `fleet`. */
  readonly prefix: string;
  /** The lanes live in a RedisLaneStore shared by every process of the scenario (else in process). */
  readonly fleet: boolean;
  /** R, the partner's requests a second, for perToolRate. */
  readonly rate: number;
  /** The partner's own concurrency limit, for perTool. */
  readonly perTool: number;
  readonly tenants: readonly string[];
  /** Requests in flight at once in this process (each a closed loop: the next starts when one ends). */
  readonly requests: number;
  /** Calls the model asks for in each request. */
  readonly calls: number;
  /** Epoch ms: when the requests start, and when the ones still going are stopped. */
  readonly startAt: number;
  readonly endAt: number;
}

/** What one request costs per call, measured in one process: the framework alone, with the floor wrapper, and with its lanes. */
export interface CostCommand {
  readonly type: 'cost';
  readonly framework: Framework;
  readonly calls: number;
  readonly requests: number;
  readonly rounds: number;
}

export type FrameworkCommand = { readonly type: 'run'; readonly scenario: FrameworkScenario } | CostCommand | { readonly type: 'close' };

export interface FrameworkRunResult {
  readonly completed: number;
  readonly failed: number;
  /** A failure no scenario expects (a bench fault), if any. */
  readonly unexpected?: string;
}

export interface FrameworkCostResult {
  /** CPU µs per call of the plain app (the median round), and of the app with the floor wrapper and with lanes (each: that, plus the median of each round's difference). */
  readonly plainMicros: number;
  readonly floorMicros: number;
  readonly lanesMicros: number;
}

export type FrameworkWorkerMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'done'; readonly result: FrameworkRunResult }
  | { readonly type: 'cost'; readonly result: FrameworkCostResult };
