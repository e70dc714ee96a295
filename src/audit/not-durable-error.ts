import { ERROR_CODES, IdempotencyError, type IdempotencyErrorDetails } from '../errors/idempotency-error.js';

/**
 * Why a decision recorded with `await ctx.audit()` (or `AuditEmitter.recordDurable`) did not
 * become durable in the trail:
 * - `AUDIT_EVENT_TOO_LARGE`: its JSON is over the emitter's `maxEventBytes`; it was refused alone
 *   and its shape (fields, sizes; no details) dead-lettered;
 * - `AUDIT_EVENT_INVALID`: it does not match the schema even after normalisation; dead-lettered;
 * - `AUDIT_EVENT_LOST`: neither Redis nor the Postgres outbox took its batch (logged, counted).
 */
export type AuditNotDurableCode =
  | typeof ERROR_CODES.auditEventTooLarge
  | typeof ERROR_CODES.auditEventInvalid
  | typeof ERROR_CODES.auditEventLost;

/**
 * The decision is not in the audit trail; `code` says why, `details` carry sizes, never values
 * (`eventId`, `bytes` and `limit` for `AUDIT_EVENT_TOO_LARGE`, nothing for the others).
 */
export class AuditEventNotDurableError extends IdempotencyError<AuditNotDurableCode> {
  constructor(
    code: typeof ERROR_CODES.auditEventTooLarge,
    details: IdempotencyErrorDetails[typeof ERROR_CODES.auditEventTooLarge],
  );
  constructor(code: typeof ERROR_CODES.auditEventInvalid | typeof ERROR_CODES.auditEventLost);
  constructor(code: AuditNotDurableCode, details: IdempotencyErrorDetails[AuditNotDurableCode] = {}) {
    super(code, messageOf(code, details), details);
  }
}

function messageOf(code: AuditNotDurableCode, details: IdempotencyErrorDetails[AuditNotDurableCode]): string {
  switch (code) {
    case ERROR_CODES.auditEventTooLarge: {
      const d = details as IdempotencyErrorDetails[typeof code];
      return `audit event of ${d.bytes} bytes refused: the limit is ${d.limit} bytes`;
    }
    case ERROR_CODES.auditEventInvalid:
      return 'audit event refused: it does not match the audit event schema';
    case ERROR_CODES.auditEventLost:
      return 'audit event lost: neither the audit queue nor the outbox accepted its batch';
  }
}
