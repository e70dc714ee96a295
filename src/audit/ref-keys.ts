import type pg from 'pg';
import { checkSchema } from '../db/connection.js';

/** Identifier columns that may hold a keyed ref `hmac:<key id>:…`, by table. */
const REF_COLUMNS: readonly [string, readonly string[]][] = [
  [
    'audit_events',
    [
      'task_id',
      'actor_id',
      'resource_id',
      'job_id',
      'step_id',
      'operation_id',
      'operation',
      'queue',
      'reason_code',
      'before_state_ref',
      'after_state_ref',
    ],
  ],
  ['idempotency_ledger', ['task_id', 'job_id', 'step_id']],
  ['idempotency_confirmations', ['task_id', 'name', 'answered_by', 'job_id']],
];

/** Keyed refs stored, by the key that made them. */
export type RefKeyUsage = {
  /** Refs by key id, over every identifier column of the trail, the ledger and confirmations. */
  byKey: Record<string, number>;
  /**
   * Key ids of stored refs that the keyring does not hold, with their counts: refs made by a
   * process keyed otherwise (one without `BQI_KEYRING` keys its refs with a key of its own) or
   * by a key since removed. A lookup by the clear id cannot find what they stand for.
   */
  unknown: { keyId: string; refs: number }[];
};

/**
 * Counts the keyed refs stored in the schema's identifier columns by key id, and names those
 * made under a key not in `heldKeyIds` (the keyring's ids: `keyring.ids`). One scan of each
 * table: an operator's check, not a hot path.
 *
 * @example
 * const usage = await refKeyUsage(pool, 'public', keyring.ids);
 * if (usage.unknown.length > 0) alert(usage.unknown);
 */
export async function refKeyUsage(pool: pg.Pool, schema: string, heldKeyIds: readonly string[]): Promise<RefKeyUsage> {
  const s = checkSchema(schema);
  const parts = REF_COLUMNS.map(
    ([table, cols]) =>
      `select substring(x.v from '^hmac:([A-Za-z0-9._-]{1,32}):') as kid from ${s}.${table} t,
        lateral (values ${cols.map((c) => `(t.${c}::text)`).join(', ')}) as x(v) where x.v like 'hmac:%'`,
  );
  const res = await pool.query<{ kid: string; n: string }>(
    `select kid, count(*) as n from (${parts.join(' union all ')}) r where kid is not null group by kid order by kid`,
  );
  const byKey: Record<string, number> = {};
  for (const r of res.rows) byKey[r.kid] = Number(r.n);
  const held = new Set(heldKeyIds);
  return {
    byKey,
    unknown: Object.entries(byKey)
      .filter(([kid]) => !held.has(kid))
      .map(([keyId, refs]) => ({ keyId, refs })),
  };
}
