/**
 * Errors a processor throws to say what happened to its side effect. Anything else is
 * classified by the operation's `downstream` mode (see withIdempotency).
 */

/** Nothing was committed and trying again may succeed: the key is released and BullMQ retries with it. */
export class RetryableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RetryableError';
  }
}

/**
 * The operation failed for good and nothing was committed (a declined card, a refused request):
 * the failure is recorded and replayed to every later attempt until retention ends.
 */
export class TerminalError extends Error {
  /** Stable code recorded in the ledger and shown to later attempts. */
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'TerminalError';
    this.code = code;
  }
}
