import { randomUUID } from 'node:crypto';
import type { LedgerRecord } from '../ledger/types.js';
import { cleanReason } from '../redaction/clean-reason.js';
import { type AuditEvent, eventIdFor } from './audit-event.js';
import { parentKeyOf } from './derive.js';

/** The action of the event an opening of sealed values writes. */
export const DECRYPT_ACTION = 'operator.decrypt';

/** What an operator opened and why: the event written before any plaintext is shown. */
export type DecryptAction = {
  record: LedgerRecord;
  actorId: string;
  reason: string;
  /** The sealed parts opened, in the order shown. */
  opened: readonly ('result' | 'error')[];
  /** The keyring ids that opened them. */
  keyIds: readonly string[];
  /** Which tool opened them, in the event's `details.via`. @defaultValue `'cli'` */
  via?: 'cli' | 'console';
};

/**
 * The audit event of an `inspect --decrypt` (or the console's opening): who (`actorId`), what (the key as resource, the
 * parts opened and the key ids in `details`), why (`details.reason`, scanned and bounded as
 * every operator reason). Each opening is its own event: the id takes a random part, so two
 * openings of the same record are two rows. It is not a ledger transition: the state refs are
 * the record's state, before and after alike.
 */
export function decryptEvent(a: DecryptAction, at: Date = new Date()): AuditEvent {
  const r = a.record;
  const state = `ledger:${r.status}@${r.epoch}`;
  const event: AuditEvent = {
    eventId: eventIdFor(DECRYPT_ACTION, r.key, r.epoch, randomUUID()),
    actorType: 'user',
    actorId: a.actorId,
    action: DECRYPT_ACTION,
    resourceType: 'idempotency_key',
    resourceId: r.key,
    decision: 'allow',
    reasonCode: 'OPERATOR_DECRYPTED',
    beforeStateRef: state,
    afterStateRef: state,
    createdAt: at.toISOString(),
    operation: r.operation,
    operationId: parentKeyOf(r),
    phase: 'outcome',
    epoch: r.epoch,
    details: { reason: cleanReason(a.reason), via: a.via ?? 'cli', opened: [...a.opened], keyIds: [...a.keyIds] },
  };
  if (r.taskId) event.taskId = r.taskId;
  if (r.stepId) event.stepId = r.stepId;
  if (r.jobId) event.jobId = r.jobId;
  if (r.queue) event.queue = r.queue;
  return event;
}
