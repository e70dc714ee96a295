/**
 * `bullmq-idempotency/observability`: the workers' metrics (prom-client) and spans
 * (OpenTelemetry), as observers for `createIdempotency({ observer })` or `withIdempotency`.
 */
export {
  createIdempotencyMetrics,
  DEFAULT_METRICS_PREFIX,
  IdempotencyMetrics,
  type IdempotencyMetricsOptions,
} from '../observability/metrics.js';
export {
  type AttemptPhase,
  type ClaimOutcomeLabel,
  combineObservers,
  type IdempotencyObserver,
  type PhaseFacts,
  type PhaseInfo,
} from '../observability/observer.js';
export {
  createIdempotencyTracing,
  IdempotencyTracing,
  type IdempotencyTracingOptions,
  type SpanLike,
  type TracerLike,
} from '../observability/tracing.js';
