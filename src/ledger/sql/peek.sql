-- The statement `peek` (src/ledger/sql/peek.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
select l.key, l.status, l.epoch, (case when length(l.fingerprint) = 32 then encode(l.fingerprint, 'hex') else convert_from(rtrim(l.fingerprint, '\x00'::bytea), 'UTF8') end) as fingerprint, floor(extract(epoch from l.lease_expires_at) * 1000)::int8 as lease_expires_ms,
  l.result, l.error, floor(extract(epoch from coalesce(l.completed_at, case when l.status = 'completed' then l.updated_at end)) * 1000)::int8 as completed_ms, floor(extract(epoch from coalesce(l.expires_at, case when l.status in ('completed','failed','released','invalidated') then l.updated_at + l.retention_ms * interval '1 millisecond' end)) * 1000)::int8 as expires_ms, null::text as transition, false as acquired,
  ((l.status in ('locked') and l.lease_expires_at <= (now() + $3::int8 * interval '1 millisecond') and l.fingerprint = (case when octet_length(i.want) = 64 and i.want !~ '[^0-9a-f]' then decode(i.want, 'hex')
    else convert_to(i.want, 'UTF8') || case when octet_length(i.want) = 32 then '\x00'::bytea else ''::bytea end end)) or (l.status in ('released') and l.fingerprint = (case when octet_length(i.want) = 64 and i.want !~ '[^0-9a-f]' then decode(i.want, 'hex')
    else convert_to(i.want, 'UTF8') || case when octet_length(i.want) = 32 then '\x00'::bytea else ''::bytea end end)) or (l.status in ('completed','failed') and coalesce(l.expires_at, case when l.status in ('completed','failed','released','invalidated') then l.updated_at + l.retention_ms * interval '1 millisecond' end) <= (now() + $3::int8 * interval '1 millisecond')) or (l.status in ('invalidated') and true)) as claimable,
  case when l.status = 'locked' then greatest(0, ceil(extract(epoch from (l.lease_expires_at - (now() + $3::int8 * interval '1 millisecond'))) * 1000))::int8 end
    as retry_after_ms,
  floor(extract(epoch from (now() + $3::int8 * interval '1 millisecond')) * 1000)::int8 as at_ms
from unnest($1::text[], $2::text[]) as i(key, want) join public.idempotency_ledger l on l.key = i.key
