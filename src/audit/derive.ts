import { boundedKey } from '../keys/idempotency-key.js';
import type { LedgerRecord, Transition } from '../ledger/types.js';
import type { WrapperEvent, WrapperEventType } from '../worker/types.js';
import type { AuditEvent } from './audit-event.js';
import { auditEventFromWrapper } from './from-wrapper.js';

/** The event a ledger row's last transition implies (the live wrapper emits the same). */
const LAST: Partial<Record<Transition, [WrapperEventType, WrapperEvent['decision']]>> = {
  completed: ['completed', 'allow'],
  failed: ['failed', 'deny'],
  failed_retryable: ['released', 'allow'],
  released: ['released', 'allow'],
  marked_unknown: ['unknown', 'pending_confirmation'],
  takeover_unknown: ['unknown', 'pending_confirmation'],
  invalidated: ['invalidated', 'allow'],
  resolved_committed: ['resolved', 'allow'],
  resolved_not_committed: ['resolved', 'allow'],
};

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
  const claimEpoch =
    r.lastTransition === 'invalidated' || r.lastTransition.startsWith('resolved') ? r.epoch - 1 : r.epoch;
  if (r.claimTransition !== 'takeover_unknown') {
    out.push({
      ...base,
      type: r.claimTransition === 'takeover' ? 'takeover' : 'claimed',
      decision: 'allow',
      epoch: claimEpoch,
      at: r.claimedAt,
    });
  }
  const last = LAST[r.lastTransition];
  if (last) {
    out.push({
      ...base,
      type: last[0],
      decision: last[1],
      epoch: r.epoch,
      at: r.updatedAt,
      ...(r.error?.code ? { reasonCode: r.error.code } : {}),
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
