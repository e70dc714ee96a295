/**
 * Stable error codes: the one table of every code the library throws or records. Programs, logs
 * and audit rows match on these strings, never on messages. A test fails when a code written
 * anywhere in src/ or migrations/ is missing here, or when a code here is used nowhere.
 */
export const ERROR_CODES = {
  // Thrown by the wrapper, the ledger, the producer and the keyring.
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
  /** The reason of an attempt's signal: its lease was taken over or not renewed in time, or BullMQ's lock was lost. */
  leaseLost: 'IDEMPOTENCY_LEASE_LOST',
  // Confirmations: thrown by the confirmation store and `answerConfirmation`, or recorded as reason codes.
  /** No confirmation request has this id. */
  confirmationNotFound: 'IDEMPOTENCY_CONFIRMATION_NOT_FOUND',
  /** The confirmation already has a different answer (the same answer again is accepted). */
  confirmationAnswered: 'IDEMPOTENCY_CONFIRMATION_ANSWERED',
  /** The confirmation was not answered in time (an answer after that is refused; `onTimeout: 'fail'` fails with it). */
  confirmationTimedOut: 'IDEMPOTENCY_CONFIRMATION_TIMED_OUT',
  /** A person (or `onTimeout: 'deny'`) said no; the code a denied operation fails with. */
  confirmationDenied: 'IDEMPOTENCY_CONFIRMATION_DENIED',
  // Recorded in the ledger's error column or as an audit reason code; never thrown.
  leaseExpired: 'IDEMPOTENCY_LEASE_EXPIRED',
  abandoned: 'IDEMPOTENCY_ABANDONED',
  staleLock: 'IDEMPOTENCY_STALE_LOCK',
  // The operations process and the CLI.
  envConfig: 'IDEMPOTENCY_ENV_CONFIG',
  serviceUnavailable: 'IDEMPOTENCY_SERVICE_UNAVAILABLE',
  notMigrated: 'IDEMPOTENCY_NOT_MIGRATED',
  usage: 'IDEMPOTENCY_USAGE',
  interrupted: 'IDEMPOTENCY_INTERRUPTED',
  commandFailed: 'IDEMPOTENCY_COMMAND_FAILED',
  /** `REDIS_URL` (or a value given as it) is none of the accepted forms. */
  invalidRedisUrl: 'IDEMPOTENCY_INVALID_REDIS_URL',
  /** The operations process's HTTP server could not listen. */
  httpListen: 'IDEMPOTENCY_HTTP_LISTEN',
  /** A route of the operations HTTP server answers other than 2xx (`HttpError`). */
  httpStatus: 'IDEMPOTENCY_HTTP_STATUS',
  /** Internal to the wrapper (never reaches BullMQ): a ledger statement could not reach Postgres; the job waits. */
  ledgerUnreachable: 'IDEMPOTENCY_LEDGER_UNREACHABLE',
  // The audit trail: thrown by the emitter and the writer, and the reasons of dead letters.
  auditEventTooLarge: 'AUDIT_EVENT_TOO_LARGE',
  auditEventInvalid: 'AUDIT_EVENT_INVALID',
  auditEventLost: 'AUDIT_EVENT_LOST',
  auditEventRefused: 'AUDIT_EVENT_REFUSED',
  auditBatchUndecodable: 'AUDIT_BATCH_UNDECODABLE',
  /**
   * The row of a claim an attempt held is gone, or its epoch went back (a restore, an asynchronous
   * standby promoted): thrown by a fenced write, and recorded on the `unknown` row written back.
   */
  recordLost: 'IDEMPOTENCY_RECORD_LOST',
  /** Logged by the operations process: a job schedule (the sweeper's) was missing from Redis and was re-created. */
  scheduleMissing: 'IDEMPOTENCY_SCHEDULE_MISSING',
  /**
   * Logged by the operations process at start: the database could lose an acknowledged claim on a
   * failover or crash (an asynchronous standby, `synchronous_commit` off or local); see docs/replication.md.
   */
  asyncReplica: 'IDEMPOTENCY_ASYNC_REPLICA',
  /** `idem.result()`: the job failed; its message is BullMQ's `failedReason` (sealed where it must be). */
  jobFailed: 'IDEMPOTENCY_JOB_FAILED',
  /** `idem.result()`: the job did not finish within the time given. */
  resultTimeout: 'IDEMPOTENCY_RESULT_TIMEOUT',
  /**
   * A sealed value was sealed for another place (another operation, key, field, step or purpose):
   * copied there, it does not open. A job carrying one is refused before anything runs.
   */
  sealMisplaced: 'IDEMPOTENCY_SEAL_MISPLACED',
  /** A value in clear where the library seals (a result, a step's result, sealed input, error text). */
  sealRequired: 'IDEMPOTENCY_SEAL_REQUIRED',
  /** A value sealed before seals named their place (`bqs1.`): never opened; see docs/sealing-keys.md. */
  sealUnbound: 'IDEMPOTENCY_SEAL_UNBOUND',
  /** A sealed result's fields in clear differ from its sealed copy: they were changed where it was stored. */
  sealPublicMismatch: 'IDEMPOTENCY_SEAL_PUBLIC_MISMATCH',
  /** Warned once per process and key (`process.emitWarning`): the key nears its budget of seals. */
  sealBudget: 'IDEMPOTENCY_SEAL_BUDGET',
} as const;

