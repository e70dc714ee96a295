-- The statement `sweepCandidates` (src/ledger/sql/sweep-candidates.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
select *, sweep_after::text as cursor_at from public.idempotency_ledger l
  where sweep_after <= (now() + $2::int8 * interval '1 millisecond') and (sweep_after > $3::timestamptz or (sweep_after = $3::timestamptz and key > $4::text))
    and status in ('completed','failed','released','invalidated') and coalesce(l.expires_at, case when l.status in ('completed','failed','released','invalidated') then l.updated_at + l.retention_ms * interval '1 millisecond' end) <= (now() + $2::int8 * interval '1 millisecond')
  order by sweep_after, key limit $1 for update skip locked
