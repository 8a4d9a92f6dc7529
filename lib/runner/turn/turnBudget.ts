// A turn's place in its tenant's token budget (docs/concurrency.md, budget lanes): before the
// model is asked, the budget must cover the turn's reservation (`turnTokens`), or, without one,
// have something left (a turn's tokens are not known in advance); once the provider reports its
// usage, the turn is charged its tokens in place of the reservation. A turn the budget
// cannot cover is not started: the run ends RUN_FAILED with the BudgetExceededError.
import type { BudgetSpec, OnGrant, Permit } from '../../lanes/index.js';
import type { Usage } from '../model/model.js';
import type { RunnerParts } from '../parts.js';

/** The runner's token budget per tenant, if it declared one (a budget is the runner's: it spans every agent). */
export function tokenBudgetOf(parts: RunnerParts): BudgetSpec | undefined {
  const budget = parts.shared.concurrency.perTenantBudget;
  if (budget?.tokens === undefined || parts.shared.lanes.enterBudget === undefined) return undefined;
  return { measure: 'tokens', limit: budget.tokens, perSeconds: budget.perSeconds };
}

/**
 * Asks `tenant`'s token budget for a turn: the permit, granted at once or later (`turn` is told),
 * or refused (`turn.lost` is told a BudgetExceededError).
 */
export function askTokenBudget(parts: RunnerParts, spec: BudgetSpec, tenant: string, turn: OnGrant): Permit {
  const reserved = parts.shared.concurrency.perTenantBudget?.turnTokens ?? 0;
  return parts.shared.lanes.enterBudget!(`budget:tokens:${tenant}`, spec, reserved, turn, tenant);
}

/** A turn's tokens, as its provider reported them. */
export function tokensOf(usage: Usage): number {
  return usage.inputTokens + usage.outputTokens;
}
