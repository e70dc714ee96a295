import { boundedKey } from '../keys/idempotency-key.js';
import { TRANSITIONS, type TransitionSpec } from '../ledger/transitions.js';
import type { LedgerRecord } from '../ledger/types.js';
import type { WrapperEvent } from '../shared/wrapper-event.js';
import type { AuditEvent } from './audit-event.js';
import { auditEventFromWrapper } from './from-wrapper.js';

const STEP = '#step=';

/**
 * The audit events a ledger row's state implies, with the ids and database times the live events
 * had: the claim of the current epoch (at `claimed_at`) and the last transition (at
 * `updated_at`). Writing them is a no-op where the live events exist.
 */
export function eventsForRecord(r: LedgerRecord, actorId = 'backfill'): AuditEvent[] {
  const base = {
    operation: r.operation,
    key: r.key,
    ...(r.jobId ? { jobId: r.jobId } : {}),
    ...(r.queue ? { queue: r.queue } : {}),
    ...(r.taskId ? { taskId: r.taskId } : {}),
    ...(r.stepId ? { stepId: r.stepId, parentKey: parentKeyOf(r) } : {}),
    attemptsMade: 0,
    attemptsStarted: 0,
    stalledCounter: 0,
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
  return out.map((e) => auditEventFromWrapper(e, actorId));
}

/** The key of the operation a (step) row belongs to: a step's resource key is `<operation's>#step=<name>`. */
export function parentKeyOf(r: LedgerRecord): string {
  const i = r.resourceKey.lastIndexOf(STEP);
  return i < 0
    ? r.key
    : boundedKey({ namespace: r.namespace, resourceKey: r.resourceKey.slice(0, i), version: r.version });
}
