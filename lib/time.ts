// Timers for the durations a config gives, however long. Node keeps a timer's delay in a
// signed 32-bit integer: a delay above 2^31-1 ms (about 24.8 days) is set to 1 ms instead,
// with a TimeoutOverflowWarning, so a 30-day runSeconds would fire at once. A longer wait is
// chained here from slices that fit. It imports only rxjs, so every layer of the library can use it.
import { Subscription, type SchedulerLike } from 'rxjs';

/** The longest delay a Node timer keeps, in ms: 2^31-1, about 24.8 days. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Runs `work` on `scheduler` after `ms`, however long: a delay above `MAX_TIMER_MS` is waited
 * out in slices of at most that, one after another, and the one Subscription returned ends
 * whichever slice is pending. A delay that fits is exactly `scheduler.schedule(work, ms)`: no
 * object, no closure more. The slices add up to `ms` exactly, so in virtual time (TestScheduler)
 * `work` runs at the same frame as a single timer would. An infinite `ms` (configs refuse
 * Infinity, but `Number.MAX_VALUE` seconds is Infinity ms) never runs `work`: it only re-arms,
 * once every 24.8 days.
 *
 * ## Example
 * ```ts
 * const thirtyDays = 30 * 24 * 3600 * 1000;
 * const timer = scheduleAfter(asyncScheduler, () => console.log('a month later'), thirtyDays);
 * // ... and not 1 ms later, as setTimeout would have it
 * timer.unsubscribe();
 * ```
 */
export function scheduleAfter(scheduler: SchedulerLike, work: () => void, ms: number): Subscription {
  // NaN goes this way too, as it did before: whatever the scheduler makes of it.
  if (!(ms > MAX_TIMER_MS)) return scheduler.schedule(work, ms);
  // What is left to wait once the pending slice is over.
  let left = ms;
  // The slice now waited for.
  let pending: Subscription | undefined;
  const next = (): void => {
    const slice = Math.min(left, MAX_TIMER_MS);
    left -= slice;
    pending = scheduler.schedule(left > 0 ? next : work, slice);
  };
  const whole = new Subscription(() => pending?.unsubscribe());
  next();
  return whole;
}
