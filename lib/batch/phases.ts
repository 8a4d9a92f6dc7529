// Phases: consecutive parallel-safe calls share one; a call that is not
// parallel-safe is a phase alone. Phases run one after another.

/** Splits calls into phases, keeping call order inside and across them. */
export function toPhases<C extends { readonly parallelSafe?: boolean }>(calls: readonly C[]): C[][] {
  const phases: C[][] = [];
  let open: C[] | undefined;
  for (const call of calls) {
    if (call.parallelSafe === false) {
      phases.push([call]);
      open = undefined;
    } else {
      if (open === undefined) phases.push((open = []));
      open.push(call);
    }
  }
  return phases;
}
