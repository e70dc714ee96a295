import { cleanPath, isCleanName } from './clean-name.js';
import {
  ERROR_CODES,
  IdempotencyError,
  type IdempotencyErrorDetails,
  type ValidationIssue,
} from './idempotency-error.js';

export type { ValidationIssue } from './idempotency-error.js';

/** The same key arrived with different effect-bearing input. Refused before any side effect. */
export class IdempotencyConflictError extends IdempotencyError<typeof ERROR_CODES.conflict> {
  constructor(details: IdempotencyConflictError['details']) {
    super(
      ERROR_CODES.conflict,
      `Idempotency key ${details.key} was already used with different input (record is ${details.status}); create a new operation key for changed input`,
      details,
    );
  }
}

/** A protected job carries no idempotency key and none can be derived. */
export class MissingIdempotencyKeyError extends IdempotencyError<typeof ERROR_CODES.missingKey> {
  constructor(details: MissingIdempotencyKeyError['details']) {
    super(
      ERROR_CODES.missingKey,
      `Operation ${details.operation} requires an idempotency key, and job ${details.jobId ?? '(unknown)'} carries none and none can be derived`,
      details,
    );
  }
}

/** A key component is empty, too long, not a string or contains control characters. */
export class InvalidIdempotencyKeyError extends IdempotencyError<typeof ERROR_CODES.invalidKey> {
  constructor(issues: { path: string; message: string }[]) {
    super(
      ERROR_CODES.invalidKey,
      `Invalid idempotency key: ${issues.map((i) => `${i.path || 'key'}: ${i.message}`).join('; ')}`,
      { issues },
    );
  }
}

/** Another attempt holds the lease of this key. */
export class IdempotencyInProgressError extends IdempotencyError<typeof ERROR_CODES.inProgress> {
  constructor(details: IdempotencyInProgressError['details']) {
    super(ERROR_CODES.inProgress, `Operation ${details.key} is in progress in another attempt`, details);
  }
}

/** A write carried an epoch that is no longer current: the lease was taken over or the key invalidated. */
export class StaleEpochError extends IdempotencyError<typeof ERROR_CODES.staleEpoch> {
  constructor(details: StaleEpochError['details']) {
    super(
      ERROR_CODES.staleEpoch,
      `Rejected ${details.operation} of ${details.key} with stale epoch ${details.epoch} (current epoch ${details.currentEpoch ?? 'none'}, status ${details.currentStatus ?? 'absent'})`,
      details,
    );
  }
}

/** The outcome of an earlier attempt is ambiguous; an operator or a reconcile hook must resolve it. */
export class UnknownOutcomeError extends IdempotencyError<typeof ERROR_CODES.unknownOutcome> {
  constructor(details: UnknownOutcomeError['details']) {
    super(
      ERROR_CODES.unknownOutcome,
      `Operation ${details.key} has an unknown outcome (a side effect may have been committed); it will not be retried until it is resolved`,
      details,
    );
  }
}

/** The key has a recorded terminal failure that is still within retention. */
export class RecordedFailureError extends IdempotencyError<typeof ERROR_CODES.recordedFailure> {
  constructor(details: RecordedFailureError['details'] & { key: string }) {
    super(
      ERROR_CODES.recordedFailure,
      `Operation ${details.key} failed with ${details.error.code}: ${details.error.message}`,
      details,
    );
  }
}

/** Bad configuration, such as a lease that is not shorter than the lock or a retention shorter than the retry window. */
export class IdempotencyConfigError extends IdempotencyError<typeof ERROR_CODES.config> {
  constructor(message: string, details: IdempotencyConfigError['details']) {
    super(ERROR_CODES.config, message, details);
  }
}

/** A value that must be recorded as JSON is not JSON (undefined, function, BigInt, NaN, a cycle...). */
export class SerializationError extends IdempotencyError<typeof ERROR_CODES.serialization> {
  constructor(details: SerializationError['details']) {
    super(ERROR_CODES.serialization, `Value is not JSON-serialisable at ${details.path}: ${details.reason}`, details);
  }

  /** The path's field names only where they are clean names: a key can be data. */
  override get publicMessage(): string {
    return `Value is not JSON-serialisable at ${cleanPath(this.details.path)}: ${this.details.reason}`;
  }
}

/** A result or error exceeds the configured size bound. */
export class PayloadTooLargeError extends IdempotencyError<typeof ERROR_CODES.tooLarge> {
  constructor(details: PayloadTooLargeError['details']) {
    super(
      ERROR_CODES.tooLarge,
      `The ${details.what} is ${details.bytes} bytes, above the limit of ${details.limit} bytes`,
      details,
    );
  }
}

/** A ledger transition that the state machine does not allow (resolve of a key that is not unknown...). */
export class IllegalTransitionError extends IdempotencyError<typeof ERROR_CODES.illegalTransition> {
  constructor(details: IllegalTransitionError['details']) {
    super(
      ERROR_CODES.illegalTransition,
      `Cannot ${details.action} ${details.key}: record is ${details.from ?? 'absent'}`,
      details,
    );
  }
}

/** Job data or operation input failed validation. */
export class InvalidInputError extends IdempotencyError<typeof ERROR_CODES.invalidInput> {
  constructor(what: string, issues: ValidationIssue[]) {
    super(
      ERROR_CODES.invalidInput,
      `Invalid ${what}: ${issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`,
      { what, issues },
    );
  }

