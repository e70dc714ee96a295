/**
 * The audit trail's hash chains, in SQL. Every stored event carries `chain_digest`, the SHA-256 of
 * the previous event's digest in its chain followed by the digest of its own columns
 * ({@link eventDigestSql}, under the version its `chain_v` records), and `chain_seq`, its place
 * in the chain. A chain is one UTC day of
 * events (the partitions are whole days, so a dropped partition takes whole chains) and one of
 * the writers' slots (`chain_slot`): concurrent writers append to different chains instead of
 * queueing on one head. The head of each chain (`audit_chains`) is locked and moved by the same
 * statement that stores the events; a chain whose day was dropped leaves its last head in
 * `audit_chain_anchors`, and starts again from it if its day is written again.
 *
 * Versions 1 and 2 of the columns' digest are computed by Postgres, from the columns as stored;
 * version 3 (event-digest.ts) by the writer from the event's values, canonically, completed by the
 * storing statement with the time as stored, and recomputed by `verify` from the row: what is
 * hashed is what is there, whatever the client's serialisation. The storing statement folds a
 * batch's digests onto its chains' heads in one window (`audit_chain_from`, migration 0015).
 */

/** The digest a chain starts from: 32 zero bytes. */
export const GENESIS_SQL = `'\\x${'00'.repeat(32)}'::bytea`;

/** The first digest of a chain, in JavaScript. */
export const GENESIS = Buffer.alloc(32);

/** The chain day of a time column: its UTC date. */
export const chainDaySql = (column: string) => `(${column} at time zone 'UTC')::date`;

/** The digests of an event's columns, by version (`chain_v`), oldest first. */
export const CHAIN_DIGEST_VERSIONS = [1, 2, 3] as const;
export type ChainDigestVersion = (typeof CHAIN_DIGEST_VERSIONS)[number];

/** The versions Postgres computes alone ({@link eventDigestSql}); version 3 is computed with the writer (event-digest.ts). */
export const SQL_DIGEST_VERSIONS = [1, 2] as const;
export type SqlDigestVersion = (typeof SQL_DIGEST_VERSIONS)[number];

/** The version the store writes: every new event is chained under it. */
export const CHAIN_DIGEST_VERSION: ChainDigestVersion = 3;

/** The stored `created_at` of row `a` as whole microseconds since the epoch (a bigint). */
const microsSql = (a: string) => `(extract(epoch from ${a}.created_at) * 1000000)::bigint`;

/** Every column an event's digest covers, `a` the row's alias: all but the chain's own and `received_at`. */
function digestColumns(a: string): string {
  return [
    `${a}.event_id`,
    // Whole microseconds since the epoch: neither the session's time zone nor its date style changes it.
    microsSql(a),
    ...[
      'seq',
      'task_id',
      'step_id',
      'operation_id',
      'actor_type',
      'actor_id',
      'action',
      'resource_type',
      'resource_id',
      'decision',
      'reason_code',
      'before_state_ref',
      'after_state_ref',
      'operation',
      'phase',
      'epoch',
      'job_id',
      'queue',
      'attempts_made',
      'attempts_started',
      'stalled_counter',
      'details',
      'redaction',
    ].map((c) => `${a}.${c}`),
  ].join(', ');
}

/**
 * The digest of one event's columns under a version Postgres computes alone, `a` the row's alias:
 * - 1, the events chained before the digest's version was recorded (`chain_v` 1): SHA-256 of a
 *   JSON array of the columns (jsonb's text form is canonical: key order, spacing, numbers);
 * - 2: SHA-256 of the columns' record text, `row(…)::text`. Unambiguous (a field holding a comma,
 *   a quote, a parenthesis or a space is quoted, a quote doubled; null is an empty field, an empty
 *   string `""`) and independent of the session's settings: the time is an integer, the jsonb
 *   columns their canonical text, the others text and integers. It builds no JSON value per event.
 *
 * Version 3 (event-digest.ts), what the store writes now: rendering a row's text cost Postgres
 * 15-25 µs an event, most of what the chain cost; the writer hashes the columns, the statement
 * only the time as stored.
 */
export function eventDigestSql(a: string, version: SqlDigestVersion): string {
  const text = version === 1 ? `jsonb_build_array(${digestColumns(a)})::text` : `row(${digestColumns(a)})::text`;
  return `sha256(convert_to(${text}, 'UTF8'))`;
}

/**
 * The digest of a stored event under the version its row records (`a.chain_v`) when Postgres
 * computes it alone; null under version 3 (the verifier computes it) and under a version this
 * code does not know, which `verify` reports as changed.
 */
export const storedDigestSql = (a: string) =>
  `case ${a}.chain_v ${SQL_DIGEST_VERSIONS.map((v) => `when ${v} then ${eventDigestSql(a, v)}`).join(' ')} end`;

/** The stored `created_at` of row `a` as whole microseconds since the epoch, in decimal: the M of digest version 3 (event-digest.ts). */
export const microsTextSql = (a: string) => `(${microsSql(a)})::text`;

/** Message of the error the store's statement raises when a chain's head row is missing. */
export const CHAIN_HEAD_MISSING = 'audit chain head missing';
