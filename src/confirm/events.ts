import { ERROR_CODES } from '../errors/idempotency-error.js';
import type { ConfirmationEventKind } from '../shared/confirmation.js';
import type { Confirmation, ConfirmationDecision } from './types.js';

export type { ConfirmationEventKind };

/** Reason code of the lease given back while the job waits for the answer (`released`). */
export const CONFIRMATION_PENDING = 'CONFIRMATION_PENDING';

/** What `ctx.confirm()` returns for a settled request (undefined while pending; a timeout that fails is not a decision). */
export function decisionOf(c: Confirmation): ConfirmationDecision | undefined {
  const at = c.answeredAt ?? c.expiresAt;
  const comment = c.comment ? { comment: c.comment } : {};
  if (c.status === 'approved') return { approved: true, id: c.id, by: c.answeredBy ?? 'unknown', at, ...comment };
  if (c.status === 'denied' || (c.status === 'timed_out' && c.onTimeout === 'deny')) {
    return {
      approved: false,
      id: c.id,
      by: c.answeredBy ?? 'unknown',
      byType: c.answeredByType ?? 'system',
      at,
      reasonCode:
        c.reasonCode ?? (c.status === 'denied' ? ERROR_CODES.confirmationDenied : ERROR_CODES.confirmationTimedOut),
      ...comment,
    };
  }
  return undefined;
}
