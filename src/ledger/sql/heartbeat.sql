-- The statement `heartbeat` (src/ledger/sql/heartbeat.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
update public.idempotency_ledger set lease_expires_at = (now() + $4::int8 * interval '1 millisecond') + $3::int8 * interval '1 millisecond'
where key = $1 and epoch = $2 and status = 'locked' returning lease_expires_at, (now() + $4::int8 * interval '1 millisecond') as at
