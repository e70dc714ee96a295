/**
 * The audit trail's hash chains, in SQL. Every stored event carries `chain_digest`, the SHA-256 of
 * the previous event's digest in its chain followed by the digest of its own columns
 * ({@link eventDigestSql}), and `chain_seq`, its place in the chain. A chain is one UTC day of
 * events (the partitions are whole days, so a dropped partition takes whole chains) and one of
 * the writers' slots (`chain_slot`): concurrent writers append to different chains instead of
 * queueing on one head. The head of each chain (`audit_chains`) is locked and moved by the same
 * statement that stores the events; a chain whose day was dropped leaves its last head in
 * `audit_chain_anchors`, and starts again from it if its day is written again.
 *
 * The digests are computed by Postgres, from the columns as stored, both when writing and when
 * verifying: what is hashed is what is there, whatever the client's serialisation.
 */

/** The digest a chain starts from: 32 zero bytes. */
export const GENESIS_SQL = `'\\x${'00'.repeat(32)}'::bytea`;

/** The first digest of a chain, in JavaScript. */
export const GENESIS = Buffer.alloc(32);

/** The chain day of a time column: its UTC date. */
export const chainDaySql = (column: string) => `(${column} at time zone 'UTC')::date`;

/**
 * The digest of one event's columns, `a` the row's alias: SHA-256 of a JSON array of every
 * column but the chain's own and `received_at`. jsonb's text form is canonical (key order,
 * spacing, numbers), and the time is whole microseconds since the epoch, so neither the session's
 * time zone nor its date style changes it.
 */
export function eventDigestSql(a: string): string {
  const cols = [
    `${a}.event_id`,
    `(extract(epoch from ${a}.created_at) * 1000000)::bigint`,
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
  ];
  return `sha256(convert_to(jsonb_build_array(${cols.join(', ')})::text, 'UTF8'))`;
}

/** Message of the error the store's statement raises when a chain's head row is missing. */
export const CHAIN_HEAD_MISSING = 'audit chain head missing';