  /** Paths and issue codes, never zod's text: a message can name an unexpected key or quote a value. */
  override get publicMessage(): string {
    const issues = this.details.issues.map(
      (i) => `${cleanPath(i.publicPath || i.path)} (${i.code && isCleanName(i.code) ? i.code : 'invalid'})`,
    );
    return `Invalid ${this.details.what}: ${issues.join('; ')}`;
  }
}

/** The codes of {@link SealError}. */
type SealErrorCode =
  | typeof ERROR_CODES.sealKeyUnknown
  | typeof ERROR_CODES.sealInvalid
  | typeof ERROR_CODES.sealMisplaced
  | typeof ERROR_CODES.sealRequired
  | typeof ERROR_CODES.sealUnbound
  | typeof ERROR_CODES.sealPublicMismatch;

/**
 * A sealed value cannot be opened, or must not be used: `IDEMPOTENCY_SEAL_KEY_UNKNOWN` when the
 * key it was sealed with is not in the keyring (removed after a rotation, or another
 * deployment's), `IDEMPOTENCY_SEAL_INVALID` when it is malformed or fails authentication (changed
 * or cut), `IDEMPOTENCY_SEAL_MISPLACED` when it was sealed for another place,
 * `IDEMPOTENCY_SEAL_REQUIRED` for a value in clear where a seal belongs,
 * `IDEMPOTENCY_SEAL_UNBOUND` for a value sealed before seals named their place, and
 * `IDEMPOTENCY_SEAL_PUBLIC_MISMATCH` when a result's clear fields differ from its sealed copy.
 * Never garbage: a value either opens exactly, where it was sealed, or throws this.
 */
export class SealError<C extends SealErrorCode = SealErrorCode> extends IdempotencyError<C> {
  constructor(code: C, details: IdempotencyErrorDetails[C]) {
    super(code, sealMessage(code, details as Record<string, unknown>), details);
  }
}

function sealMessage(code: SealErrorCode, d: Record<string, unknown>): string {
  const what = `a sealed ${String(d.purpose ?? 'result')}`;
  switch (code) {
    case ERROR_CODES.sealKeyUnknown:
      return `Cannot open ${what}: key ${d.keyId} is not in the keyring`;
    case ERROR_CODES.sealMisplaced:
      return `Cannot open ${what}: it was sealed for another ${(d.mismatch as string[]).join(' and ')} (copied from elsewhere?)`;
    case ERROR_CODES.sealRequired:
      return `Refused ${String(d.purpose)}${d.field ? ` field ${String(d.field)}` : ''} in clear: only a sealed value is accepted there`;
    case ERROR_CODES.sealUnbound:
      return (
        `Cannot open ${what}: it was sealed before seals were bound to their place (bqs1); ` +
        'see docs/sealing-keys.md, "Values sealed before binding"'
      );
    case ERROR_CODES.sealPublicMismatch:
      return `A sealed result's fields in clear differ from its sealed copy (${d.fields} field(s)): they were changed where it was stored`;
    default:
      return `Cannot open ${what}: it is malformed or was altered`;
  }
}

/** The command that makes the library's tables in `schema`. */
export function migrateCommand(schema: string): string {
  return `BQI_SCHEMA=${schema} npx bullmq-idempotency migrate`;
}

/** The schema has not been migrated: the library's tables are missing (run `migrate`). */
export class NotMigratedError extends IdempotencyError<typeof ERROR_CODES.notMigrated> {
  constructor(schema: string, missing: string[]) {
    super(
      ERROR_CODES.notMigrated,
      `schema ${schema} is not migrated (missing ${missing.join(', ')}): run \`${migrateCommand(schema)}\` first`,
      { schema, missing },
    );
  }

  get schema(): string {
    return this.details.schema;
  }

  get missing(): string[] {
    return this.details.missing;
  }
}

/**
 * The ledger row of a claim the attempt held is gone, or holds a lower epoch than the attempt's
 * (epochs went back): the record was lost after the claim was acknowledged (a restore from backup,
 * an asynchronous standby promoted). Never "stale": no newer attempt fenced this one, and a retry
 * that claimed the key afresh would run the side effect again. See `docs/replication.md`.
 */
export class RecordLostError extends IdempotencyError<typeof ERROR_CODES.recordLost> {
  constructor(details: RecordLostError['details']) {
    super(
      ERROR_CODES.recordLost,
      `The record of ${details.key} was lost while epoch ${details.epoch} held it (${details.operation} found ${details.currentStatus === null ? 'no row' : `epoch ${details.currentEpoch}, status ${details.currentStatus}`}); it is not retried unattended`,
      details,
    );
  }
}

/**
 * The job `idem.result()` waited for failed. The message is BullMQ's `failedReason` as the
 * wrapper made it (code, class, public message, how to open the sealed copy); `reasonCode` the code
 * it starts with. In the process that ran the attempt, `originalError()` of the `failed` event's
 * error gives the processor's own error.
 */
export class JobFailedError extends IdempotencyError<typeof ERROR_CODES.jobFailed> {
  constructor(failedReason: string, details: JobFailedError['details']) {
    super(ERROR_CODES.jobFailed, failedReason || `job ${details.jobId} failed`, details);
  }
}

/** The job `idem.result()` waited for did not finish within `timeoutMs` (it may still finish later). */
export class ResultTimeoutError extends IdempotencyError<typeof ERROR_CODES.resultTimeout> {
  constructor(details: ResultTimeoutError['details']) {
    super(
      ERROR_CODES.resultTimeout,
      `job ${details.jobId} of queue ${details.queue} is still ${details.state} after ${details.timeoutMs} ms`,
      details,
    );
  }
}
