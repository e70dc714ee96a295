-- The statement `insertAndComplete` (src/ledger/sql/insert-and-complete.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
with done as (update public.idempotency_ledger t set status = 'completed', result = u.result::jsonb, error = null, retryable = null,
  lease_owner = null, lease_expires_at = null, last_transition = null,
  job_id = case when t.transitions is null then t.job_id end, queue = case when t.transitions is null then t.queue end,
  completed_at = null, expires_at = null, updated_at = (now() + $15::int8 * interval '1 millisecond'),
  transitions = case when t.transitions is null then '[' || 6 || ',' || t.epoch || ',' || floor(extract(epoch from (now() + $15::int8 * interval '1 millisecond')) * 1000)::int8 || ']'
      else t.transitions || ',' || '[' || 6 || ',' || t.epoch || ',' || (floor(extract(epoch from (now() + $15::int8 * interval '1 millisecond')) * 1000)::int8 - rtrim(split_part(t.transitions, ',', 3), ']')::int8) || ']' end
from unnest($17::text[], $18::int4[], $19::text[]) as u(key, epoch, result)
where t.key = u.key and t.epoch = u.epoch and t.status = 'locked' returning t.key, floor(extract(epoch from t.updated_at) * 1000)::int8 as at_ms),
fresh as (insert into public.idempotency_ledger as l (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
    downstream, lease_owner, lease_expires_at, retention_ms, last_transition, job_id, queue, task_id, step_id, created_at,
    updated_at, claimed_at, claim_transition, transitions, sweep_after)
  select i.key, i.namespace, i.resource_key, i.version, i.operation, (case when octet_length(i.fingerprint) = 64 and i.fingerprint !~ '[^0-9a-f]' then decode(i.fingerprint, 'hex')
    else convert_to(i.fingerprint, 'UTF8') || case when octet_length(i.fingerprint) = 32 then '\x00'::bytea else ''::bytea end end), 'locked', 1, i.downstream, null,
    (now() + $15::int8 * interval '1 millisecond') + i.lease_ms * interval '1 millisecond', i.retention_ms, null, null, null, i.task_id, i.step_id,
    null, (now() + $15::int8 * interval '1 millisecond'), null, null, '[' || 0 || ',1,' || floor(extract(epoch from (now() + $15::int8 * interval '1 millisecond')) * 1000)::int8 || coalesce(',' || i.facts, '') || ']', (now() + $15::int8 * interval '1 millisecond') + i.retention_ms * interval '1 millisecond'
  from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::int8[],
    $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $16::text[])
    as i(key, namespace, resource_key, version, operation, fingerprint, lease_ms, retention_ms, downstream, owner,
      job_id, queue, task_id, step_id, facts)
  where not exists (select 1 from public.idempotency_ledger x where x.key = i.key)
  order by i.key
  returning key, floor(extract(epoch from updated_at) * 1000)::int8 as at_ms)
select key, at_ms, true as completed from done
union all
select key, at_ms, false from fresh
