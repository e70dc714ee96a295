/**
 * Stable error codes. Programs, logs and audit rows match on these strings, never on messages.
 */
export const ERROR_CODES = {
  conflict: 'IDEMPOTENCY_CONFLICT',
  missingKey: 'IDEMPOTENCY_MISSING_KEY',
  invalidKey: 'IDEMPOTENCY_INVALID_KEY',
  inProgress: 'IDEMPOTENCY_IN_PROGRESS',
  staleEpoch: 'IDEMPOTENCY_STALE_EPOCH',
  unknownOutcome: 'IDEMPOTENCY_UNKNOWN_OUTCOME',
  recordedFailure: 'IDEMPOTENCY_RECORDED_FAILURE',
  config: 'IDEMPOTENCY_CONFIG',
  serialization: 'IDEMPOTENCY_NOT_SERIALIZABLE',
  tooLarge: 'IDEMPOTENCY_TOO_LARGE',
  illegalTransition: 'IDEMPOTENCY_ILLEGAL_TRANSITION',
  notFound: 'IDEMPOTENCY_KEY_NOT_FOUND',
  invalidInput: 'IDEMPOTENCY_INVALID_INPUT',
  sealKeyUnknown: 'IDEMPOTENCY_SEAL_KEY_UNKNOWN',
  sealInvalid: 'IDEMPOTENCY_SEAL_INVALID',
  /** No confirmation request has this id. */
  confirmationNotFound: 'IDEMPOTENCY_CONFIRMATION_NOT_FOUND',
  /** The confirmation already has a different answer (the same answer again is accepted). */
  confirmationAnswered: 'IDEMPOTENCY_CONFIRMATION_ANSWERED',
  /** The confirmation was not answered in time (an answer after that is refused; `onTimeout: 'fail'` fails with it). */
  confirmationTimedOut: 'IDEMPOTENCY_CONFIRMATION_TIMED_OUT',
  /** A person (or `onTimeout: 'deny'`) said no; the code a denied operation fails with. */
  confirmationDenied: 'IDEMPOTENCY_CONFIRMATION_DENIED',
} as const;

export type IdempotencyErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];

/**
 * Base class of every error this library throws. `code` is stable across releases;
 * `details` is a payload a program can act on (never secrets or personal data).
 */
export class IdempotencyError<D extends object = Record<string, unknown>> extends Error {
  readonly code: IdempotencyErrorCode;
  readonly details: D;

  constructor(code: IdempotencyErrorCode, message: string, details: D, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }

  /**
   * The message as it may be stored in clear (ledger, BullMQ's `failedReason`): the library builds
   * it from codes, keys and numbers only. Errors whose message quotes application data (field
   * names in zod issues, a value's path) override it with a form that leaves that data out.
   */
  get publicMessage(): string {
    return this.message;
  }

  /** A JSON form for logs and the ledger's error column. */
  toJSON(): { name: string; code: string; message: string; details: D } {
    return { name: this.name, code: this.code, message: this.message, details: this.details };
  }
}

/** True for any error thrown by this library (works across duplicated module copies). */
export function isIdempotencyError(err: unknown): err is IdempotencyError {
  return (
    err instanceof IdempotencyError ||
    (typeof err === 'object' &&
      err !== null &&
      typeof (err as { code?: unknown }).code === 'string' &&
      ((err as { code: string }).code as string).startsWith('IDEMPOTENCY_'))
  );
}
