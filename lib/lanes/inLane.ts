// The lane as an RxJS operator: subscribing queues for a permit; the work is
// subscribed when the permit is granted; the permit goes back in the same teardown
// that ends the work, whether it completed, failed, timed out or was unsubscribed.
import { Observable, type MonoTypeOperatorFunction } from 'rxjs';
import type { LaneStore, Permit } from './LaneTable.js';

export interface InLaneOptions {
  /** Who is asking, for round-robin between parties (the tenant, in shared lanes). */
  readonly party?: string;
  /** Told when the request had to wait (no permit was free when it asked). */
  readonly onQueued?: (key: string) => void;
}

/**
 * Runs the source inside lane `key` of `store`: at most `limit` subscriptions to sources
 * piped through the same lane are active at once; the rest wait their turn.
 *
 * ## Example
 * ```ts
 * const table = new LaneTable();
 * const lookups = [1, 2, 3].map((n) => timer(100).pipe(map(() => n), inLane(table, 'tool:search', 2)));
 * merge(...lookups).subscribe(console.log);
 * // 1 and 2 after 100ms, 3 after 200ms
 * ```
 */
export function inLane<T>(store: LaneStore, key: string, limit: number, options: InLaneOptions = {}): MonoTypeOperatorFunction<T> {
  const { party, onQueued } = options;
  return (source) =>
    new Observable<T>((subscriber) => {
      // Set once the permit is granted and the source subscribed.
      let work: { unsubscribe(): void } | undefined;
      // Set to true if the subscriber was closed before the grant came.
      let ended = false;
      // The request, once made, and whether it was granted before `enter` returned it.
      let permit: Permit | undefined;
      let early = false;
      // The work starts as it is subscribed: a rate lane counts its admission from then, told
      // first (the work may set off a pause that must count from after it).
      const start = (): void => {
        permit!.started?.();
        work = source.subscribe(subscriber);
      };
      // Asking and installing the release happen in this one synchronous step. A store shared by
      // a fleet may lose the permit (its lease): the work then fails with why.
      const onGrant = Object.assign(
        () => {
          if (ended) return;
          if (permit === undefined) early = true;
          else start();
        },
        {
          lost(error: Error) {
            // The error's teardown ends the work and gives the (lost) permit back.
            if (!ended) subscriber.error(error);
          },
        },
      );
      const asked = (permit = store.enter(key, limit, onGrant, party));
      if (early) start();
      else if (!asked.holding && onQueued !== undefined) onQueued(key);
      return () => {
        ended = true;
        work?.unsubscribe();
        asked.leave();
      };
    });
}
