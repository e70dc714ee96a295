-- The statement `resolve` (src/ledger/sql/resolve.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
update public.idempotency_ledger set
  status = case when $4::boolean then 'completed' else 'released' end,
  result = case when $4::boolean then $2::jsonb else null end,
  last_transition = null,
  epoch = epoch + 1,
  completed_at = null, expires_at = null, updated_at = (now() + $3::int8 * interval '1 millisecond'),
  transitions = case when transitions is null then '[' || case when $4::boolean then 12 else 13 end || ',' || epoch + 1 || ',' || floor(extract(epoch from (now() + $3::int8 * interval '1 millisecond')) * 1000)::int8 || coalesce(',' || nullif(jsonb_strip_nulls(jsonb_build_object('a', $5::text, 'r', $6::text))::text, '{}'), '') || ']'
      else transitions || ',' || '[' || case when $4::boolean then 12 else 13 end || ',' || epoch + 1 || ',' || (floor(extract(epoch from (now() + $3::int8 * interval '1 millisecond')) * 1000)::int8 - rtrim(split_part(transitions, ',', 3), ']')::int8) || coalesce(',' || nullif(jsonb_strip_nulls(jsonb_build_object('a', $5::text, 'r', $6::text))::text, '{}'), '') || ']' end
where key = $1 and status = 'unknown' returning epoch, floor(extract(epoch from updated_at) * 1000)::int8 as at_ms
