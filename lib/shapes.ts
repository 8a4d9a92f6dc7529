// The hidden classes of the objects the library makes per call, per batch and per run, kept
// alive between bursts. Imports nothing, so every layer can keep its own.
//
// V8 gives each object a hidden class (a "map") and reaches a class's full shape through one map
// per field added. Only the first is held by the class itself: the others live while some
// object has them. A service between bursts holds none of its per-call objects, so a full
// collection frees those maps, and every function compiled against them is thrown away
// ("deoptimizing ... reason: weak objects") and runs interpreted until compiled again, under the
// next burst's load. Measured on the W3 workload (500 runs of 4 calls, a full collection before
// each round), this cost a round about twice the CPU time of a warm one.

// One inert object of each kept class, for the life of the process.
const kept: object[] = [];
// What `make` threw, for each exemplar that could not be made (a spec holds this empty).
const failed: string[] = [];

/**
 * Keeps what `make` gives alive for the life of the process, so that its class's hidden classes,
 * and the code compiled against them, survive a full collection. Made once per class, when its
 * module loads, through the class's own constructor (every field set there, in one order, as the
 * code style asks), with inert arguments: it holds no call's data, and is never used. Keeping a
 * shape is only ever a speed-up: an exemplar whose constructor throws (its inert arguments no
 * longer enough) is left out, never breaking the import; `shapesNotKept` names it for the specs.
 */
export function keepShape(make: () => object): void {
  try {
    kept.push(make());
  } catch (error) {
    failed.push(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
  }
}

/** @internal How many exemplars are kept (for specs). */
export function keptShapes(): number {
  return kept.length;
}

/** @internal What each exemplar that could not be made threw (for specs: empty). */
export function shapesNotKept(): readonly string[] {
  return failed;
}
