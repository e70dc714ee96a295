import { type AuditEvent, auditEventSchema } from '../audit/audit-event.js';
import { parentKeyOf } from '../audit/derive.js';
import { auditEventFromWrapper } from '../audit/from-wrapper.js';
import type { LedgerRecord, LedgerStatus, WriteReceipt } from '../ledger/types.js';
import { cleanReason } from '../redaction/clean-reason.js';
import type { WrapperEvent } from '../shared/wrapper-event.js';
import { CliError, EXIT } from './errors.js';

// Operator text is cleaned like every kept free text (see redaction/clean-reason).
export { cleanReason, MAX_REASON_LENGTH } from '../redaction/clean-reason.js';

export type OperatorAction = {
  type: 'invalidated' | 'resolved';
  /** The record before the action (job, task and step are unchanged by it). */
  record: LedgerRecord;
  /** The ledger's receipt: the new epoch and the database time of the transition. */
  receipt: WriteReceipt;
  actorId: string;
  reason: string;
  reasonCode: string;
  /** The status the action leaves behind. */
  afterStatus: LedgerStatus;
  details?: Record<string, unknown>;
};

/**
 * The audit event of an operator action. Its id and time are those the backfill derives from the
 * ledger row (same wrapper event: key, epoch, type, job, step; time = the transition's database
 * time), so whichever is written first is the only one kept: the operator's, with who and why,
 * when the CLI writes it right after the transition.
 */
export function operatorEvent(a: OperatorAction): AuditEvent {
  const r = a.record;
  const wrapper: WrapperEvent = {
    type: a.type,
    operation: r.operation,
    key: r.key,
    epoch: a.receipt.epoch,
    at: a.receipt.at,
    decision: 'allow',
    reasonCode: a.reasonCode,
    attemptsMade: 0,
    attemptsStarted: 0,
    stalledCounter: 0,
    ...(r.jobId ? { jobId: r.jobId } : {}),
    ...(r.queue ? { queue: r.queue } : {}),
    ...(r.taskId ? { taskId: r.taskId } : {}),
    ...(r.stepId ? { stepId: r.stepId, parentKey: parentKeyOf(r) } : {}),
  };
  const event = auditEventFromWrapper(wrapper, a.actorId);
  return {
    ...event,
    actorType: 'user',
    actorId: a.actorId,
    beforeStateRef: `ledger:${r.status}@${r.epoch}`,
    afterStateRef: `ledger:${a.afterStatus}@${a.receipt.epoch}`,
    details: { reason: cleanReason(a.reason), via: 'cli', ...a.details },
  };
}

export { DECRYPT_ACTION, type DecryptAction, decryptEvent } from '../audit/decrypt-event.js';

/** Throws a usage error (exit 2) when the audit trail would refuse `event`. */
export function assertValidEvent(event: AuditEvent): void {
  const parsed = auditEventSchema.safeParse(event);
  if (!parsed.success) {
    throw new CliError(
      EXIT.usage,
      `the audit event of this action would be refused: ${parsed.error.issues
        .map((i) => `${i.path.join('.')}: ${i.message}`)
        .join('; ')}`,
    );
  }
}

/**
 * Checks, before the ledger is touched, that the event this action will write is valid (an
 * over-long actor id would otherwise change the ledger and then fail the audit write).
 */
export function assertAuditable(a: Omit<OperatorAction, 'receipt'>): void {
  assertValidEvent(operatorEvent({ ...a, receipt: { key: a.record.key, epoch: a.record.epoch + 1, at: new Date() } }));
}
