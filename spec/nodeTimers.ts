// Timers as Node keeps them, for specs of long durations. Node holds a timer's delay in 32
// bits: a delay above 2^31-1 ms becomes 1 ms, with a TimeoutOverflowWarning. A TestScheduler
// keeps any delay, so a 30-day timer would pass there even where Node fires it at once;
// NodeTimers is a TestScheduler's virtual time with Node's rule, and overflowWarnings listens
// for the warning itself on real timers.
import { Subscription, type SchedulerAction, type SchedulerLike, type VirtualTimeScheduler } from 'rxjs';
import { MAX_TIMER_MS } from '../lib/time.js';

/** Virtual time as Node would run it: a delay above 2^31-1 ms is cut to 1 ms. Records every delay asked. */
export class NodeTimers implements SchedulerLike {
  /** Every delay asked for, as asked. */
  readonly asked: number[] = [];
  /** How many delays Node would have cut to 1 ms. */
  overflows = 0;

  /** @param budget scheduling calls allowed: a timer spinning every 1 ms would otherwise run for ever in virtual time */
  constructor(
    private readonly virtual: VirtualTimeScheduler,
    private readonly budget = 10_000,
  ) {}

  now(): number {
    return this.virtual.now();
  }

  schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T): Subscription {
    this.asked.push(delay);
    // Past the budget nothing more runs: the spec then sees that its timer never came.
    if (this.asked.length > this.budget) return Subscription.EMPTY;
    if (delay > MAX_TIMER_MS) this.overflows++;
    return this.virtual.schedule(work, delay > MAX_TIMER_MS ? 1 : delay, state);
  }
}

/** Thirty days, in ms: longer than a Node timer holds. */
export const THIRTY_DAYS_MS = 30 * 24 * 3600 * 1000;
export const THIRTY_DAYS_S = THIRTY_DAYS_MS / 1000;

/**
 * The TimeoutOverflowWarnings Node emits while `during` runs and `ms` of real time after it
 * (Node emits them on the next tick; a timer cut to 1 ms fires several times in that while).
 */
export async function overflowWarnings(during: () => void | Promise<void>, ms = 25): Promise<string[]> {
  const warnings: string[] = [];
  const listen = (warning: Error): void => {
    if (warning.name === 'TimeoutOverflowWarning') warnings.push(warning.message);
  };
  process.on('warning', listen);
  try {
    await during();
    await new Promise((resolve) => setTimeout(resolve, ms));
  } finally {
    process.off('warning', listen);
  }
  return warnings;
}
