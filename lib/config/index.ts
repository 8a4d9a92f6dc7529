export { ConcurrencyConfig, type ConcurrencyOptions } from './ConcurrencyConfig.js';
export { burstOf, isSlower, slowerRate, tenantRate, type RateOptions } from './rates.js';
export { DeadlineConfig, type DeadlineOptions } from './DeadlineConfig.js';
export { decodeConfig, own, refuseNonConfig, refuseUnknownFields, tighter, PositiveInt, PositiveSeconds } from './limits.js';
export { describeFailures, describeValue, failures, type Failure } from './report.js';
export { type AdaptiveOptions, type BudgetOptions } from './laneKinds.js';
