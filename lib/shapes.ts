// Kept shapes: the hidden classes of the objects the library makes per call, per batch and per
// run, kept alive between bursts, for an application that asks (`keepWarmShapes`). Nothing here
// runs at import.
//
// V8 gives each object a hidden class (a "map") and reaches a class's full shape through one map
// per field added. Only the first is held by the class itself: the others live while some
// object has them. A service between bursts holds none of its per-call objects, so a full
// collection frees those maps, and every function compiled against them is thrown away
// ("deoptimizing ... reason: weak objects") and runs interpreted until compiled again, under the
// next burst's load. docs/performance.md ("Kept shapes") has what keeping them saves, and where.
// Only the library's entry imports this module: the modules it keeps shapes of hand them over
// through the `Keep` type (lib/keep.ts), so the arrows go one way, from here to them.
import { keepShapes as batchShapes } from './batch/runBatch.js';
import { keepShapes as callShapes } from './batch/callBody.js';
import { keepShapes as ceilingShapes } from './batch/ceilings.js';
import { keepShapes as laneShapes } from './lanes/Lane.js';
import { keepShapes as requestShapes } from './runner/model/ask.js';
import { keepShapes as collectorShapes } from './runner/collector.js';
import { keepShapes as runShapes } from './runner/run.js';
import { keepShapes as turnShapes } from './runner/turn/turn.js';
import { keepShapes as turnsShapes } from './runner/turn/turnByTurn.js';
import { keepShapes as turnCallShapes } from './runner/turn/turnCalls.js';
import { keepShapes as turnBatchShapes } from './runner/turn/turnBatch.js';
import { keepShapes as watchShapes } from './tools/loopMonitor.js';
import type { Keep } from './keep.js';

export type { Keep };

// One inert object of each kept class, for the life of the process, once asked for.
const kept: object[] = [];
// What `make` threw, for each exemplar that could not be made (a spec holds this empty).
const failed: string[] = [];
let asked = false;

const noted = (error: unknown): void => {
  failed.push(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
};

/** @internal Keeps what `make` gives; one that throws is left out and named in `shapesNotKept`. */
export function keepShape(make: () => object): void {
  try {
    kept.push(make());
  } catch (error) {
    noted(error);
  }
}

/**
 * Keeps, for the life of the process, one inert object of each class the library makes per
 * call, per batch and per run (made through the class's own constructor, holding no call's
 * data, never used), an idle batch (one call whose body never answers, in a turn that never
 * ends: no timer, no shared lane), an ended scheduler action and a cleared timer, and a
 * Promise and a cleared timer made in the loop monitor's context. Their hidden classes, and
 * the code compiled against them, then survive a full garbage collection.
 *
 * It helps one regime: a service whose bursts of runs are separated by full collections (a
 * quiet spell with nothing in flight, then a burst). There a burst's first round no longer runs
 * interpreted while the engine's code is compiled again: measured after a full collection, a
 * round of 500 runs of 4 calls took about 40 % less CPU, and a run of 10,000 calls about half
 * the time per call (docs/performance.md, "Kept shapes"). A warm process (nothing collected between rounds) gains nothing within
 * the noise. Call it once, at startup, after importing; later calls do nothing. It never throws:
 * an exemplar that cannot be made is left out, and it is only a speed-up.
 */
export function keepWarmShapes(): void {
  if (asked) return;
  asked = true;
  for (const shapes of [runShapes, collectorShapes, turnsShapes, turnShapes, turnCallShapes, turnBatchShapes, requestShapes, laneShapes, watchShapes, ceilingShapes, callShapes, batchShapes]) {
    try {
      shapes(keepShape);
    } catch (error) {
      noted(error);
    }
  }
}

/** @internal How many exemplars are kept (for specs: none until `keepWarmShapes` is called). */
export function keptShapes(): number {
  return kept.length;
}

/** @internal What each exemplar that could not be made threw (for specs: empty). */
export function shapesNotKept(): readonly string[] {
  return failed;
}
