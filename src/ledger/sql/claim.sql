-- The statement `claim` (src/ledger/sql/claim.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
with i as (select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::int8[],
    $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $16::text[])
    as i(key, namespace, resource_key, version, operation, fingerprint, lease_ms, retention_ms, downstream, owner,
      job_id, queue, task_id, step_id, facts)),
cur as (select l.*, (case when octet_length(i.fingerprint) = 64 and i.fingerprint !~ '[^0-9a-f]' then decode(i.fingerprint, 'hex')
    else convert_to(i.fingerprint, 'UTF8') || case when octet_length(i.fingerprint) = 32 then '\x00'::bytea else ''::bytea end end) as want from public.idempotency_ledger l join i on l.key = i.key),
ins as (
  insert into public.idempotency_ledger as l (key, namespace, resource_key, version, operation, fingerprint, status, epoch,
    downstream, lease_owner, lease_expires_at, retention_ms, last_transition, job_id, queue, task_id, step_id, created_at,
    updated_at, claimed_at, claim_transition, transitions, sweep_after)
  select i.key, i.namespace, i.resource_key, i.version, i.operation, (case when octet_length(i.fingerprint) = 64 and i.fingerprint !~ '[^0-9a-f]' then decode(i.fingerprint, 'hex')
    else convert_to(i.fingerprint, 'UTF8') || case when octet_length(i.fingerprint) = 32 then '\x00'::bytea else ''::bytea end end), 'locked', 1, i.downstream, i.owner,
    (now() + $15::int8 * interval '1 millisecond') + i.lease_ms * interval '1 millisecond', i.retention_ms, null, i.job_id, i.queue, i.task_id, i.step_id,
    null, (now() + $15::int8 * interval '1 millisecond'), null, null, '[' || 0 || ',1,' || floor(extract(epoch from (now() + $15::int8 * interval '1 millisecond')) * 1000)::int8 || coalesce(',' || i.facts, '') || ']', (now() + $15::int8 * interval '1 millisecond') + i.retention_ms * interval '1 millisecond'
  from i
  where not exists (select 1 from cur c where c.key = i.key and not ((c.status in ('locked') and c.lease_expires_at <= (now() + $15::int8 * interval '1 millisecond') and c.fingerprint = c.want) or (c.status in ('released') and c.fingerprint = c.want) or (c.status in ('completed','failed') and coalesce(c.expires_at, case when c.status in ('completed','failed','released','invalidated') then c.updated_at + c.retention_ms * interval '1 millisecond' end) <= (now() + $15::int8 * interval '1 millisecond')) or (c.status in ('invalidated') and true)))
  order by i.key
  on conflict (key) do update set
    status = case when ((l.status in ('locked') and l.downstream = 'none')) then 'unknown' else 'locked' end,
    epoch = l.epoch + 1,
    lease_owner = case when ((l.status in ('locked') and l.downstream = 'none')) then null else excluded.lease_owner end,
    lease_expires_at = case when ((l.status in ('locked') and l.downstream = 'none')) then null else excluded.lease_expires_at end,
    last_transition = case when l.status in ('locked') and l.downstream <> 'none' then 'takeover' when l.status in ('locked') and l.downstream = 'none' then 'takeover_unknown' when l.status in ('released') then 'reclaimed' when l.status in ('completed','failed') then 'reclaimed_after_expiry' when l.status in ('invalidated') then 'reclaimed_after_invalidation' end,
    error = case when ((l.status in ('locked') and l.downstream = 'none'))
      then jsonb_build_object('code', 'IDEMPOTENCY_LEASE_EXPIRED', 'message',
        'the attempt holding epoch ' || l.epoch || ' lost its lease before recording an outcome; the downstream has no idempotent API or lookup')
      else null end,
    operation = excluded.operation,
    fingerprint = excluded.fingerprint,
    downstream = case when l.status = 'locked' then l.downstream else excluded.downstream end,
    retention_ms = excluded.retention_ms, sweep_after = excluded.sweep_after,
    result = null, retryable = null, completed_at = null, expires_at = null,
    job_id = excluded.job_id, queue = excluded.queue,
    task_id = coalesce(excluded.task_id, l.task_id), step_id = coalesce(excluded.step_id, l.step_id),
    updated_at = excluded.updated_at, claimed_at = null, claim_transition = null,
    transitions = case when l.transitions is null then '[' || case (case when l.status in ('locked') and l.downstream <> 'none' then 'takeover' when l.status in ('locked') and l.downstream = 'none' then 'takeover_unknown' when l.status in ('released') then 'reclaimed' when l.status in ('completed','failed') then 'reclaimed_after_expiry' when l.status in ('invalidated') then 'reclaimed_after_invalidation' end) when 'claimed' then 0 when 'takeover' then 1 when 'takeover_unknown' then 2 when 'reclaimed' then 3 when 'reclaimed_after_expiry' then 4 when 'reclaimed_after_invalidation' then 5 when 'completed' then 6 when 'failed' then 7 when 'failed_retryable' then 8 when 'released' then 9 when 'marked_unknown' then 10 when 'invalidated' then 11 when 'resolved_committed' then 12 when 'resolved_not_committed' then 13 when 'record_lost' then 14 end || ',' || l.epoch + 1 || ',' || floor(extract(epoch from (now() + $15::int8 * interval '1 millisecond')) * 1000)::int8 || coalesce(',' || nullif(jsonb_strip_nulls(jsonb_build_object('o', excluded.lease_owner, 'j', excluded.job_id, 'q', excluded.queue, 'k', excluded.task_id, 'c', case when ((l.status in ('locked') and l.downstream = 'none')) then 'IDEMPOTENCY_LEASE_EXPIRED' end))::text, '{}'), '') || ']'
      else l.transitions || ',' || '[' || case (case when l.status in ('locked') and l.downstream <> 'none' then 'takeover' when l.status in ('locked') and l.downstream = 'none' then 'takeover_unknown' when l.status in ('released') then 'reclaimed' when l.status in ('completed','failed') then 'reclaimed_after_expiry' when l.status in ('invalidated') then 'reclaimed_after_invalidation' end) when 'claimed' then 0 when 'takeover' then 1 when 'takeover_unknown' then 2 when 'reclaimed' then 3 when 'reclaimed_after_expiry' then 4 when 'reclaimed_after_invalidation' then 5 when 'completed' then 6 when 'failed' then 7 when 'failed_retryable' then 8 when 'released' then 9 when 'marked_unknown' then 10 when 'invalidated' then 11 when 'resolved_committed' then 12 when 'resolved_not_committed' then 13 when 'record_lost' then 14 end || ',' || l.epoch + 1 || ',' || (floor(extract(epoch from (now() + $15::int8 * interval '1 millisecond')) * 1000)::int8 - rtrim(split_part(l.transitions, ',', 3), ']')::int8) || coalesce(',' || nullif(jsonb_strip_nulls(jsonb_build_object('o', excluded.lease_owner, 'j', excluded.job_id, 'q', excluded.queue, 'k', excluded.task_id, 'c', case when ((l.status in ('locked') and l.downstream = 'none')) then 'IDEMPOTENCY_LEASE_EXPIRED' end))::text, '{}'), '') || ']' end
  where ((l.status in ('locked') and l.lease_expires_at <= (now() + $15::int8 * interval '1 millisecond') and l.fingerprint = excluded.fingerprint) or (l.status in ('released') and l.fingerprint = excluded.fingerprint) or (l.status in ('completed','failed') and coalesce(l.expires_at, case when l.status in ('completed','failed','released','invalidated') then l.updated_at + l.retention_ms * interval '1 millisecond' end) <= (now() + $15::int8 * interval '1 millisecond')) or (l.status in ('invalidated') and true))
  returning key, status, epoch, fingerprint, lease_expires_at, result, error, completed_at, expires_at, updated_at, retention_ms, case when epoch = 1 then 'claimed' else last_transition end as made
)
select ins.key, ins.status, ins.epoch, (case when length(ins.fingerprint) = 32 then encode(ins.fingerprint, 'hex') else convert_from(rtrim(ins.fingerprint, '\x00'::bytea), 'UTF8') end) as fingerprint, floor(extract(epoch from ins.lease_expires_at) * 1000)::int8 as lease_expires_ms,
  ins.result, ins.error, floor(extract(epoch from coalesce(ins.completed_at, case when ins.status = 'completed' then ins.updated_at end)) * 1000)::int8 as completed_ms, floor(extract(epoch from coalesce(ins.expires_at, case when ins.status in ('completed','failed','released','invalidated') then ins.updated_at + ins.retention_ms * interval '1 millisecond' end)) * 1000)::int8 as expires_ms, ins.made as transition, true as acquired, true as claimable, null::int8 as retry_after_ms, floor(extract(epoch from updated_at) * 1000)::int8 as at_ms from ins
