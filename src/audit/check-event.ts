import { regexes } from 'zod';
import { type AuditEvent, auditEventSchema } from './audit-event.js';

/**
 * A hand-written check equivalent to `auditEventSchema`, for the hot paths (the emitter checks
 * every event it buffers, the writer every event it stores). zod builds a copy of each event and
 * its issue list; this reads the fields once. It only ever says yes to what the schema accepts (a
 * property test holds the two together); anything it refuses goes through zod, so refusals carry
 * zod's issues and zod has the last word. Lengths are counted in UTF-16 units, never fewer than
 * zod's code points: a string of astral characters near a limit is left to zod.
 */
const DATETIME = regexes.datetime({ offset: true });

type Field = (v: unknown) => boolean;
const str =
  (max: number): Field =>
  (v) =>
    typeof v === 'string' && v.length >= 1 && v.length <= max;
const oneOf =
  (...values: string[]): Field =>
  (v) =>
    typeof v === 'string' && values.includes(v);
const int =
  (min: number): Field =>
  (v) =>
    typeof v === 'number' && Number.isSafeInteger(v) && v >= min;
/** A plain object zod keeps as it is: no symbol keys, no own `__proto__` (zod drops those). */
const plainRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' &&
  v !== null &&
  (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null) &&
  !Object.hasOwn(v, '__proto__') &&
  Object.getOwnPropertySymbols(v).length === 0;
const strings = (v: unknown) => {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') return false; // holes too
  return true;
};

const receipt: Field = (v) => {
  if (!plainRecord(v)) return false;
  if (typeof v.policyVersion !== 'string' || !strings(v.rules) || !strings(v.paths) || !plainRecord(v.counts)) {
    return false;
  }
  for (const n of Object.values(v.counts)) if (typeof n !== 'number' || !Number.isFinite(n)) return false;
  return true;
};

const REQUIRED: Record<string, Field> = {
  eventId: str(64),
  actorType: oneOf('system', 'user', 'agent'),
  actorId: str(200),
  action: str(100),
  resourceType: str(100),
  resourceId: str(255),
  decision: oneOf('allow', 'deny', 'pending_confirmation'),
  createdAt: (v) => typeof v === 'string' && DATETIME.test(v),
  phase: oneOf('intent', 'outcome'),
};
const OPTIONAL: Record<string, Field> = {
  taskId: str(200),
  stepId: str(200),
  operationId: str(255),
  reasonCode: str(100),
  beforeStateRef: str(255),
  afterStateRef: str(255),
  seq: int(0),
  operation: str(200),
  epoch: int(1),
  jobId: str(255),
  queue: str(200),
  attemptsMade: int(0),
  attemptsStarted: int(0),
  stalledCounter: int(0),
  details: plainRecord,
  redaction: receipt,
};
const REQUIRED_COUNT = Object.keys(REQUIRED).length;

/**
 * Every field's check, required ones marked: a table without a prototype, so `toString` or
 * `constructor` is an unknown field, not Object's method.
 */
const FIELDS: Record<string, { check: Field; required: boolean } | undefined> = Object.assign(
  Object.create(null),
  Object.fromEntries([
    ...Object.entries(REQUIRED).map(([k, check]) => [k, { check, required: true }]),
    ...Object.entries(OPTIONAL).map(([k, check]) => [k, { check, required: false }]),
  ]),
);

/** True when `auditEventSchema` accepts `v` as it is (the fast path; false means "ask zod"). */
export function isAuditEvent(v: unknown): v is AuditEvent {
  if (!plainRecord(v)) return false;
  // One pass over the event's own keys (a plain record's only enumerable ones).
  let required = 0;
  for (const k in v) {
    const field = FIELDS[k];
    if (field === undefined) return false; // strict: unknown fields are refused
    const x = v[k];
    if (x === undefined) {
      if (field.required) return false;
      continue;
    }
    if (!field.check(x)) return false;
    if (field.required) required++;
  }
  return required === REQUIRED_COUNT;
}

/** `auditEventSchema.parse`, with the fast check in front. */
export function parseAuditEvent(v: unknown): AuditEvent {
  return isAuditEvent(v) ? v : auditEventSchema.parse(v);
}
