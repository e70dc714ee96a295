import type { z } from 'zod';
import { isSqlState } from '../errors/clean-name.js';
import { auditEventSchema, redactionReceiptSchema } from './audit-event.js';

/** Why a batch could not be read as events; a stable code per cause. */
export type UndecodableCause = 'not_a_batch' | 'not_inflatable' | 'not_json' | 'not_an_array';

/**
 * Why the audit writer dead-lettered an event or a batch: a stable code and facts, never text
 * from Postgres or zod (their messages can quote the value they refused).
 *
 * - `AUDIT_EVENT_INVALID`: the event does not match `auditEventSchema`; zod's issue codes and
 *   paths (a path segment that is not a field of the schema is written `*`).
 * - `AUDIT_EVENT_REFUSED`: the event is valid, Postgres would not store it; its SQLSTATE.
 * - `AUDIT_BATCH_UNDECODABLE`: the audit job cannot be read as a batch of events.
 * - `AUDIT_EVENT_TOO_LARGE`: the event's JSON is over the emitter's bound; refused alone by the emitter, before it is sent.
 */
export type DeadLetterReason =
  | { code: 'AUDIT_EVENT_INVALID'; issues: { code: string; path: string }[]; more: number }
  | { code: 'AUDIT_EVENT_REFUSED'; sqlstate: string }
  | { code: 'AUDIT_BATCH_UNDECODABLE'; cause: UndecodableCause }
  | { code: 'AUDIT_EVENT_TOO_LARGE'; bytes: number; limit: number };

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
  return { code: 'AUDIT_EVENT_INVALID', issues, more };
}

/** The reason for a valid event Postgres refused to store: the SQLSTATE of its error. */
export function refusedEventReason(err: unknown): DeadLetterReason {
  const code = (err as { code?: unknown }).code;
  return { code: 'AUDIT_EVENT_REFUSED', sqlstate: typeof code === 'string' && isSqlState(code) ? code : 'XXXXX' };
}

/**
 * The text stored in the dead-letter table: `CODE name=value…`, one line of codes, SQLSTATEs and
 * schema paths, e.g. `AUDIT_EVENT_INVALID issues=invalid_type@actorType,unrecognized_keys@$`,
 * `AUDIT_EVENT_REFUSED sqlstate=22P05`, `AUDIT_BATCH_UNDECODABLE cause=not_inflatable`,
 * `AUDIT_EVENT_TOO_LARGE bytes=73400320 limit=262144`.
 */
export function formatReason(r: DeadLetterReason): string {
  switch (r.code) {
    case 'AUDIT_EVENT_INVALID': {
      const issues = r.issues.map((i) => `${i.code}@${i.path}`).join(',');
      return `${r.code} issues=${issues || 'none'}${r.more > 0 ? ` more=${r.more}` : ''}`;
    }
    case 'AUDIT_EVENT_REFUSED':
      return `${r.code} sqlstate=${r.sqlstate}`;
    case 'AUDIT_BATCH_UNDECODABLE':
      return `${r.code} cause=${r.cause}`;
    case 'AUDIT_EVENT_TOO_LARGE':
      return `${r.code} bytes=${r.bytes} limit=${r.limit}`;
  }
}
