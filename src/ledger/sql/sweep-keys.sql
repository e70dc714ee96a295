-- The statement `sweepKeys` (src/ledger/sql/sweep-keys.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
delete from public.idempotency_ledger where key = any($1::text[])