export type IdempotencyErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];

/**
 * One validation issue: where, zod's issue code, and zod's message (which may quote data).
 * `publicPath`, when not empty, is the path as a public message may show it: the keys the schema
 * declares, and `…` for every key the value brought (see `zodIssues`).
 */
export type ValidationIssue = { path: string; message: string; code?: string; publicPath?: string };

/** Why an audit batch could not be read as events; a stable code per cause. */
export type UndecodableCause = 'not_a_batch' | 'not_inflatable' | 'not_json' | 'not_an_array';

/**
 * The `details` of each code: what a program can act on, never secrets or personal data. A code
 * that is only recorded (never thrown) has `never`.
 *
 * @example
 * if (isIdempotencyError(err, ERROR_CODES.inProgress)) setTimeout(retry, err.details.retryAfterMs);
 */
export type IdempotencyErrorDetails = {
  IDEMPOTENCY_CONFLICT: { key: string; status: string; storedFingerprint: string; fingerprint: string };
  IDEMPOTENCY_MISSING_KEY: { operation: string; jobId?: string };
  IDEMPOTENCY_INVALID_KEY: { issues: { path: string; message: string }[] };
  IDEMPOTENCY_IN_PROGRESS: { key: string; retryAfterMs: number };
  IDEMPOTENCY_STALE_EPOCH: {
    key: string;
    epoch: number;
    operation: string;
    currentEpoch: number | null;
    currentStatus: string | null;
  };
  IDEMPOTENCY_UNKNOWN_OUTCOME: { key: string; epoch: number };
  /** `key` is absent when the error is a processor's own terminal error, as BullMQ receives it. */
  IDEMPOTENCY_RECORDED_FAILURE: { key?: string; error: { code: string; message: string } };
  IDEMPOTENCY_CONFIG: { option: string; [k: string]: unknown };
  IDEMPOTENCY_NOT_SERIALIZABLE: { path: string; reason: string };
  IDEMPOTENCY_TOO_LARGE: { what: string; bytes: number; limit: number };
  IDEMPOTENCY_ILLEGAL_TRANSITION: { key: string; from: string | null; action: string };
  /** A key, job or task the CLI was asked about does not exist. */
  IDEMPOTENCY_KEY_NOT_FOUND: { exitCode: number };
  IDEMPOTENCY_INVALID_INPUT: { what: string; issues: ValidationIssue[] };
  IDEMPOTENCY_SEAL_KEY_UNKNOWN: { keyId: string | null; purpose: string };
  IDEMPOTENCY_SEAL_INVALID: { keyId: string | null; purpose: string };
  IDEMPOTENCY_LEASE_LOST: { reason: 'lease_taken_over' | 'lease_expired' | 'lock_lost'; key: string; epoch: number };
  IDEMPOTENCY_LEASE_EXPIRED: never;
  IDEMPOTENCY_ABANDONED: never;
  IDEMPOTENCY_STALE_LOCK: never;
  /** Every offending environment variable. */
  IDEMPOTENCY_ENV_CONFIG: { variables: string[] };
  IDEMPOTENCY_SERVICE_UNAVAILABLE: { service: 'Postgres' | 'Redis'; target: string; reason: string };
  IDEMPOTENCY_NOT_MIGRATED: { schema: string; missing: string[] };
  IDEMPOTENCY_USAGE: { exitCode: number };
  IDEMPOTENCY_INTERRUPTED: { exitCode: number };
  IDEMPOTENCY_COMMAND_FAILED: { exitCode: number };
  IDEMPOTENCY_INVALID_REDIS_URL: Record<never, never>;
  IDEMPOTENCY_HTTP_LISTEN: { host: string; port: number; reason: string };
  IDEMPOTENCY_HTTP_STATUS: { status: number; headers: Record<string, string> };
  /** `what`: the statement that could not be made (`claim`, `complete`, `ctx.tx`…). */
  IDEMPOTENCY_LEDGER_UNREACHABLE: { what: string };
  AUDIT_EVENT_TOO_LARGE: { eventId: string; bytes: number; limit: number };
  AUDIT_EVENT_INVALID: Record<never, never>;
  AUDIT_EVENT_LOST: Record<never, never>;
  AUDIT_EVENT_REFUSED: never;
  AUDIT_BATCH_UNDECODABLE: { problem: UndecodableCause };
  IDEMPOTENCY_CONFIRMATION_NOT_FOUND: { id: string };
  IDEMPOTENCY_CONFIRMATION_ANSWERED: {
    id: string;
    status: 'pending' | 'approved' | 'denied' | 'timed_out';
    answeredBy: string | null;
    answeredAt: Date | null;
  };
  IDEMPOTENCY_CONFIRMATION_TIMED_OUT: { id: string; expiresAt: Date; onTimeout: 'deny' | 'fail' };
  /** A reason code (a denied operation fails with a TerminalError of this code); never thrown as itself. */
  IDEMPOTENCY_CONFIRMATION_DENIED: never;
  /** `currentEpoch`/`currentStatus`: the row found instead (null when there was none). */
  IDEMPOTENCY_RECORD_LOST: {
    key: string;
    epoch: number;
    operation: string;
    currentEpoch: number | null;
    currentStatus: string | null;
  };
  IDEMPOTENCY_SCHEDULE_MISSING: never;
  IDEMPOTENCY_ASYNC_REPLICA: never;
  /** `reasonCode`: the code `failedReason` starts with, when it does. */
  IDEMPOTENCY_JOB_FAILED: { queue: string; jobId: string; attemptsMade: number; reasonCode: string | null };
  IDEMPOTENCY_RESULT_TIMEOUT: { queue: string; jobId: string; state: string; timeoutMs: number };
  /** `mismatch`: the parts of the place that differ (`purpose`, `operation`, `field`, `key`), never their values. */
  IDEMPOTENCY_SEAL_MISPLACED: { keyId: string | null; purpose: string; mismatch: string[] };
  /** `field`: the input field, for sealed input. */
  IDEMPOTENCY_SEAL_REQUIRED: { purpose: string; field?: string };
  IDEMPOTENCY_SEAL_UNBOUND: { keyId: string | null; purpose: string };
  /** `fields`: how many clear fields differ from (or are missing in) the sealed copy. */
  IDEMPOTENCY_SEAL_PUBLIC_MISMATCH: { keyId: string | null; fields: number };
  IDEMPOTENCY_SEAL_BUDGET: never;
};

