import { createHash } from 'node:crypto';
import type { AuditEvent } from './audit-event.js';
import { COLUMNS } from './insert-statement.js';

/*
 * Digest version 3 of an event's columns (see chain-sql.ts): the store computes most of it, the
 * verifier recomputes it the same way from the columns as stored.
 *
 *   d = SHA-256( SHA-256(utf8(C)) ‖ utf8(M) )
 *
 * - C, the canonical JSON text of every column but `created_at` and the chain's own, in the order
 *   of {@link DIGEST_FIELDS}: an array whose absent values are `null` (`seq` 0, as stored), whose
 *   text values are well-formed (a lone surrogate is U+FFFD, as the database stores it), and whose
 *   jsonb values (`details`, `redaction`) are canonical JSON: object keys sorted (UTF-16 code
 *   units), no spaces, what `JSON.stringify` leaves out left out. jsonb keeps the value, not its
 *   text, so a JSON value is hashed as a value: the same before and after Postgres stored it.
 * - M, the stored `created_at` as whole microseconds since the epoch, in decimal (`microsTextSql`
 *   in chain-sql.ts): the statement
 *   that stores the event computes this last step, from the time as Postgres parsed it, so no
 *   client has to parse a time the way the database does.
 *
 * The inner digest is computed by the writer (one hash per event in Node instead of rendering
 * the row's text in Postgres), and passed beside the batch.
 */

/** The event fields hashed into C, in order: the audit_events columns but created_at (insert-statement.ts). */
export const DIGEST_FIELDS: readonly (keyof AuditEvent)[] = COLUMNS.filter(([c]) => c !== 'created_at').map(
  ([, f]) => f,
);

/** The jsonb columns' fields (`details`, `redaction`): hashed as canonical JSON. */
const JSON_FIELDS = new Set<string>(COLUMNS.filter(([, , t]) => t === 'jsonb').map(([, f]) => f));

/** The inner digest (SHA-256 of C) of an event, as the writer has it or as read back from its row. */
export function eventColumnsDigest(e: Readonly<Record<string, unknown>>): Buffer {
  let text = '[';
  for (let i = 0; i < DIGEST_FIELDS.length; i++) {
    const f = DIGEST_FIELDS[i] as string;
    const v = e[f];
    if (i > 0) text += ',';
    if (JSON_FIELDS.has(f)) text += canonicalJson(v) ?? 'null';
    else if (v === undefined || v === null) text += f === 'seq' ? '0' : 'null';
    else if (typeof v === 'string') text += JSON.stringify(wellFormed(v));
    else text += canonicalJson(v) ?? 'null';
  }
  return createHash('sha256').update(`${text}]`, 'utf8').digest();
}

/** The version-3 digest from the inner digest and M, as the storing statement computes it. */
export function eventDigestV3(inner: Buffer, micros: string): Buffer {
  return createHash('sha256').update(inner).update(micros, 'utf8').digest();
}

/**
 * Canonical JSON of a value, with `JSON.stringify`'s semantics (toJSON, undefined and functions
 * left out of objects and null in arrays, non-finite numbers null) and object keys sorted.
 * Undefined when `JSON.stringify` gives undefined.
 */
export function canonicalJson(value: unknown): string | undefined {
  let v = value;
  if (typeof v === 'object' && v !== null && typeof (v as { toJSON?: unknown }).toJSON === 'function') {
    v = (v as { toJSON: () => unknown }).toJSON();
  }
  if (v instanceof Number || v instanceof String || v instanceof Boolean) v = v.valueOf();
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'number':
      return Number.isFinite(v) ? JSON.stringify(v) : 'null';
    case 'boolean':
      return v ? 'true' : 'false';
    case 'bigint':
      return JSON.stringify(v); // throws, as JSON.stringify does: the batch could not be sent either
    case 'object': {
      if (v === null) return 'null';
      if (Array.isArray(v)) return `[${v.map((x) => canonicalJson(x) ?? 'null').join(',')}]`;
      const o = v as Record<string, unknown>;
      const parts: string[] = [];
      for (const k of Object.keys(o).sort()) {
        const c = canonicalJson(o[k]);
        if (c !== undefined) parts.push(`${JSON.stringify(k)}:${c}`);
      }
      return `{${parts.join(',')}}`;
    }
    default:
      return undefined;
  }
}

const LONE_SURROGATE = /[\uD800-\uDFFF]/;

/** The text as the database stores it: a lone surrogate becomes U+FFFD (as UTF-8 encoding makes it). */
function wellFormed(s: string): string {
  return LONE_SURROGATE.test(s) ? Buffer.from(s, 'utf8').toString('utf8') : s;
}
