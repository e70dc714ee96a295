import type { Duration } from '../operation/duration.js';

/** The stored request: defined below the confirm layer, since the wrapper's events carry it. */
export type { Confirmation, ConfirmationStatus, ConfirmationWaiter } from '../shared/confirmation.js';

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
   * that finds the request still pending reads it once and parks again, without a claim. At least
   * one second: a shorter one is taken as `'1s'`.
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
