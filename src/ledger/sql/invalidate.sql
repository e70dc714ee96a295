-- The statement `invalidate` (src/ledger/sql/invalidate.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
with prev as (select key, status from public.idempotency_ledger where key = $1 for update)
update public.idempotency_ledger t set status = 'invalidated', epoch = t.epoch + 1, result = null, retryable = null,
  lease_owner = null, lease_expires_at = null, last_transition = null,
  expires_at = null, updated_at = (now() + $2::int8 * interval '1 millisecond'),
  transitions = case when t.transitions is null then '[' || 11 || ',' || t.epoch + 1 || ',' || floor(extract(epoch from (now() + $2::int8 * interval '1 millisecond')) * 1000)::int8 || coalesce(',' || nullif(jsonb_strip_nulls(jsonb_build_object('p', prev.status, 'a', $3::text, 'r', $4::text))::text, '{}'), '') || ']'
      else t.transitions || ',' || '[' || 11 || ',' || t.epoch + 1 || ',' || (floor(extract(epoch from (now() + $2::int8 * interval '1 millisecond')) * 1000)::int8 - rtrim(split_part(t.transitions, ',', 3), ']')::int8) || coalesce(',' || nullif(jsonb_strip_nulls(jsonb_build_object('p', prev.status, 'a', $3::text, 'r', $4::text))::text, '{}'), '') || ']' end
from prev where t.key = prev.key returning t.epoch, prev.status as previous_status, floor(extract(epoch from t.updated_at) * 1000)::int8 as at_ms
