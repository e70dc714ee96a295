import type { Duration } from '../operation/duration.js';

/**
 * What `ctx.confirm()` asks a person. The request is recorded once per operation key and `name`:
 * every retry, redelivery and worker of the operation meets the same request and its answer.
 *
 * @example
 * const answer = await ctx.confirm({ name: 'large-payment', reason: `charge ${input.amount} cents`,
 *   timeout: '24h', onTimeout: 'deny' });
 */
export type ConfirmRequest = {
  /** Names the confirmation within the operation: letters, digits, `.`, `_`, `-`; at most 100. */
  name: string;
  /**
   * What the person is asked, shown by `confirmations list`: one line, scanned by the default
   * redaction policy's value scanners (e-mail addresses, tokens, card numbers are masked), at
   * most 500 characters. Put identifiers and amounts here, never personal data.
   */
  reason: string;
  /** More for the person deciding; kept sealed with the workers' keyring, never in clear. */
  details?: Record<string, unknown>;
  /**
   * How long the request waits for an answer, on the database clock; at most the operation's
   * `maxConfirmationTimeout`.
   */
  timeout: Duration;
  /** What an unanswered request becomes: a recorded denial, or a terminal failure of the operation. */
  onTimeout: 'deny' | 'fail';
  /**
   * Longest time the parked job sleeps before it looks again (an answer wakes it earlier). A look
   * that finds the request still pending reads it once and parks again, without a claim.
   * @defaultValue `'1m'`
   */
  recheckEvery?: Duration;
};

/** The answer `ctx.confirm()` returns, the same on every later attempt. */
export type ConfirmationDecision =
  | { approved: true; id: string; by: string; at: Date; comment?: string }
  | {
      approved: false;
      id: string;
      /** Who said no: a person (`user`), or the timeout (`system`, `onTimeout: 'deny'`). */
      by: string;
      byType: 'user' | 'system';
      at: Date;
      /** `IDEMPOTENCY_CONFIRMATION_DENIED`, or `IDEMPOTENCY_CONFIRMATION_TIMED_OUT` for a timeout. */
      reasonCode: string;
      comment?: string;
    };

export type ConfirmationStatus = 'pending' | 'approved' | 'denied' | 'timed_out';

/** A parked job that an answer wakes. */
export type ConfirmationWaiter = { queue: string; jobId: string };

/** A confirmation request as it is stored (details stay sealed). */
export type Confirmation = {
  /** `cf-<n>`: what `confirm <id>` takes. */
  id: string;
  operationKey: string;
  name: string;
  operation: string;
  reason: string;
  /** The sealed details, or null. */
  details: string | null;
  status: ConfirmationStatus;
  onTimeout: 'deny' | 'fail';
  timeoutMs: number;
  taskId: string | null;
  jobId: string | null;
  queue: string | null;
  /** The epoch of the attempt that asked first. */
  requestedEpoch: number;
  requestedAt: Date;
  expiresAt: Date;
  answeredAt: Date | null;
  answeredBy: string | null;
  answeredByType: 'user' | 'system' | null;
  reasonCode: string | null;
  comment: string | null;
  waiters: ConfirmationWaiter[];
  /** The database time the row was read at. */
  readAt: Date;
  /** Pending past its timeout (the next look at it records the timeout). */
  overdue: boolean;
};
