import { CONFIRMATION_ACTIONS, type ConfirmationStatus } from '../shared/confirmation.js';
import type { AuditEvent } from './audit-event.js';

/**
 * One confirmation in a timeline: the request, the wait (one entry, however many times the
 * parked job looked again), and the answer with who gave it (a person, or the timeout).
 */
export type TimelineConfirmation = {
  id: string;
  operationId?: string;
  /** Who asked: the operation. */
  requestedBy: string;
  /** The wait's span: from the request to the answer (open while pending). */
  since?: string;
  until?: string;
  waitedMs?: number;
  status: ConfirmationStatus;
  /** `user:alice`, or `system:confirmation-timeout`. */
  answeredBy?: string;
  reasonCode?: string;
};

/** The confirmations told by a task's or operation's events (ordered by time), in order of request. */
export function timelineConfirmations(ordered: readonly AuditEvent[]): TimelineConfirmation[] {
  const byId = new Map<string, TimelineConfirmation>();
  for (const e of ordered) {
    if (e.resourceType !== 'confirmation') continue;
    let c = byId.get(e.resourceId);
    if (!c) {
      c = { id: e.resourceId, requestedBy: `${e.actorType}:${e.actorId}`, status: 'pending' };
      if (e.operationId) c.operationId = e.operationId;
      byId.set(e.resourceId, c);
    }
    if (e.action === CONFIRMATION_ACTIONS.requested) {
      c.since = e.createdAt;
      c.requestedBy = `${e.actorType}:${e.actorId}`;
    } else if (e.action === CONFIRMATION_ACTIONS.answered || e.action === CONFIRMATION_ACTIONS.timedOut) {
      c.until = e.createdAt;
      c.status =
        e.action === CONFIRMATION_ACTIONS.timedOut ? 'timed_out' : e.decision === 'allow' ? 'approved' : 'denied';
      c.answeredBy = `${e.actorType}:${e.actorId}`;
      if (e.reasonCode) c.reasonCode = e.reasonCode;
    }
    if (c.since && c.until) c.waitedMs = Date.parse(c.until) - Date.parse(c.since);
  }
  return [...byId.values()];
}

/** One line: `confirmation cf-3 approved by user:alice after 242.0 s (asked 2026-… by agent:payments.charge)`. */
export function renderConfirmation(c: TimelineConfirmation): string {
  const waited = c.waitedMs === undefined ? '' : ` after ${(c.waitedMs / 1000).toFixed(1)} s`;
  const outcome =
    c.status === 'pending' ? 'pending' : `${c.status.replace('_', ' ')} by ${c.answeredBy ?? '?'}${waited}`;
  return `confirmation ${c.id} ${outcome} (asked ${c.since ?? '?'} by ${c.requestedBy})`;
}
