import { ERROR_CODES, IdempotencyError } from '../errors/idempotency-error.js';
import { TerminalError } from '../errors/processor-errors.js';
import type { ConfirmationDecision } from './types.js';

/** No confirmation request has this id. */
export class ConfirmationNotFoundError extends IdempotencyError<typeof ERROR_CODES.confirmationNotFound> {
  constructor(details: ConfirmationNotFoundError['details']) {
    super(ERROR_CODES.confirmationNotFound, `No confirmation request ${details.id}`, details);
  }
}

/** The request already has a different answer; an answer is recorded once. */
export class ConfirmationAnsweredError extends IdempotencyError<typeof ERROR_CODES.confirmationAnswered> {
  constructor(details: ConfirmationAnsweredError['details']) {
    super(
      ERROR_CODES.confirmationAnswered,
      `Confirmation ${details.id} is already ${details.status.replace('_', ' ')}${details.answeredBy ? ` by ${details.answeredBy}` : ''}${details.answeredAt ? ` at ${details.answeredAt.toISOString()}` : ''}; an answer is recorded once`,
      details,
    );
  }
}

/** The request was not answered before its timeout (on the database clock): an answer now is refused. */
export class ConfirmationTimedOutError extends IdempotencyError<typeof ERROR_CODES.confirmationTimedOut> {
  constructor(details: ConfirmationTimedOutError['details']) {
    super(
      ERROR_CODES.confirmationTimedOut,
      `Confirmation ${details.id} timed out at ${details.expiresAt.toISOString()} (onTimeout: ${details.onTimeout}); the answer was not recorded`,
      details,
    );
  }
}

/**
 * Thrown by a processor whose confirmation was denied: a terminal failure with the denial's reason
 * code (`IDEMPOTENCY_CONFIRMATION_DENIED`, or `IDEMPOTENCY_CONFIRMATION_TIMED_OUT` after
 * `onTimeout: 'deny'`), which every later delivery replays.
 *
 * @example
 * const answer = await ctx.confirm({ name: 'delete-bucket', reason: 'delete bucket b-7', timeout: '1h', onTimeout: 'deny' });
 * if (!answer.approved) throw new ConfirmationDeniedError(answer);
 */
export class ConfirmationDeniedError extends TerminalError {
  readonly confirmationId: string;
  constructor(decision: Extract<ConfirmationDecision, { approved: false }>) {
    const text = `confirmation ${decision.id} denied by ${decision.byType}:${decision.by}`;
    super(decision.reasonCode, text, { publicMessage: text });
    this.name = 'ConfirmationDeniedError';
    this.confirmationId = decision.id;
  }
}

/** `onTimeout: 'fail'`: the request was not answered in time, and the operation fails for good. */
export class ConfirmationTimeoutFailure extends TerminalError {
  readonly confirmationId: string;
  constructor(id: string, expiresAt: Date) {
    const text = `confirmation ${id} was not answered by ${expiresAt.toISOString()}`;
    super(ERROR_CODES.confirmationTimedOut, text, { publicMessage: text });
    this.name = 'ConfirmationTimeoutFailure';
    this.confirmationId = id;
  }
}
