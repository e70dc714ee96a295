import { statusAfterEvent, TRANSITION_EVENTS, TRANSITION_NAMES, TRANSITIONS } from '../ledger/transitions.js';
import type { WrapperEvent, WrapperEventType } from '../shared/wrapper-event.js';
import { type AuditEvent, eventIdFor } from './audit-event.js';
import { confirmationEvent } from './confirmation-event.js';

/** The ledger status an event leaves behind (for the state refs): a transition's, or a replay's. */
function statusAfter(type: WrapperEventType): string | undefined {
  return type === 'replayed' || type === 'reconciled' ? 'completed' : statusAfterEvent(type);
}

/**
 * Event types that a ledger transition makes (see TRANSITIONS): one event per (key, epoch, type,
 * step), whether the wrapper or an operator emits it live or the backfill derives it.
 */
export const LEDGER_TRANSITIONS: ReadonlySet<string> = TRANSITION_EVENTS;

/** Intent events: the claims of the transition table, and tool decisions. */
const INTENT: ReadonlySet<string> = new Set([
  ...TRANSITION_NAMES.filter((t) => TRANSITIONS[t].phase === 'intent').map((t) => TRANSITIONS[t].event),
  'decision',
]);
/** Fields of a tool decision that become the event's own columns rather than details. */
const DECISION_FIELDS = new Set(['action', 'resourceType', 'resourceId', 'actorType', 'actorId']);

/** Sequence within an attempt, so events with the same database time sort in causal order. */
function seqOf(e: WrapperEvent): number {
  if (e.type === 'decision') return 1 + (e.seq ?? 0);
  return INTENT.has(e.type) || !e.epoch ? 0 : 100_000;
}

/**
 * Maps a wrapper event to an audit event (before redaction). Ids are deterministic: a ledger
 * transition's id depends only on key, epoch and transition; a refusal or replay's on the job
 * attempt; a decision's on the attempt and its sequence.
 */
export function auditEventFromWrapper(e: WrapperEvent, actorId: string): AuditEvent {
  // Built from the stored request alone: the answering command writes the same event, by the same id.
  if (e.type === 'confirmation' && e.confirmation)
    return confirmationEvent(e.confirmation.kind, e.confirmation.request);
  const subject = e.key ?? e.jobId ?? 'unknown';
  const eventId =
    LEDGER_TRANSITIONS.has(e.type) && e.key && e.epoch
      ? eventIdFor(e.key, e.epoch, e.type, e.stepId)
      : e.type === 'decision'
        ? eventIdFor(e.key, e.epoch, 'decision', e.seq)
        : // A job polling an operation in progress elsewhere is one event per holder's epoch, not per poll.
          eventIdFor(subject, e.type, e.jobId, e.type === 'in_progress' ? 0 : e.attemptsStarted, e.epoch, e.stepId);
  const after = statusAfter(e.type);
  const decision = e.details as
    | {
        action?: string;
        resourceType?: string;
        resourceId?: string;
        actorType?: AuditEvent['actorType'];
        actorId?: string;
      }
    | undefined;
  const event: AuditEvent = {
    eventId,
    actorType: e.type === 'decision' ? (decision?.actorType ?? 'agent') : 'system',
    actorId: e.type === 'decision' ? (decision?.actorId ?? e.operation) : actorId,
    action: e.type === 'decision' ? (decision?.action ?? 'tool.decision') : `idempotency.${e.type}`,
    resourceType: e.type === 'decision' ? (decision?.resourceType ?? 'operation') : 'idempotency_key',
    resourceId: e.type === 'decision' ? (decision?.resourceId ?? subject) : subject,
    decision: e.decision,
    createdAt: (e.at ?? new Date()).toISOString(),
    seq: seqOf(e),
    operation: e.operation,
    phase: INTENT.has(e.type) ? 'intent' : 'outcome',
    attemptsMade: e.attemptsMade,
    attemptsStarted: e.attemptsStarted,
    stalledCounter: e.stalledCounter,
  };
  if (e.taskId) event.taskId = e.taskId;
  if (e.stepId) event.stepId = e.stepId;
  if (e.parentKey ?? e.key) event.operationId = (e.parentKey ?? e.key) as string;
  if (e.reasonCode) event.reasonCode = e.reasonCode.slice(0, 100);
  if (e.epoch) event.epoch = e.epoch;
  if (e.jobId) event.jobId = e.jobId;
  if (e.queue) event.queue = e.queue;
  if (after && e.epoch) event.afterStateRef = `ledger:${after}@${e.epoch}`;
  if (e.type === 'decision' && e.details) {
    // The decision's own fields are the event's columns; the rest are its details.
    let rest: Record<string, unknown> | undefined;
    for (const k of Object.keys(e.details)) {
      if (DECISION_FIELDS.has(k)) continue;
      rest ??= {};
      rest[k] = e.details[k];
    }
    if (rest) event.details = rest;
  }
  return event;
}
