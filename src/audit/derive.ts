import { boundedKey } from '../keys/idempotency-key.js';
import type { RecordedTransition } from '../ledger/recorded-transition.js';
import { TRANSITIONS, type TransitionSpec } from '../ledger/transitions.js';
import type { LedgerRecord, Transition } from '../ledger/types.js';
import type { WrapperEvent } from '../shared/wrapper-event.js';
import type { AuditEvent } from './audit-event.js';
import { auditEventFromWrapper } from './from-wrapper.js';

const STEP = '#step=';

/** The job, queue and task of the attempt that claimed the epoch a transition belongs to. */
export type ClaimingAttempt = Pick<RecordedTransition, 'jobId' | 'queue' | 'taskId'>;

/** Who wrote a transition's event: the backfill (derived from the ledger), or an operator's tool. */
export type EventSource = 'backfill' | 'library' | 'cli' | 'console';

/** Marks an event derived from the ledger rather than emitted when its transition happened. */
export const DERIVED_VIA: EventSource = 'backfill';

/**
 * The audit events of a ledger row: one per recorded transition, every epoch included, with the
 * ids and database times the live events have (the wrapper's, or an operator's), so writing them
 * is a no-op where the live events are stored. A row from before transitions were recorded
 * (`transitions` null) gives the events its current state implies: its current epoch's claim
 * and its last transition.
 */
export function eventsForRecord(r: LedgerRecord, actorId = 'backfill'): AuditEvent[] {
  if (r.transitions === null) return currentStateEvents(r, actorId);
  const out: AuditEvent[] = [];
  // The job, queue and task of the attempt in effect: a transition other than a claim keeps them.
  let attempt: ClaimingAttempt = {};
  for (const t of r.transitions) {
    if (TRANSITIONS[t.transition].by === 'claim') attempt = t;
    out.push(transitionEvent(r, t, attempt, actorId, DERIVED_VIA));
  }
  return out;
}

/**
 * The event of the recorded transition `transition` at `epoch` of row `r`, as `via` writes it
 * (the event {@link eventsForRecord} derives, but for `via`); undefined when the row does not
 * record it.
 */
export function recordedTransitionEvent(
  r: LedgerRecord,
  epoch: number,
  transition: Transition,
  actorId: string,
  via: EventSource,
): AuditEvent | undefined {
  let attempt: ClaimingAttempt = {};
  for (const t of r.transitions ?? []) {
    if (TRANSITIONS[t.transition].by === 'claim') attempt = t;
    if (t.epoch === epoch && t.transition === transition) return transitionEvent(r, t, attempt, actorId, via);
  }
  return undefined;
}

/**
 * The events of {@link eventsForRecord} the audit trail can still keep: those at or after
 * `horizon`, the audit retention's (see `auditHorizon`); all of them without one. What the
 * sweeper and the backfill send, never an event the retention has dropped.
 */
export function keptEventsForRecord(r: LedgerRecord, horizon: Date | undefined): AuditEvent[] {
  const all = eventsForRecord(r);
  if (horizon === undefined) return all;
  const from = horizon.getTime();
  return all.filter((e) => Date.parse(e.createdAt) >= from);
}

/**
 * The ids of {@link keptEventsForRecord}: what must be stored before the row (and its record of
 * transitions) may go. An event past the audit retention is not waited for: the row would
 * otherwise outlive it for ever, its events sent again and dropped again.
 */
export function transitionEventIds(r: LedgerRecord, horizon?: Date): string[] {
  return keptEventsForRecord(r, horizon).map((e) => e.eventId);
}

/**
 * The audit event of one recorded transition of row `r`. An operator's transition (invalidate,
 * resolve) is a `user` event with who and why; `via` says which tool wrote it (the same event,
 * whichever is stored first).
 */
