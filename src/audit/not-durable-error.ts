/**
 * Why a decision recorded with `await ctx.audit()` (or `AuditEmitter.recordDurable`) did not
 * become durable in the trail:
 * - `AUDIT_EVENT_TOO_LARGE`: its JSON is over the emitter's `maxEventBytes`; it was refused alone
 *   and its shape (fields, sizes; no details) dead-lettered;
 * - `AUDIT_EVENT_INVALID`: it does not match the schema even after normalisation; dead-lettered;
 * - `AUDIT_EVENT_LOST`: neither Redis nor the Postgres outbox took its batch (logged, counted).
 */
export type AuditNotDurableCode = 'AUDIT_EVENT_TOO_LARGE' | 'AUDIT_EVENT_INVALID' | 'AUDIT_EVENT_LOST';

/** The decision is not in the audit trail; `code` says why, `details` carry sizes, never values. */
export class AuditEventNotDurableError extends Error {
  readonly code: AuditNotDurableCode;
  readonly details: { eventId?: string; bytes?: number; limit?: number };

  constructor(code: AuditNotDurableCode, details: AuditEventNotDurableError['details'] = {}) {
    super(MESSAGES[code](details));
    this.name = 'AuditEventNotDurableError';
    this.code = code;
    this.details = details;
  }
}

const MESSAGES: Record<AuditNotDurableCode, (d: AuditEventNotDurableError['details']) => string> = {
  AUDIT_EVENT_TOO_LARGE: (d) => `audit event of ${d.bytes} bytes refused: the limit is ${d.limit} bytes`,
  AUDIT_EVENT_INVALID: () => 'audit event refused: it does not match the audit event schema',
  AUDIT_EVENT_LOST: () => 'audit event lost: neither the audit queue nor the outbox accepted its batch',
};
