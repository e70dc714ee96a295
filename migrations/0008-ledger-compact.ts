import { type Kysely, sql } from 'kysely';
import { TRANSITION_CODES } from '../src/ledger/recorded-transition.js';
import { claimsOfExistingRows } from '../src/ledger/transitions.js';

/**
 * A smaller ledger row whose completion is a HOT update (`npm run bench:scale`, README "Scale"):
 *
 * - `transitions` becomes text: one JSON array per transition, `[code, epoch, ms, {facts}]`, the
 *   time of every entry but the first as milliseconds since the first (see `parseTransitions`),
 *   instead of a jsonb array of objects repeating their key names;
 * - what the row can derive is left out of new rows (null): the key's parts when the key is not
 *   hashed (the key spells them), the last transition, the current claim and its time (the
 *   record of transitions has them). Rows from before keep theirs;
 * - the sweeper's index on `expires_at` goes: an index on a column that a completion changes
 *   makes every completion a new tuple on another page with an entry in every index. The sweeper
 *   reads the heap by page ranges instead, and a fillfactor of 90 leaves room on each page for
 *   the completions of the rows inserted there.
 *
 * Existing rows are converted in place (the type change rewrites the table, under an exclusive
 * lock: on a large ledger, run it when the ledger may pause). `down` restores the former form.
 */
export function ledgerCompactMigration(schema: string) {
  const table = sql.table(`${schema}.idempotency_ledger`);
  const expiresIndex = sql.raw(`${schema}.idempotency_ledger_expires_idx`);
  const codeOfName = sql.raw(
    `case e->>'t' ${Object.entries(TRANSITION_CODES)
      .map(([t, c]) => `when '${t}' then ${c}`)
      .join(' ')} end`,
  );
  const nameOfCode = sql.raw(
    `case (a->>0)::int ${Object.entries(TRANSITION_CODES)
      .map(([t, c]) => `when ${c} then '${t}'`)
      .join(' ')} end`,
  );
  const claimNames = ['claimed', ...claimsOfExistingRows().map((c) => c.name)].map((n) => `'${n}'`).join(',');
  const nullable = [
    'namespace',
    'resource_key',
    'version',
    'last_transition',
    'claimed_at',
    'claim_transition',
    'created_at',
  ];
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`create function pg_temp.bqi_compact_transitions(t jsonb) returns text language sql immutable as $$
        select string_agg('[' || c || ',' || (e->>'e') || ',' || (case when rn = 1 then at else at - base end)
            || coalesce(',' || nullif((e - 't' - 'e' - 'at')::text, '{}'), '') || ']', ',' order by n)
        from (
          select n, e, c, (e->>'at')::int8 as at, row_number() over (order by n) as rn,
            first_value((e->>'at')::int8) over (order by n) as base
          from jsonb_array_elements(t) with ordinality as x(e, n), lateral (select ${codeOfName} as c) k
          where c is not null
        ) s
      $$`.execute(db);
      await sql`drop index ${expiresIndex}`.execute(db);
      await sql`alter table ${table}
        ${sql.raw(nullable.map((c) => `alter column ${c} drop not null`).join(', '))},
        alter column transitions type text using pg_temp.bqi_compact_transitions(transitions),
        set (fillfactor = 90)`.execute(db);
      await sql`drop function pg_temp.bqi_compact_transitions(jsonb)`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`create function pg_temp.bqi_expand_transitions(t text) returns jsonb language sql immutable as $$
        select jsonb_agg(jsonb_build_object('t', ${nameOfCode}, 'e', a->1,
            'at', case when n = 1 then (a->>2)::int8 else base + (a->>2)::int8 end) || coalesce(a->3, '{}') order by n)
        from jsonb_array_elements(('[' || t || ']')::jsonb) with ordinality as x(a, n),
          lateral (select (('[' || t || ']')::jsonb->0->>2)::int8 as base) b
      $$`.execute(db);
      await sql`alter table ${table} alter column transitions type jsonb
        using pg_temp.bqi_expand_transitions(transitions), reset (fillfactor)`.execute(db);
      await sql`drop function pg_temp.bqi_expand_transitions(text)`.execute(db);
      const lastClaim = (field: string) =>
        sql.raw(`(select e->>'${field}' from jsonb_array_elements(transitions) with ordinality as x(e, n)
          where e->>'t' in (${claimNames}) order by n desc limit 1)`);
      await sql`update ${table} set last_transition = coalesce(last_transition, transitions->-1->>'t'),
        claim_transition = coalesce(claim_transition, ${lastClaim('t')}),
        claimed_at = coalesce(claimed_at, to_timestamp((${lastClaim('at')})::int8 / 1000.0)),
        created_at = coalesce(created_at, to_timestamp((transitions->0->>'at')::int8 / 1000.0)),
        completed_at = coalesce(completed_at, case when status = 'completed' then updated_at end),
        expires_at = coalesce(expires_at, case when status in ('completed','failed','released','invalidated')
          then updated_at + retention_ms * interval '1 millisecond' end)`.execute(db);
      // The key's parts, decoded from the key (percent-encoding) where the row left them out.
      for (;;) {
        const rows = (
          await sql<{ key: string }>`select key from ${table} where namespace is null limit 10000`.execute(db)
        ).rows;
        if (rows.length === 0) break;
        const parts = rows.map((r) => r.key.split(':').map((p) => decodeURIComponent(p)));
        await sql`update ${table} t set namespace = p.n, resource_key = p.r, version = p.v
          from unnest(${rows.map((r) => r.key)}::text[], ${parts.map((p) => p[0])}::text[],
            ${parts.map((p) => p[1])}::text[], ${parts.map((p) => p[2])}::text[]) as p(k, n, r, v)
          where t.key = p.k`.execute(db);
      }
      await sql`alter table ${table}
        ${sql.raw(nullable.map((c) => `alter column ${c} set not null`).join(', '))}`.execute(db);
      await sql`create index idempotency_ledger_expires_idx on ${table} (expires_at)
        where status in ('completed','failed','released','invalidated')`.execute(db);
    },
  };
}