export function transitionEvent(
  r: LedgerRecord,
  t: RecordedTransition,
  attempt: ClaimingAttempt,
  actorId: string,
  via: EventSource,
): AuditEvent {
  const spec: TransitionSpec = TRANSITIONS[t.transition];
  const jobId = t.jobId ?? attempt.jobId;
  const queue = t.queue ?? attempt.queue;
  const taskId = t.taskId ?? attempt.taskId ?? r.taskId ?? undefined;
  const reasonCode = t.errorCode ?? spec.reasonCode;
  const wrapper: WrapperEvent = {
    ...baseOf(r),
    type: spec.event,
    decision: spec.decision,
    epoch: t.epoch,
    at: t.at,
    ...(jobId ? { jobId } : {}),
    ...(queue ? { queue } : {}),
    ...(taskId ? { taskId } : {}),
    ...(reasonCode ? { reasonCode } : {}),
  };
  if (spec.by !== 'operator') {
    const event = auditEventFromWrapper(wrapper, actorId);
    return via === 'backfill' ? { ...event, details: { via } } : event;
  }
  const event = auditEventFromWrapper(wrapper, t.actorId ?? 'unknown');
  const before = t.previousStatus ?? spec.from[0];
  const details: Record<string, unknown> = { ...(t.reason !== undefined ? { reason: t.reason } : {}), via };
  if (t.previousStatus) details.previousStatus = t.previousStatus;
  if (spec.event === 'resolved') details.outcome = spec.to === 'completed' ? 'committed' : 'not_committed';
  return {
    ...event,
    actorType: 'user',
    actorId: t.actorId ?? 'unknown',
    // An operator's transition moves the epoch on: the state before it is the previous epoch's.
    beforeStateRef: `ledger:${before}@${t.epoch - 1}`,
    afterStateRef: `ledger:${spec.to}@${t.epoch}`,
    details,
  };
}

/** What every event of a row shares: operation, key, step. */
function baseOf(r: LedgerRecord) {
  return {
    operation: r.operation,
    key: r.key,
    ...(r.stepId ? { stepId: r.stepId, parentKey: parentKeyOf(r) } : {}),
    attemptsMade: 0,
    attemptsStarted: 0,
    stalledCounter: 0,
  };
}

/** The events a row from before recorded transitions implies: its current epoch's claim and its last transition. */
function currentStateEvents(r: LedgerRecord, actorId: string): AuditEvent[] {
  const base = {
    ...baseOf(r),
    ...(r.jobId ? { jobId: r.jobId } : {}),
    ...(r.queue ? { queue: r.queue } : {}),
    ...(r.taskId ? { taskId: r.taskId } : {}),
  };
  const out: WrapperEvent[] = [];
  const last: TransitionSpec = TRANSITIONS[r.lastTransition];
  const claim: TransitionSpec = TRANSITIONS[r.claimTransition];
  // An operator's transition moves the epoch on from the claim's.
  const claimEpoch = last.by === 'operator' ? r.epoch - 1 : r.epoch;
  if (claim.startsAttempt) {
    out.push({ ...base, type: claim.event, decision: claim.decision, epoch: claimEpoch, at: r.claimedAt });
  }
  if (!last.startsAttempt) {
    const reasonCode = r.error?.code ?? last.reasonCode;
    out.push({
      ...base,
      type: last.event,
      decision: last.decision,
      epoch: r.epoch,
      at: r.updatedAt,
      ...(reasonCode ? { reasonCode } : {}),
    });
  }
  return out.map((e) => ({ ...auditEventFromWrapper(e, actorId), details: { via: DERIVED_VIA } }));
}

/** The key of the operation a (step) row belongs to: a step's resource key is `<operation's>#step=<name>`. */
export function parentKeyOf(r: LedgerRecord): string {
  const i = r.resourceKey.lastIndexOf(STEP);
  return i < 0
    ? r.key
    : boundedKey({ namespace: r.namespace, resourceKey: r.resourceKey.slice(0, i), version: r.version });
}
