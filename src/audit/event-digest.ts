import { createHash, hash } from 'node:crypto';
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

/** How each field of {@link DIGEST_FIELDS} enters C: 0 text or number, 1 jsonb, 2 `seq` (absent is 0). */
const FIELD_KINDS: readonly number[] = DIGEST_FIELDS.map((f) =>
  COLUMNS.some(([, g, t]) => g === f && t === 'jsonb') ? 1 : f === 'seq' ? 2 : 0,
);

/** The inner digest (SHA-256 of C) of an event, as the writer has it or as read back from its row. */
export function eventColumnsDigest(e: Readonly<Record<string, unknown>>): Buffer {
  return hash('sha256', columnsText(e, true) ?? (columnsText(e, false) as string), 'buffer');
}

/**
 * C, the canonical JSON text of an event's columns. `fast`: as one `JSON.stringify` of the values
 * with their objects' keys put in sorted order, which gives the same text as {@link canonicalJson}
 * does piece by piece unless an object has a key that JavaScript orders before the others whatever
 * the insertion (an array index: a key starting with a digit, here); then undefined, and the
 * piecewise text is the answer.
 */
function columnsText(e: Readonly<Record<string, unknown>>, fast: boolean): string | undefined {
  if (fast) {
    const values: unknown[] = new Array(DIGEST_FIELDS.length);
    for (let i = 0; i < DIGEST_FIELDS.length; i++) {
      const v = e[DIGEST_FIELDS[i] as string];
      const kind = FIELD_KINDS[i];
      if (typeof v === 'string' && kind !== 1) values[i] = v.isWellFormed() ? v : v.toWellFormed();
      else if ((v === undefined || v === null) && kind === 2) values[i] = 0;
      else {
        const c = sortedKeys(v);
        if (c === INDEX_KEY) return undefined;
        values[i] = c;
      }
    }
    return JSON.stringify(values);
  }
  let text = '[';
  for (let i = 0; i < DIGEST_FIELDS.length; i++) {
    const v = e[DIGEST_FIELDS[i] as string];
    const kind = FIELD_KINDS[i];
    if (i > 0) text += ',';
    if (typeof v === 'string' && kind !== 1) text += JSON.stringify(v.isWellFormed() ? v : v.toWellFormed());
    else if ((v === undefined || v === null) && kind === 2) text += '0';
    else text += canonicalJson(v) ?? 'null';
  }
  return `${text}]`;
}

/** Returned by {@link sortedKeys} for an object with a key JavaScript would not keep in sorted order. */
const INDEX_KEY: unique symbol = Symbol('index key');

/**
 * The value `JSON.stringify` serialises as {@link canonicalJson} does: `toJSON` applied (once, as
 * `JSON.stringify` applies it), objects rebuilt with their keys in sorted order (what
 * `JSON.stringify` leaves out of an object left out, so that no function is called as a
 * `toJSON`); everything else left to `JSON.stringify`.
 */
function sortedKeys(value: unknown): unknown {
  let v = value;
  if (typeof v !== 'object' || v === null) return v;
  if (typeof (v as { toJSON?: unknown }).toJSON === 'function') {
    v = (v as { toJSON: () => unknown }).toJSON();
    if (typeof v !== 'object' || v === null) return v;
  }
  if (v instanceof Number || v instanceof String || v instanceof Boolean) return v.valueOf();
  if (Array.isArray(v)) {
    const a: unknown[] = new Array(v.length);
    for (let i = 0; i < v.length; i++) {
      const c = sortedKeys(v[i]);
      if (c === INDEX_KEY) return INDEX_KEY;
      a[i] = c;
    }
    return a;
  }
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o).sort();
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const c0 = k.charCodeAt(0);
    if (c0 >= 48 && c0 <= 57) return INDEX_KEY;
    const x = o[k];
    if (x === undefined || typeof x === 'function' || typeof x === 'symbol') continue;
    const c = sortedKeys(x);
    if (c === INDEX_KEY) return INDEX_KEY;
    out[k] = c;
  }
  return out;
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
      if (Array.isArray(v)) {
        let a = '[';
        for (let i = 0; i < v.length; i++) a += (i > 0 ? ',' : '') + (canonicalJson(v[i]) ?? 'null');
        return `${a}]`;
      }
      const o = v as Record<string, unknown>;
      let out = '{';
      for (const k of Object.keys(o).sort()) {
        const c = canonicalJson(o[k]);
        if (c !== undefined) out += `${out.length > 1 ? ',' : ''}${JSON.stringify(k)}:${c}`;
      }
      return `${out}}`;
    }
    default:
      return undefined;
  }
}
