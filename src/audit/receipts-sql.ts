/**
 * Redaction receipts, stored once (migrations/0019): `audit_receipts` holds each distinct receipt
 * (`receipt`, jsonb) under the SHA-256 of its jsonb text (`digest`, unique: jsonb's text is
 * canonical, so equal receipts have one digest), and an event row its id (`redaction_ref`). Rows
 * stored before keep their receipt in `redaction` (then `redaction_ref` is null). Receipts are
 * never deleted: dropping a partition leaves them, and they are few (one per shape of event and
 * policy).
 *
 * An event's digest (event-digest.ts) covers its receipt's value, wherever it is kept: a receipt
 * changed in `audit_receipts` makes every event that refers to it fail `verify`.
 */

/** The receipt of row `a` of audit_events (schema `s`), as stored either way. */
export const receiptSql = (s: string, a: string) =>
  `coalesce(${a}.redaction, (select r.receipt from ${s}.audit_receipts r where r.id = ${a}.redaction_ref))`;

/** The key a receipt (a jsonb expression) is stored under: the SHA-256 of its text; null for null. */
export const receiptDigestSql = (receipt: string) => `sha256(convert_to((${receipt})::text, 'UTF8'))`;

/** Message of the error the store's statement raises when a receipt it refers to is not visible to it. */
export const RECEIPT_MISSING = 'audit receipt missing';
