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
  return hash('sha256', columnsText(e, true, false) ?? (columnsText(e, false, false) as string), 'buffer');
}

/**
 * C, the canonical JSON text of an event's columns. `fast`: as one `JSON.stringify` of the values
 * with their objects' keys put in sorted order, which gives the same text as {@link canonicalJson}
 * does piece by piece unless an object has a key that JavaScript orders before the others whatever
 * the insertion (an array index: a key starting with a digit, here) or, under version 4, a
 * `__proto__` key (which a rebuilt object would not keep); then undefined, and the piecewise text
 * is the answer.
 */
function columnsText(e: Readonly<Record<string, unknown>>, fast: boolean, v4: boolean): string | undefined {
  if (fast) {
    const values: unknown[] = new Array(DIGEST_FIELDS.length);
    for (let i = 0; i < DIGEST_FIELDS.length; i++) {
      const v = e[DIGEST_FIELDS[i] as string];
      const kind = FIELD_KINDS[i];
      if (typeof v === 'string' && kind !== 1) values[i] = v.isWellFormed() ? v : v.toWellFormed();
      else if ((v === undefined || v === null) && kind === 2) values[i] = 0;
      else {
        const c = sortedKeys(v, v4);
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
function sortedKeys(value: unknown, v4: boolean): unknown {
  let v = value;
  if (typeof v !== 'object' || v === null) return v;
  if (typeof (v as { toJSON?: unknown }).toJSON === 'function') {
    v = (v as { toJSON: () => unknown }).toJSON();
    if (typeof v !== 'object' || v === null) return v;
  }
  if (v instanceof Number || v instanceof String || v instanceof Boolean) return v.valueOf();
  if (Array.isArray(v)) {
    // The array itself when nothing in it changes (the common case: values read from JSON).
    let a: unknown[] | undefined;
    for (let i = 0; i < v.length; i++) {
      const x = v[i];
      const c = sortedKeys(x, v4);
      if (c === INDEX_KEY) return INDEX_KEY;
      if (c !== x && a === undefined) a = v.slice(0, i);
      if (a !== undefined) a[i] = c;
    }
    return a ?? v;
  }
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  // The object itself when its keys are in order already and nothing in it changes (an object
  // read from JSON written in this order, the emitters' own); otherwise rebuilt in order.
  let same = true;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i] as string;
    const c0 = k.charCodeAt(0);
    if (c0 >= 48 && c0 <= 57) return INDEX_KEY;
    if (k === '__proto__') {
      // Version 4 hashes such a key as a key (piecewise); version 3 rebuilt every object, which
      // such a key does not survive, and still does, so that its digests stay what they were.
      if (v4) return INDEX_KEY;
      same = false;
    }
    if (same && i > 0 && (keys[i - 1] as string) > k) same = false;
    const x = o[k];
    if (same && (x === undefined || typeof x === 'function' || typeof x === 'symbol')) same = false;
    if (same && typeof x === 'object' && x !== null && sortedKeys(x, v4) !== x) same = false;
  }
  if (same) return o;
  keys.sort();
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const x = o[k];
    if (x === undefined || typeof x === 'function' || typeof x === 'symbol') continue;
    const c = sortedKeys(x, v4);
    if (c === INDEX_KEY) return INDEX_KEY;
    out[k] = c;
  }
  return out;
}

/**
 * Digest version 4 of an event (see chain-sql.ts): `SHA-256( utf8(M) ‖ "\n" ‖ utf8(C) )`, M the
 * event's time as whole microseconds since the epoch in decimal ({@link eventMicros}), C as in
 * version 3. The writer computes it whole: the storing statement stores the time from M (it does
 * not parse the event's text), so the time hashed is the time stored. `verify` recomputes it from
 * the row, M from the stored `created_at`.
 */
export function eventDigestV4(e: Readonly<Record<string, unknown>>, micros: string): Buffer {
  const c = columnsText(e, true, true) ?? (columnsText(e, false, true) as string);
  return hash('sha256', `${micros}\n${c}`, 'buffer');
}

/** `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, the event's time as the schema accepts it (check-event.ts). */
const EVENT_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:Z|([+-])(\d{2}):(\d{2}))$/;

/**
 * An event's time (`createdAt`, RFC 3339 as the event schema accepts it) as whole microseconds
 * since 1970-01-01T00:00:00Z, in decimal: the time the store stores, exactly. A fraction finer
 * than a microsecond is rounded to the nearest (a half up); years before 1970 are negative; a
 * date is read in the proleptic Gregorian calendar, year 0000 being 1 BC. Undefined for a text
 * that is not such a time.
 */
export function eventMicros(createdAt: string): string | undefined {
  // `Date.prototype.toISOString`'s form, what the emitters write (`YYYY-MM-DDTHH:MM:SS.sssZ`):
  // whole milliseconds, which Date.parse reads exactly.
  if (isIsoMillis(createdAt)) {
    const ms = Date.parse(createdAt);
    if (Number.isFinite(ms)) return String(ms * 1000);
  }
  const m = EVENT_TIME.exec(createdAt);
  if (!m) return undefined;
  const days = daysFromCivil(Number(m[1]), Number(m[2]), Number(m[3]));
  let seconds = days * 86400 + Number(m[4]) * 3600 + Number(m[5]) * 60 + Number(m[6]);
  if (m[8] !== undefined) seconds -= (m[8] === '-' ? -1 : 1) * (Number(m[9]) * 3600 + Number(m[10]) * 60);
  const f = m[7] ?? '';
  let us = f.length <= 6 ? Number(f.padEnd(6, '0')) : Number(f.slice(0, 6)) + (f.charCodeAt(6) >= 53 ? 1 : 0);
  if (f.length === 0) us = 0;
  // Exact in a double while |seconds| < 2^53 / 10^6 (about the years 1685 to 2255).
  if (Math.abs(seconds) < 9_000_000_000) return String(seconds * 1_000_000 + us);
  return String(BigInt(seconds) * 1_000_000n + BigInt(us));
}

/** The separators of `YYYY-MM-DDTHH:MM:SS.sssZ` at their places, and digits between them. */
function isIsoMillis(t: string): boolean {
  if (t.length !== 24) return false;
  for (let i = 0; i < 24; i++) {
    const c = t.charCodeAt(i);
    const want = ISO_MILLIS_SHAPE.charCodeAt(i);
    if (want === 48 ? c < 48 || c > 57 : c !== want) return false;
  }
  return true;
}
const ISO_MILLIS_SHAPE = '0000-00-00T00:00:00.000Z';

/** Days from 1970-01-01 to a date of the proleptic Gregorian calendar (year 0 is 1 BC). */
function daysFromCivil(year: number, month: number, day: number): number {
  const y = month <= 2 ? year - 1 : year;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (month + (month > 2 ? -3 : 9)) + 2) / 5) + day - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

/** The version-3 digest from the inner digest and M, as the storing statement computed it. */
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
