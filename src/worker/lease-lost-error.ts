import { ERROR_CODES, IdempotencyError, type IdempotencyErrorDetails } from '../errors/idempotency-error.js';

/** Why an attempt lost its lease. */
export type LeaseLostReason = IdempotencyErrorDetails['IDEMPOTENCY_LEASE_LOST']['reason'];

/**
 * The reason of an attempt's (or a step's) `signal` when it fired because the lease was lost:
 * taken over by another attempt, not renewed before it expired, or BullMQ's lock on the job lost.
 * `code` is `IDEMPOTENCY_LEASE_LOST`; `details.reason` (also `reason`) says which.
 */
export class LeaseLostError extends IdempotencyError<typeof ERROR_CODES.leaseLost> {
  constructor(details: IdempotencyErrorDetails['IDEMPOTENCY_LEASE_LOST'], message: string) {
    super(ERROR_CODES.leaseLost, message, details);
  }

  /** Which of the three ways the lease was lost. */
  get reason(): LeaseLostReason {
    return this.details.reason;
  }
}
