// Bodies that say when they ran, in virtual time, so a ToolLanes spec counts from the bodies:
// each body records its start and its end (its answer, or its unsubscription when stopped).
import { defer, finalize, map, timer, type Observable, type SchedulerLike } from 'rxjs';
import type { ToolLanes } from '../../lib/index.js';

/** One body's run: who, when it started, when it ended. */
export interface BodyRun {
  readonly label: string;
  readonly tool: string;
  readonly tenant: string;
  readonly start: number;
  end: number | undefined;
}

/** Records body runs on `scheduler`'s clock. */
export class Bodies {
  readonly runs: BodyRun[] = [];
  constructor(private readonly scheduler: SchedulerLike) {}

  /** A body that answers `label` after `ms`, recording when it ran. */
  answering(label: string, ms = 10): (ctx: ToolLanes.Context) => Observable<string> {
    return (ctx) =>
      defer(() => {
        const run: BodyRun = { label, tool: ctx.tool, tenant: ctx.tenant, start: this.scheduler.now(), end: undefined };
        this.runs.push(run);
        return timer(ms, this.scheduler).pipe(
          map(() => label),
          finalize(() => (run.end = this.scheduler.now())),
        );
      });
  }

  /** The most bodies running at once among those `which` picks. */
  most(which: (run: BodyRun) => boolean = () => true): number {
    const edges = this.runs.filter(which).flatMap((run) => [
      { at: run.start, by: 1 },
      { at: run.end ?? Infinity, by: -1 },
    ]);
    // An end and a start at the same moment: the end first (the permit went back, then was taken).
    edges.sort((a, b) => a.at - b.at || a.by - b.by);
    let now = 0;
    let most = 0;
    for (const { by } of edges) most = Math.max(most, (now += by));
    return most;
  }

  /** Each label's start time. */
  starts(): Record<string, number> {
    return Object.fromEntries(this.runs.map((run) => [run.label, run.start]));
  }
}

/** How a Promise settled, read after the virtual clock ran. */
export type Settled<T> = { readonly value: T } | { readonly error: unknown };

export function settledOf<T>(promise: Promise<T>): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}
