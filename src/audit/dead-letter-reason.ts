import type { z } from 'zod';
import { isSqlState } from '../errors/clean-name.js';
import { ERROR_CODES, type UndecodableCause } from '../errors/idempotency-error.js';
import { auditEventSchema, redactionReceiptSchema } from './audit-event.js';

export type { UndecodableCause } from '../errors/idempotency-error.js';

/**
 * Why the audit writer dead-lettered an event or a batch: a stable code and facts, never text
 * from Postgres or zod (their messages can quote the value they refused).
 *
 * - `AUDIT_EVENT_INVALID`: the event does not match `auditEventSchema`; zod's issue codes and
 *   paths (a path segment that is not a field of the schema is written `*`), or, from the
 *   emitter, `not_serialisable@$`: JSON cannot write it.
 * - `AUDIT_EVENT_REFUSED`: the event is valid, Postgres would not store it; its SQLSTATE.
 * - `AUDIT_BATCH_UNDECODABLE`: the audit job cannot be read as a batch of events.
 * - `AUDIT_EVENT_TOO_LARGE`: the event's JSON is over the emitter's bound; refused alone by the emitter, before it is sent.
 */
export type DeadLetterReason =
  | { code: typeof ERROR_CODES.auditEventInvalid; issues: { code: string; path: string }[]; more: number }
  | { code: typeof ERROR_CODES.auditEventRefused; sqlstate: string }
  | { code: typeof ERROR_CODES.auditBatchUndecodable; cause: UndecodableCause }
  | { code: typeof ERROR_CODES.auditEventTooLarge; bytes: number; limit: number };

/** At most this many issues are listed; `more` counts the rest. */
const MAX_ISSUES = 10;
const ISSUE_CODE = /^[a-z][a-z_]{0,39}$/;
/** Path segments that may be written as they are: the names the schemas themselves define. */
const FIELD_NAMES = new Set([...Object.keys(auditEventSchema.shape), ...Object.keys(redactionReceiptSchema.shape)]);

function pathOf(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '$';
  let out = '';
  for (const s of path) {
    const seg = typeof s === 'number' ? String(s) : typeof s === 'string' && FIELD_NAMES.has(s) ? s : '*';
    out = out ? `${out}.${seg}` : seg;
  }
  return out;
}

/** The reason for an event zod refused: its issues' codes and paths, nothing of their messages. */
export function invalidEventReason(error: z.ZodError): DeadLetterReason {
  const issues: { code: string; path: string }[] = [];
  let more = 0;
  for (const issue of error.issues) {
    const entry = { code: ISSUE_CODE.test(issue.code) ? issue.code : 'custom', path: pathOf(issue.path) };
    if (issues.some((i) => i.code === entry.code && i.path === entry.path)) continue;
    if (issues.length < MAX_ISSUES) issues.push(entry);
    else more++;
  }
  return { code: ERROR_CODES.auditEventInvalid, issues, more };
}

/** The reason for a valid event Postgres refused to store: the SQLSTATE of its error. */
export function refusedEventReason(err: unknown): DeadLetterReason {
  const code = (err as { code?: unknown }).code;
  return {
    code: ERROR_CODES.auditEventRefused,
    sqlstate: typeof code === 'string' && isSqlState(code) ? code : 'XXXXX',
  };
}

/**
 * The text stored in the dead-letter table: `CODE name=value…`, one line of codes, SQLSTATEs and
 * schema paths, e.g. `AUDIT_EVENT_INVALID issues=invalid_type@actorType,unrecognized_keys@$`,
 * `AUDIT_EVENT_REFUSED sqlstate=22P05`, `AUDIT_BATCH_UNDECODABLE cause=not_inflatable`,
 * `AUDIT_EVENT_TOO_LARGE bytes=73400320 limit=262144`.
 */
export function formatReason(r: DeadLetterReason): string {
  switch (r.code) {
    case ERROR_CODES.auditEventInvalid: {
      const issues = r.issues.map((i) => `${i.code}@${i.path}`).join(',');
      return `${r.code} issues=${issues || 'none'}${r.more > 0 ? ` more=${r.more}` : ''}`;
    }
    case ERROR_CODES.auditEventRefused:
      return `${r.code} sqlstate=${r.sqlstate}`;
    case ERROR_CODES.auditBatchUndecodable:
      return `${r.code} cause=${r.cause}`;
    case ERROR_CODES.auditEventTooLarge:
      return `${r.code} bytes=${r.bytes} limit=${r.limit}`;
  }
}
