/**
 * Errors a processor throws to say what happened to its side effect. Anything else is
 * classified by the operation's `downstream` mode (see withIdempotency).
 *
 * The message of any error is sealed before it is stored (ledger, BullMQ's `failedReason` and
 * `stacktrace`); `publicMessage` is the text an application chooses to show in clear instead of
 * the `sealed message, N bytes` marker. Put no secret or personal data in it.
 */

/** Options of {@link RetryableError} and {@link TerminalError}. */
export type ProcessorErrorOptions = {
  cause?: unknown;
  /** Shown in clear in the ledger and in BullMQ's `failedReason`; the message itself is sealed. */
  publicMessage?: string;
};

/** The code a {@link RetryableError} records when the application gives none. */
export const DEFAULT_RETRYABLE_CODE = 'RETRYABLE';

/** Options of {@link RetryableError}. */
export type RetryableErrorOptions = ProcessorErrorOptions & {
  /**
   * Stable code recorded in the ledger and told by the `released` audit event (an `UPPER_SNAKE`
   * code stays in clear there). @defaultValue {@link DEFAULT_RETRYABLE_CODE}
   */
  code?: string;
};

/** Nothing was committed and trying again may succeed: the key is released and BullMQ retries with it. */
export class RetryableError extends Error {
  /** Stable code recorded in the ledger and told by the audit trail. */
  readonly code: string;
  /** Text shown in clear instead of the sealed message, when the application gave one. */
  readonly publicMessage: string | undefined;
  constructor(message: string, options?: RetryableErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RetryableError';
    // Without it the class name would be the code, which an audit reason code's grammar refuses.
    this.code = options?.code ?? DEFAULT_RETRYABLE_CODE;
    this.publicMessage = options?.publicMessage;
  }
}

/**
 * The operation failed for good and nothing was committed (a declined card, a refused request):
 * the failure is recorded and replayed to every later attempt until retention ends.
 */
export class TerminalError extends Error {
  /** Stable code recorded in the ledger and shown to later attempts. */
  readonly code: string;
  /** Text shown in clear instead of the sealed message, when the application gave one. */
  readonly publicMessage: string | undefined;
  constructor(code: string, message: string, options?: ProcessorErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'TerminalError';
    this.code = code;
    this.publicMessage = options?.publicMessage;
  }
}
