// How a module hands over its exemplars for keepWarmShapes (lib/shapes.ts): a type only, so the
// modules that make per-call objects need not import the module that keeps them.

/** @internal How a module hands over its exemplars: each is made by `make`, which may throw. */
export type Keep = (make: () => object) => void;