/** The details table and the code table hold the same codes (checked when the library compiles). */
const DETAILS_MATCH_CODES: [Exclude<keyof IdempotencyErrorDetails, IdempotencyErrorCode>] extends [never]
  ? true
  : false = true;
void DETAILS_MATCH_CODES;

const CODES: ReadonlySet<string> = new Set(Object.values(ERROR_CODES));

/** True for a code of {@link ERROR_CODES}. */
export function isErrorCode(code: unknown): code is IdempotencyErrorCode {
  return typeof code === 'string' && CODES.has(code);
}

/**
 * Base class of every error this library throws. `code` is stable across releases;
 * `details` is a payload a program can act on (never secrets or personal data), typed by code.
 */
export class IdempotencyError<C extends IdempotencyErrorCode = IdempotencyErrorCode> extends Error {
  readonly code: C;
  readonly details: IdempotencyErrorDetails[C];

  constructor(code: C, message: string, details: IdempotencyErrorDetails[C], options?: { cause?: unknown }) {
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
  toJSON(): { name: string; code: string; message: string; details: IdempotencyErrorDetails[C] } {
    return { name: this.name, code: this.code, message: this.message, details: this.details };
  }
}

/** A library error of one of the codes, its `details` typed by that code (a union on `code`). */
export type IdempotencyErrorOf<C extends IdempotencyErrorCode> = { [K in C]: IdempotencyError<K> }[C];

/**
 * True for any error thrown by this library (works across duplicated module copies: a copy's
 * errors carry the same codes). With codes, true only for errors of those codes, and `details`
 * is typed accordingly.
 *
 * @example
 * if (isIdempotencyError(err, ERROR_CODES.conflict)) log(err.details.storedFingerprint);
 */
export function isIdempotencyError<C extends IdempotencyErrorCode = IdempotencyErrorCode>(
  err: unknown,
  ...codes: C[]
): err is IdempotencyErrorOf<C> {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  if (!(err instanceof IdempotencyError) && !isErrorCode(code)) return false;
  return codes.length === 0 || (codes as unknown[]).includes(code);
}
