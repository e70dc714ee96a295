/**
 * The audit trail's hash chains, in SQL. A chain is one UTC day of events (the partitions are
 * whole days, so a dropped partition takes whole chains) and one of the writers' slots
 * (`chain_slot`): concurrent writers append to different chains instead of queueing on one head.
 * Every stored event carries `chain_seq`, its place in the chain, `chain_v`, the version of its
 * digest, and `chain_digest`:
 * - versions 1 to 3, the event's link: SHA-256 of the previous event's link followed by the digest
 *   of its own columns ({@link eventDigestSql} for 1 and 2, event-digest.ts for 3);
 * - version 4, the digest of its own columns and time (`eventDigestV4`, computed whole by the
 *   writer); the events a statement appends to a chain are linked once, as a batch: the link,
 *   SHA-256 of the previous link followed by the batch's digests in chain order, is stored on the
 *   batch's last row (`chain_link`, null on the others). An event changed after it was written
 *   no longer matches its own digest and is named; one rewritten together with its digest breaks
 *   its batch's link, and is found by its batch.
 * The head of each chain (`audit_chains`: the last place and link) is locked and moved by the same
 * statement that stores the events; a chain whose day was dropped leaves its last head in
 * `audit_chain_anchors`, and starts again from it if its day is written again.
 *
 * Versions 1 and 2 are computed by Postgres, from the columns as stored; versions 3 and 4 by the
 * writer from the event's values, canonically, and recomputed by `verify` from the row: what is
 * hashed is what is there, whatever the client's serialisation.
 */

/** The digest a chain starts from: 32 zero bytes. */
export const GENESIS_SQL = `'\\x${'00'.repeat(32)}'::bytea`;

/** The first digest of a chain, in JavaScript. */
export const GENESIS = Buffer.alloc(32);

/** The chain day of a time column: its UTC date. */
export const chainDaySql = (column: string) => `(${column} at time zone 'UTC')::date`;

/** The digests of an event's columns, by version (`chain_v`), oldest first. */
export const CHAIN_DIGEST_VERSIONS = [1, 2, 3, 4] as const;
export type ChainDigestVersion = (typeof CHAIN_DIGEST_VERSIONS)[number];

/** The versions Postgres computes alone ({@link eventDigestSql}); versions 3 and 4 are computed with the writer (event-digest.ts). */
export const SQL_DIGEST_VERSIONS = [1, 2] as const;
export type SqlDigestVersion = (typeof SQL_DIGEST_VERSIONS)[number];

/** The version the store writes: every new event is chained under it. */
export const CHAIN_DIGEST_VERSION: ChainDigestVersion = 4;

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
 * Versions 3 and 4 (event-digest.ts): rendering a row's text cost Postgres 15-25 µs an event,
 * most of what the chain cost; the writer hashes the columns (version 3: the statement then the
 * time as stored; version 4: the writer the time too, which the statement stores as given).
 */
export function eventDigestSql(a: string, version: SqlDigestVersion): string {
  const text = version === 1 ? `jsonb_build_array(${digestColumns(a)})::text` : `row(${digestColumns(a)})::text`;
  return `sha256(convert_to(${text}, 'UTF8'))`;
}

/**
 * The digest of a stored event under the version its row records (`a.chain_v`) when Postgres
 * computes it alone; null under versions 3 and 4 (the verifier computes them) and under a version this
 * code does not know, which `verify` reports as changed.
 */
export const storedDigestSql = (a: string) =>
  `case ${a}.chain_v ${SQL_DIGEST_VERSIONS.map((v) => `when ${v} then ${eventDigestSql(a, v)}`).join(' ')} end`;

/** The stored `created_at` of row `a` as whole microseconds since the epoch, in decimal: the M of digest versions 3 and 4 (event-digest.ts). */
export const microsTextSql = (a: string) => `(${microsSql(a)})::text`;

/**
 * The time `m` whole microseconds (a bigint) after the epoch, exactly: whole seconds and the
 * microseconds left, each times an interval of pure time, whose products a double holds exactly
 * for any time a timestamptz can hold. (No day or month part: the session's time zone plays no
 * part.)
 */
export const timeOfMicrosSql = (m: string) =>
  `('epoch'::timestamptz + (${m} / 1000000) * interval '1 second' + (${m} % 1000000) * interval '1 microsecond')`;

/** Message of the error the store's statement raises when a chain's head row is missing. */
export const CHAIN_HEAD_MISSING = 'audit chain head missing';
