import type { ReceiptBuilder } from '../redaction/receipt.js';
import type { AuditEvent } from './audit-event.js';

/** Rule id in the receipt of a counter that was not a whole number in range and was made one. */
export const BOUND_INT_RULE = 'bound.int';
/** Rule id in the receipt of a clear-text field that held a number or boolean and was made text. */
export const BOUND_TEXT_RULE = 'bound.text';

/** The integer fields of an event and their least value (see `auditEventSchema`). */
const INTEGERS: readonly [keyof AuditEvent, number][] = [
  ['seq', 0],
  ['epoch', 1],
  ['attemptsMade', 0],
  ['attemptsStarted', 0],
  ['stalledCounter', 0],
];

/** Clear-text fields a number or boolean may be told in (a numeric BullMQ job id, say). */
const TEXTS: readonly (keyof AuditEvent)[] = [
  'taskId',
  'stepId',
  'operationId',
  'actorId',
  'action',
  'resourceType',
  'resourceId',
  'reasonCode',
  'operation',
  'jobId',
  'queue',
];

type EventFields = Partial<Record<keyof AuditEvent, unknown>>;

/**
 * Brings an event's typed fields within the schema instead of letting the schema refuse the
 * event: a counter that is not a whole number (`attemptsMade: 1.5`) is truncated, one below its
 * least value or past `Number.MAX_SAFE_INTEGER` clamped, one that is no finite number at all
 * removed; a clear-text field holding a number or boolean becomes its text (the field grammars
 * then check it like any text, and reference it when it is too long). Each change is a hit of
 * {@link BOUND_INT_RULE} or {@link BOUND_TEXT_RULE} at the field's path, never its value.
 *
 * @returns `event` itself when nothing needed a change (the common case: nothing is allocated),
 * else a copy.
 */
export function boundFields<E extends EventFields>(event: E, receiptOf: () => ReceiptBuilder): E {
  let out: E | undefined;
  for (const [field, min] of INTEGERS) {
    const v = event[field];
    if (v === undefined || (typeof v === 'number' && Number.isSafeInteger(v) && v >= min)) continue;
    out ??= { ...event };
    const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN;
    if (Number.isNaN(n)) delete out[field];
    else out[field] = Math.min(Number.MAX_SAFE_INTEGER, Math.max(min, Math.trunc(n))) as E[keyof AuditEvent];
    receiptOf().hit(BOUND_INT_RULE, [field]);
  }
  for (const field of TEXTS) {
    const v = event[field];
    if (typeof v !== 'number' && typeof v !== 'boolean' && typeof v !== 'bigint') continue;
    out ??= { ...event };
    out[field] = String(v) as E[keyof AuditEvent];
    receiptOf().hit(BOUND_TEXT_RULE, [field]);
  }
  return out ?? event;
}
