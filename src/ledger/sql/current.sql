-- The statement `current` (src/ledger/sql/current.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
select epoch, status from public.idempotency_ledger where key = $1
