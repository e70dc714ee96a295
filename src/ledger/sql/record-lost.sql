-- The statement `recordLost` (src/ledger/sql/record-lost.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
insert into public.idempotency_ledger as l (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
    downstream, retention_ms, job_id, queue, task_id, step_id, updated_at, error, transitions, sweep_after)
  select i.key, i.namespace, i.resource_key, i.version, i.operation, (case when octet_length(i.fingerprint) = 64 and i.fingerprint !~ '[^0-9a-f]' then decode(i.fingerprint, 'hex')
    else convert_to(i.fingerprint, 'UTF8') || case when octet_length(i.fingerprint) = 32 then '\x00'::bytea else ''::bytea end end), 'unknown', $17::int4,
    i.downstream, i.retention_ms, i.job_id, i.queue, i.task_id, i.step_id, (now() + $15::int8 * interval '1 millisecond'), $18::jsonb,
    '[' || 14 || ',' || $17::int4 || ',' || floor(extract(epoch from (now() + $15::int8 * interval '1 millisecond')) * 1000)::int8 || coalesce(',' || nullif(jsonb_strip_nulls(jsonb_build_object('o', i.owner, 'j', i.job_id, 'q', i.queue, 'k', i.task_id, 'c', $18::jsonb->>'code'))::text, '{}'), '') || ']',
    (now() + $15::int8 * interval '1 millisecond') + i.retention_ms * interval '1 millisecond'
  from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::int8[],
    $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $16::text[])
    as i(key, namespace, resource_key, version, operation, fingerprint, lease_ms, retention_ms, downstream, owner,
      job_id, queue, task_id, step_id, facts)
  on conflict (key) do update set status = 'unknown', epoch = excluded.epoch, error = excluded.error,
    lease_owner = null, lease_expires_at = null, last_transition = null, result = null, retryable = null,
    completed_at = null, expires_at = null, claimed_at = null, claim_transition = null,
    operation = excluded.operation, fingerprint = excluded.fingerprint, downstream = excluded.downstream,
    retention_ms = excluded.retention_ms, job_id = excluded.job_id, queue = excluded.queue,
    task_id = coalesce(excluded.task_id, l.task_id), step_id = coalesce(excluded.step_id, l.step_id),
    updated_at = excluded.updated_at,
    transitions = case when l.transitions is null then '[' || 14 || ',' || excluded.epoch || ',' || floor(extract(epoch from (now() + $15::int8 * interval '1 millisecond')) * 1000)::int8 || coalesce(',' || nullif(jsonb_strip_nulls(jsonb_build_object('j', excluded.job_id, 'q', excluded.queue, 'k', excluded.task_id, 'c', excluded.error->>'code'))::text, '{}'), '') || ']'
      else l.transitions || ',' || '[' || 14 || ',' || excluded.epoch || ',' || (floor(extract(epoch from (now() + $15::int8 * interval '1 millisecond')) * 1000)::int8 - rtrim(split_part(l.transitions, ',', 3), ']')::int8) || coalesce(',' || nullif(jsonb_strip_nulls(jsonb_build_object('j', excluded.job_id, 'q', excluded.queue, 'k', excluded.task_id, 'c', excluded.error->>'code'))::text, '{}'), '') || ']' end
  where l.epoch < excluded.epoch
  returning floor(extract(epoch from updated_at) * 1000)::int8 as at_ms
