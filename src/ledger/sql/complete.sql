-- The statement `complete` (src/ledger/sql/complete.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
update public.idempotency_ledger t set status = 'completed', result = u.result::jsonb, error = null, retryable = null,
  lease_owner = null, lease_expires_at = null, last_transition = null,
  job_id = case when t.transitions is null then t.job_id end, queue = case when t.transitions is null then t.queue end,
  completed_at = null, expires_at = null, updated_at = (now() + $4::int8 * interval '1 millisecond'),
  transitions = case when t.transitions is null then '[' || 6 || ',' || t.epoch || ',' || floor(extract(epoch from (now() + $4::int8 * interval '1 millisecond')) * 1000)::int8 || ']'
      else t.transitions || ',' || '[' || 6 || ',' || t.epoch || ',' || (floor(extract(epoch from (now() + $4::int8 * interval '1 millisecond')) * 1000)::int8 - rtrim(split_part(t.transitions, ',', 3), ']')::int8) || ']' end
from unnest($1::text[], $2::int4[], $3::text[]) as u(key, epoch, result)
where t.key = u.key and t.epoch = u.epoch and t.status = 'locked' returning t.key, floor(extract(epoch from t.updated_at) * 1000)::int8 as at_ms
