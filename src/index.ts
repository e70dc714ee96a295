export { type AuditEvent, auditEventSchema, eventIdFor, redactionReceiptSchema } from './audit/audit-event.js';
export { AuditStore, type AuditStoreOptions, type WriteBatchResult } from './audit/audit-store.js';
export type { DeadLetterReason } from './audit/dead-letter-reason.js';
export {
  AUDIT_JOB_NAME,
  AuditEmitter,
  type AuditEmitterOptions,
  type AuditRedactor,
  DEFAULT_MAX_EVENT_BYTES,
} from './audit/emitter.js';
export { AuditEventNotDurableError } from './audit/not-durable-error.js';
export {
  invalidateKey,
  type OperatorActionOptions,
  type OperatorActionResult,
  resolveKey,
} from './audit/operator-actions.js';
export {
  type AuditPartitionOptions,
  type AuditPartitionResult,
  auditHorizon,
  maintainAuditPartitions,
} from './audit/partitions.js';
export { auditRedactor } from './audit/redact-event.js';
export { buildTimeline, renderTimeline, type Timeline, type TimelineAttempt, timeline } from './audit/timeline.js';
export type { TimelineConfirmation } from './audit/timeline-confirmations.js';
export { auditWorkerFailures } from './audit/worker-failures.js';
export { type Config as OperationsConfig, type ConnectionFlags, loadConfig } from './config/env.js';
export {
  type AnswerConfirmationOptions,
  type AnswerResult,
  answerConfirmation,
  type ConfirmationsOptions,
  listConfirmations,
} from './confirm/answer.js';
export {
  ConfirmationAnsweredError,
  ConfirmationDeniedError,
  ConfirmationNotFoundError,
  ConfirmationTimedOutError,
  ConfirmationTimeoutFailure,
} from './confirm/errors.js';
export {
  type ConfirmationHttpHandler,
  type ConfirmationHttpOptions,
  confirmationHttpHandler,
  MIN_CONFIRMATION_TOKEN_LENGTH,
} from './confirm/http-handler.js';
export type {
  Confirmation,
  ConfirmationDecision,
  ConfirmationStatus,
  ConfirmationWaiter,
  ConfirmRequest,
} from './confirm/types.js';
export { DEFAULT_SCHEMA, type PostgresOptions } from './db/connection.js';
export { MIGRATION_LOCK_TABLE, MIGRATION_TABLE, type MigrateOptions, migrate } from './db/migrate.js';
export type { PoolLogger } from './db/pool-errors.js';
export {
  IdempotencyConfigError,
  IdempotencyConflictError,
  IdempotencyInProgressError,
  IllegalTransitionError,
  InvalidIdempotencyKeyError,
  InvalidInputError,
  MissingIdempotencyKeyError,
  PayloadTooLargeError,
  RecordedFailureError,
  SealError,
  SerializationError,
  StaleEpochError,
  UnknownOutcomeError,
} from './errors/errors.js';
export {
  ERROR_CODES,
  IdempotencyError,
  type IdempotencyErrorCode,
  isIdempotencyError,
} from './errors/idempotency-error.js';
export {
  DEFAULT_RETRYABLE_CODE,
  type ProcessorErrorOptions,
  RetryableError,
  type RetryableErrorOptions,
  TerminalError,
} from './errors/processor-errors.js';
export { canonicalJson } from './fingerprint/canonical-json.js';
export { fingerprint } from './fingerprint/fingerprint.js';
export { keyedFingerprint } from './fingerprint/keyed-fingerprint.js';
export {
  type BackfillOptions,
  type BackfillProgress,
  createBackfillWorker,
  DEFAULT_BACKFILL_QUEUE,
  drainOutbox,
  runBackfill,
} from './jobs/audit-backfill.js';
export { type AuditWriterOptions, createAuditWriter, DEFAULT_AUDIT_QUEUE } from './jobs/audit-writer.js';
export {
  createSweeperWorker,
  DEFAULT_SWEEPER_QUEUE,
  type SweepOptions,
  scheduleLedgerSweeper,
  sweepLedger,
} from './jobs/ledger-sweeper.js';
export {
  boundedKey,
  canonicalKey,
  idempotencyKeySchema,
  KEY_LIMITS,
  MAX_BOUNDED_KEY_LENGTH,
  parseCanonicalKey,
  parseIdempotencyKey,
} from './keys/idempotency-key.js';
export {
  DEFAULT_MAX_RESULT_BYTES,
  type LedgerExecutor,
  type LedgerOptions,
  PostgresLedger,
} from './ledger/postgres-ledger.js';
export {
  createIdempotencyMetrics,
  DEFAULT_METRICS_PREFIX,
  IdempotencyMetrics,
  type IdempotencyMetricsOptions,
} from './observability/metrics.js';
export {
  type AttemptPhase,
  type ClaimOutcomeLabel,
  combineObservers,
  type IdempotencyObserver,
  type PhaseFacts,
  type PhaseInfo,
} from './observability/observer.js';
export {
  createIdempotencyTracing,
  IdempotencyTracing,
  type IdempotencyTracingOptions,
  type SpanLike,
  type TracerLike,
} from './observability/tracing.js';
export type {
  Operation,
  OperationDefinition,
  ReconcileContext,
  ReconcileOutcome,
} from './operation/define-operation.js';
export type { Duration } from './operation/duration.js';
export type { AbsorbedState, EnqueueOptions, EnqueueResult } from './operation/enqueue-types.js';
export {
  type RetryJobOptions,
  type RetryWindowOptions,
  retryWindowMs,
  type WorkerTiming,
} from './operation/retry-window.js';
export {
  HttpError,
  type HttpMethod,
  type HttpMountHandler,
  type HttpReply,
  type HttpRoute,
  OpsHttpServer,
  readBody,
} from './ops/http-server.js';
export {
  type OperationsProcess,
  type OperationsProcessOptions,
  startOperationsProcess,
} from './ops/operations-process.js';
export { defineOperation } from './producer/define-operation.js';
export { jobIdFor } from './producer/enqueue.js';
export { type RerunOptions, type RerunOutcome, rerun } from './producer/rerun.js';
export {
  type CustomScannerInput,
  DEFAULT_REDACTION_POLICY,
  defineRedactionPolicy,
  FIELD_CLASSES,
  type FieldClass,
  identifierRef,
  type PinoRedactionConfig,
  type PinoSerializer,
  pinoRedactionOptions,
  pinoRedactPaths,
  type RedactedError,
  type RedactionPolicy,
  type RedactionPolicyInput,
  type RedactionReceipt,
  type RedactionResult,
  redact,
  redactDetails,
  redactError,
  redactString,
} from './redaction/index.js';
export {
  defineKeyring,
  isSealed,
  Keyring,
  type KeyringKey,
  type KeyringOptions,
  loadKeyring,
  parseKeyringSpec,
  type Sealed,
  type SealPurpose,
} from './sealing/keyring.js';
export { openRecordedError, type SealedErrorText } from './sealing/sealed-error.js';
export { isSealedResult, SEALED_FIELD, type SealedResult, unseal } from './sealing/sealed-result.js';
export type { Logger } from './shared/logger.js';
export type { AuditSink, WrapperEvent, WrapperEventType } from './shared/wrapper-event.js';
export type * from './types.js';
export { LeaseLostError } from './worker/lease-keeper.js';
export type {
  DecisionInput,
  IdempotentProcessor,
  ProcessorContext,
  StepContext,
  WithIdempotencyOptions,
} from './worker/types.js';
export { withIdempotency } from './worker/with-idempotency.js';
