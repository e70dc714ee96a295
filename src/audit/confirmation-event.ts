import { ERROR_CODES } from '../errors/idempotency-error.js';
import { CONFIRMATION_ACTIONS, type Confirmation, type ConfirmationEventKind } from '../shared/confirmation.js';
import { type AuditEvent, eventIdFor } from './audit-event.js';

/** Reason code of the request event; the answer's is its status's. */
export const CONFIRMATION_REQUIRED = 'CONFIRMATION_REQUIRED';
export const CONFIRMATION_APPROVED = 'CONFIRMATION_APPROVED';

const STATE = (c: Pick<Confirmation, 'id'>, status: string) => `confirmation:${c.id}:${status}`;

/**
 * The audit event of one moment of a confirmation: the request (`pending_confirmation`, by the
 * agent that asked), the answer (`allow`/`deny`, by the user who gave it) or the timeout (`deny`,
 * by the system). Ids and times come from the stored request alone, so the worker that waits, the
 * command or endpoint that answers and any later attempt all describe a moment by the same event:
 * the trail keeps one row, whoever writes it first.
 */
export function confirmationEvent(kind: ConfirmationEventKind, c: Confirmation, via?: string): AuditEvent {
  const base: AuditEvent = {
    eventId: eventIdFor('confirmation', c.operationKey, c.name, kind),
    actorType: 'agent',
    actorId: c.operation,
    action: CONFIRMATION_ACTIONS[kind],
    resourceType: 'confirmation',
    resourceId: c.id,
    decision: 'pending_confirmation',
    createdAt: c.requestedAt.toISOString(),
    operation: c.operation,
    operationId: c.operationKey,
    phase: kind === 'requested' ? 'intent' : 'outcome',
    epoch: c.requestedEpoch,
  };
  if (c.taskId) base.taskId = c.taskId;
  if (c.jobId) base.jobId = c.jobId;
  if (c.queue) base.queue = c.queue;
  if (kind === 'requested') {
    return {
      ...base,
      reasonCode: CONFIRMATION_REQUIRED,
      afterStateRef: STATE(c, 'pending'),
      details: { name: c.name, timeoutMs: c.timeoutMs, onTimeout: c.onTimeout },
    };
  }
  const at = (c.answeredAt ?? c.expiresAt).toISOString();
  if (kind === 'timedOut') {
    return {
      ...base,
      actorType: 'system',
      actorId: 'confirmation-timeout',
      decision: 'deny',
      reasonCode: ERROR_CODES.confirmationTimedOut,
      createdAt: at,
      beforeStateRef: STATE(c, 'pending'),
      afterStateRef: STATE(c, 'timed_out'),
      details: { name: c.name, onTimeout: c.onTimeout },
    };
  }
  const approved = c.status === 'approved';
  return {
    ...base,
    actorType: 'user',
    actorId: c.answeredBy ?? 'unknown',
    decision: approved ? 'allow' : 'deny',
    reasonCode: c.reasonCode ?? (approved ? CONFIRMATION_APPROVED : ERROR_CODES.confirmationDenied),
    createdAt: at,
    beforeStateRef: STATE(c, 'pending'),
    afterStateRef: STATE(c, c.status),
    details: { name: c.name, ...(c.comment ? { comment: c.comment } : {}), ...(via ? { via } : {}) },
  };
}

/** The event of a settled request: its answer or its timeout. */
export function settledEvent(c: Confirmation, via?: string): AuditEvent | undefined {
  if (c.status === 'pending') return undefined;
  return confirmationEvent(c.status === 'timed_out' ? 'timedOut' : 'answered', c, via);
}
