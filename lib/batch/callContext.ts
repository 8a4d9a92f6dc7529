// The context a call's body is handed, made by its body part when the body starts.
import type { Loan } from '../lanes/index.js';
import type { Keep } from '../keep.js';
import type { Delta, InvokeContext } from './types.js';

/** What a context reads and tells of its call (the call's record, records.ts). */
export interface ContextOwner {
  recorded(delta: Delta): void;
  progressed(progress: number, total: number | undefined, message: string | undefined): void;
  costReported(total: number): void;
  readonly lanes: { lend(): ReadonlyMap<string, Loan>; fence(): string | undefined; fences(): Readonly<Record<string, string>> };
  readonly body: { readonly ended: boolean };
}

/**
 * What a call's body is handed (its `InvokeContext`). Its signal, lent lanes and record function
 * are getters on the prototype: the AbortController, the loans and the closure are made only if
 * the body asks, and a class whose instances all share one hidden class costs a few
 * nanoseconds to make. (Defining them on each instance, so that a spread copy keeps them, costs
 * about 0.1 µs per property per call; the runner's ToolContext, which tool bodies get, does
 * that, and builds on this one.)
 */
export class CallContext implements InvokeContext {
  #record: ((delta: Delta) => void) | undefined = undefined;
  #controller: AbortController | undefined = undefined;
  // Why the call was stopped, once it was: a signal first asked for afterwards is born aborted.
  #stopped: Error | undefined = undefined;
  readonly #run: ContextOwner;

  constructor(run: ContextOwner) {
    this.#run = run;
  }

  /** Records what the call changed; a function of its own (made when first read), so it can be passed on alone. */
  get record(): (delta: Delta) => void {
    return (this.#record ??= (delta: Delta) => this.#run.recorded(delta));
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#stopped !== undefined) this.#controller.abort(this.#stopped);
    }
    return this.#controller.signal;
  }

  /** The shared lanes this call stands in, its callers' included, each lent to nested work. */
  get lent(): ReadonlyMap<string, Loan> {
    return this.#run.lanes.lend();
  }

  get ended(): boolean {
    return this.#run.body.ended;
  }

  get fence(): string | undefined {
    return this.#run.lanes.fence();
  }

  get fences(): Readonly<Record<string, string>> {
    return this.#run.lanes.fences();
  }

  /** Reports how far the body has got, as a `progress` activity; checked, and dropped once the call has ended. */
  progress(progress: number, total?: number, message?: string): void {
    if (typeof progress !== 'number' || !Number.isFinite(progress)) throw new TypeError(`progress(progress, total?, message?) expects progress to be a finite number, got ${String(progress)}`);
    if (total !== undefined && (typeof total !== 'number' || !Number.isFinite(total))) throw new TypeError(`progress(progress, total?, message?) expects total to be a finite number or undefined, got ${String(total)}`);
    if (message !== undefined && typeof message !== 'string') throw new TypeError(`progress(progress, total?, message?) expects message to be a string or undefined, got ${typeof message}`);
    this.#run.progressed(progress, total, message);
  }

  /** Reports what the call cost in all, for its tenant's cost budget; checked, and dropped once the call has ended. */
  reportCost(total: number): void {
    if (typeof total !== 'number' || !Number.isFinite(total) || total < 0) throw new TypeError(`reportCost(total) expects a finite number from 0 up, got ${String(total)}`);
    this.#run.costReported(total);
  }

  /** Aborts the body's signal (now, or when it is first asked for). */
  abort(reason: Error): void {
    if (this.#stopped !== undefined) return;
    this.#stopped = reason;
    this.#controller?.abort(reason);
  }
}

/** @internal One inert object of each class this module makes per call, for keepWarmShapes (lib/shapes.ts). */
export function keepShapes(keep: Keep): void {
  keep(() => new CallContext(undefined as never));
}
