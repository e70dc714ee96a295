export { DEFAULT_SCHEMA, type PostgresOptions } from './db/connection.js';
export { MIGRATION_LOCK_TABLE, MIGRATION_TABLE, type MigrateOptions, migrate } from './db/migrate.js';
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
export { RetryableError, TerminalError } from './errors/processor-errors.js';
export { canonicalJson } from './fingerprint/canonical-json.js';
export { fingerprint } from './fingerprint/fingerprint.js';
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
  defineOperation,
  type Operation,
  type OperationDefinition,
  type ReconcileContext,
  type ReconcileOutcome,
} from './operation/define-operation.js';
export type { Duration } from './operation/duration.js';
export { ENVELOPE_FIELD } from './operation/envelope.js';
export {
  BULLMQ_DEFAULTS,
  type RetryJobOptions,
  type RetryWindowOptions,
  retryWindowMs,
  type WorkerTiming,
} from './operation/retry-window.js';
export { type EnqueueOptions, type EnqueueResult, jobIdFor } from './producer/enqueue.js';
export type {
  ClaimOptions,
  ClaimOutcome,
  Downstream,
  IdempotencyKey,
  KeyLike,
  LedgerRecord,
  LedgerStatus,
  RecordedError,
  ResolveOutcome,
  Transition,
  WriteReceipt,
} from './types.js';
export type { IdempotentProcessor } from './worker/attempt.js';
export { LeaseLostError } from './worker/lease-keeper.js';
export type {
  AuditSink,
  DecisionInput,
  Logger,
  ProcessorContext,
  StepContext,
  WithIdempotencyOptions,
  WrapperEvent,
  WrapperEventType,
} from './worker/types.js';
export { withIdempotency } from './worker/with-idempotency.js';
