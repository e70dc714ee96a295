/**
 * `bullmq-idempotency`: what an application writes against. `createIdempotency` builds the
 * runtime from one configuration; `defineOperation` declares an operation; the errors are what a
 * program catches. The parts for advanced use live on subpaths, each its own entry:
 * `bullmq-idempotency/ledger`, `/audit`, `/redaction`, `/observability`, `/ops`, `/testing`.
 */
export type { AuditEvent } from './audit/audit-event.js';
export { AuditEventNotDurableError } from './audit/not-durable-error.js';
export type { OperatorActionResult } from './audit/operator-actions.js';
export type { Timeline, TimelineAttempt, TimelineWait } from './audit/timeline.js';
export type { TimelineConfirmation } from './audit/timeline-confirmations.js';
export type { AnswerResult } from './confirm/answer.js';
export {
  ConfirmationAnsweredError,
  ConfirmationDeniedError,
  ConfirmationNotFoundError,
  ConfirmationTimedOutError,
  ConfirmationTimeoutFailure,
} from './confirm/errors.js';
export type {
  Confirmation,
  ConfirmationDecision,
  ConfirmationStatus,
  ConfirmationWaiter,
  ConfirmRequest,
} from './confirm/types.js';
export {
  IdempotencyConfigError,
  IdempotencyConflictError,
  IdempotencyInProgressError,
  IllegalTransitionError,
  InvalidIdempotencyKeyError,
  InvalidInputError,
  JobFailedError,
  MissingIdempotencyKeyError,
  PayloadTooLargeError,
  RecordedFailureError,
  RecordLostError,
  ResultTimeoutError,
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
  type ProcessorErrorOptions,
  RetryableError,
  type RetryableErrorOptions,
  TerminalError,
} from './errors/processor-errors.js';
export type { PostgresLedger } from './ledger/postgres-ledger.js';
export type { IdempotencyObserver } from './observability/observer.js';
export { defineOperation } from './operation/define-operation.js';
export type { Duration } from './operation/duration.js';
export type { AbsorbedState, EnqueueOptions, EnqueueResult } from './operation/enqueue-types.js';
export type {
  Operation,
  OperationDefinition,
  ReconcileContext,
  ReconcileOutcome,
} from './operation/operation.js';
export type { RerunOutcome } from './operation/rerun.js';
export type { WorkerTiming } from './operation/retry-window.js';
export type { RedactionPolicy } from './redaction/define-policy.js';
export type { RedactionPolicyInput } from './redaction/policy-schema.js';
export { createIdempotency, type Idempotency } from './runtime/create-idempotency.js';
export { idempotencyOptionsFromEnv } from './runtime/from-env.js';
export type { IdempotencyAuditOptions, IdempotencyOptions } from './runtime/options.js';
export type {
  IdempotentBullProcessor,
  OperatorOptions,
  QueuedOperation,
  RuntimeResolveOutcome,
} from './runtime/runtime-types.js';
export type { IdempotencyWorkerOptions, ProcessorOptions } from './runtime/worker-options.js';
export {
  defineKeyring,
  type Keyring,
  type KeyringKey,
  type KeyringOptions,
  loadKeyring,
  parseKeyringSpec,
} from './sealing/keyring.js';
export { originalError } from './sealing/original-error.js';
export { type SealedResult, unseal } from './sealing/sealed-result.js';
export { isSealed, type Sealed, type SealPurpose } from './sealing/sealed-text.js';
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
