// The loop monitor: names the tool body that held the event loop. Each watched body
// runs inside an AsyncLocalStorage context; async_hooks `before`/`after` time every
// callback that runs in such a context, so a stall after the body's first `await` is
// charged to the right call even with several in flight. It cannot pre-empt a body
// (nothing in one thread can); it fails the call once the body yields. A stretch in which Node
// loaded code of its own for the first time (the HTTP client behind the first `fetch`, webcrypto)
// is a one-time cost of the platform, not the body's: it is not counted (docs/async-and-sync.md).
import { AsyncLocalStorage, createHook, type AsyncHook } from 'node:async_hooks';
import { performance } from 'node:perf_hooks';
import { EventLoopStalledError } from '../errors.js';
import type { Keep } from '../keep.js';

/** Who hears that a watched body held the loop too long (a call's record: no closure per call). */
export interface StallListener {
  loopStalled(error: EventLoopStalledError): void;
}

/** One watched call: who to tell of a stall, and whether it was told or is over. */
export class Watch {
  // Set once a stall was reported, so a call is failed once at most.
  stalled = false;
  // Set once the call ended; later callbacks of its body are no longer charged to it.
  released = false;
  constructor(
    readonly monitor: LoopMonitor,
    readonly tool: string,
    readonly listener: StallListener,
  ) {}

  /** Ends the watch; later callbacks of the body are not charged. Safe to call twice. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.monitor.left();
  }
}

// One storage and one hook for every monitor of the process. Node keeps each AsyncLocalStorage
// ever made in a list it walks for every async resource created, so a storage per monitor
// (per runner) would slow every Promise of a process that makes runners as it goes. Both are
// made when the first body is watched, never at import.
let storage: AsyncLocalStorage<Watch> | undefined;
let hook: AsyncHook | undefined;
// Callbacks may nest (a callback that synchronously enters another async scope), so each keeps
// its own start: two stacks side by side, so that timing a callback allocates nothing.
const watchedStack: Array<Watch | undefined> = [];
const startStack: number[] = [];
const loadedStack: number[] = [];
// How many of its own modules Node has loaded so far: it grows when a first use loads more (the
// first `fetch` loads some fifty). Absent on a runtime without the list: nothing is excused.
const loadList: readonly unknown[] | undefined = (process as { moduleLoadList?: readonly unknown[] }).moduleLoadList;
const loaded = (): number => (loadList === undefined ? 0 : loadList.length);
// Watch calls not yet released, over all monitors; the hook is enabled only while there are
// some whose body went on after it returned (it returned a Promise, an Observable, an object
// that may hold a callback), give or take a turn of the event loop: it is turned off by a check
// scheduled once the last one is released, so calls that answer one after another do not switch
// it on and off for each (switching costs more than a call). A body that answers at once has
// no callbacks of its own to time, and never turns it on.
let active = 0;
let enabled = false;
// True once a body ran inside the storage, until the storage is turned off with the hook.
let stored = false;
// The real one, taken when the module loads: a test that fakes timers (sinon) and restores them
// must not leave the check pending for ever, and the hook on with it.
const nextTurn = setImmediate;
let offCheck: NodeJS.Immediate | undefined;
function turnOffIfIdle(): void {
  offCheck = undefined;
  if (active !== 0) return;
  if (enabled) {
    enabled = false;
    hook?.disable();
  }
  // The storage too, even if the hook never went on: once used, an AsyncLocalStorage keeps a
  // hook of Node's own on, which copies its context onto every Promise and timer the process
  // makes from then on (an `await` elsewhere in the process cost 3.5 times as much after a single
  // watched call). `storage.run` turns it back on for the next watched call.
  if (stored) {
    stored = false;
    storage?.disable();
  }
}
// Times each callback run in a watched body's context (on only while one may be in flight).
const timing = {
  before: (): void => {
    const watched = storage?.getStore();
    watchedStack.push(watched);
    // Only a watched call's callbacks are timed.
    startStack.push(watched === undefined ? 0 : performance.now());
    loadedStack.push(watched === undefined ? 0 : loaded());
  },
  after: () => {
    const watched = watchedStack.pop();
    const start = startStack.pop();
    const loadedBefore = loadedStack.pop();
    if (watched !== undefined && start !== undefined && loadedBefore !== undefined) check(watched, performance.now() - start, loadedBefore);
  },
};

function check(watched: Watch, elapsed: number, loadedBefore: number): void {
  if (elapsed <= watched.monitor.limitMs || watched.stalled || watched.released) return;
  // Node loaded code of its own meanwhile: a first use's one-time cost (on a busy machine, several
  // times its quiet 50 ms), not the body holding the loop. The next call finds it loaded.
  if (loaded() !== loadedBefore) return;
  watched.stalled = true;
  watched.listener.loopStalled(new EventLoopStalledError(watched.tool, elapsed, watched.monitor.limitMs));
}

export class LoopMonitor {
  /** @internal Whether the process-wide hook is on (for tests: off a turn of the loop after the last call ended). */
  static get hooked(): boolean {
    return enabled;
  }

  /** This monitor's watched calls not yet released (for tests: none once every call ended). */
  get watching(): number {
    return this.active;
  }

  // This monitor's watched calls not yet released.
  private active = 0;

  /** @param limitMs a synchronous stretch longer than this fails the call */
  constructor(readonly limitMs: number) {
    if (!(limitMs > 0)) throw new TypeError(`Expected loopStallMs to be a positive number, got ${limitMs}`);
  }

  /** @internal A watch for one call, not yet running anything: `run` runs its body, `release` ends it. */
  open(tool: string, listener: StallListener): Watch {
    this.active++;
    active++;
    return new Watch(this, tool, listener);
  }

  /** @internal Runs `body(arg)` inside `watch`, timing its synchronous part; a throw releases the watch and is rethrown. */
  run<A, T>(watch: Watch, body: (arg: A) => T, arg: A): T {
    const start = performance.now();
    const loadedBefore = loaded();
    stored = true;
    let value: T;
    try {
      value = (storage ??= new AsyncLocalStorage<Watch>()).run(watch, body, arg);
    } catch (error) {
      watch.release();
      throw error;
    }
    check(watch, performance.now() - start, loadedBefore);
    // A body that may go on after it returned has its later callbacks timed: the hook goes on
    // now, before any of them can run. A primitive answers at once; what it started and left
    // running is no longer its call's (the watch is released with the call).
    if (!enabled && ((typeof value === 'object' && value !== null) || typeof value === 'function')) {
      enabled = true;
      (hook ??= createHook(timing)).enable();
    }
    return value;
  }

  /** @internal A watch of this monitor was released. */
  left(): void {
    this.active--;
    if (--active === 0 && offCheck === undefined) offCheck = nextTurn(turnOffIfIdle).unref();
  }
}

/**
 * @internal A watch per call, inert, for keepWarmShapes (lib/shapes.ts), with a Promise and a
 * timer made while the storage is on (they carry its context as a property of their own): one of
 * each is made in it (the timer cleared at once), then the storage is turned off again.
 */
export function keepShapes(keep: Keep): void {
  const inertWatch = new Watch(new LoopMonitor(1), '', { loopStalled: () => undefined });
  keep(() => inertWatch);
  const inStorage = (storage ??= new AsyncLocalStorage<Watch>());
  inStorage.run(inertWatch, () => {
    keep(() => Promise.resolve());
    keep(() => {
      const timer = setTimeout(turnOffIfIdle, 1);
      clearTimeout(timer);
      return timer;
    });
  });
  // Off again, unless a watched body is in flight (its own release turns it off).
  if (!stored) inStorage.disable();
}