union all
select c.key, c.status, c.epoch, (case when length(c.fingerprint) = 32 then encode(c.fingerprint, 'hex') else convert_from(rtrim(c.fingerprint, '\x00'::bytea), 'UTF8') end) as fingerprint, floor(extract(epoch from c.lease_expires_at) * 1000)::int8 as lease_expires_ms,
  c.result, c.error, floor(extract(epoch from coalesce(c.completed_at, case when c.status = 'completed' then c.updated_at end)) * 1000)::int8 as completed_ms, floor(extract(epoch from coalesce(c.expires_at, case when c.status in ('completed','failed','released','invalidated') then c.updated_at + c.retention_ms * interval '1 millisecond' end)) * 1000)::int8 as expires_ms, null::text as transition, false, ((c.status in ('locked') and c.lease_expires_at <= (now() + $15::int8 * interval '1 millisecond') and c.fingerprint = c.want) or (c.status in ('released') and c.fingerprint = c.want) or (c.status in ('completed','failed') and coalesce(c.expires_at, case when c.status in ('completed','failed','released','invalidated') then c.updated_at + c.retention_ms * interval '1 millisecond' end) <= (now() + $15::int8 * interval '1 millisecond')) or (c.status in ('invalidated') and true)),
  case when c.status = 'locked' then greatest(0, ceil(extract(epoch from (c.lease_expires_at - (now() + $15::int8 * interval '1 millisecond'))) * 1000))::int8 end,
  floor(extract(epoch from (now() + $15::int8 * interval '1 millisecond')) * 1000)::int8
from cur c where not exists (select 1 from ins where ins.key = c.key)
